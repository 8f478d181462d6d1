package desired

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
)

// hcpNamespace is the HostedControlPlane namespace of the test inputs.
const hcpNamespace = "clusters-example"

// testImages returns a full set of controller images, each naming its role.
func testImages() operandimages.Controller {
	return operandimages.Controller{
		Driver:        "cinder-csi-driver@sha256:d1",
		Provisioner:   "csi-external-provisioner@sha256:p1",
		Attacher:      "csi-external-attacher@sha256:a1",
		Resizer:       "csi-external-resizer@sha256:r1",
		Snapshotter:   "csi-external-snapshotter@sha256:s1",
		LivenessProbe: "csi-livenessprobe@sha256:l1",
		KubeRBACProxy: "kube-rbac-proxy@sha256:k1",
	}
}

// hyperShiftInputs returns the inputs of a single-replica hosted cluster whose
// HostedControlPlane sets a nodeSelector, a toleration and labels (one of which, app, collides
// with the operator's own pod label).
func hyperShiftInputs() controllerInputs {
	return controllerInputs{
		HyperShift:   true,
		Namespace:    hcpNamespace,
		Images:       testImages(),
		ClusterID:    "example-x7k2p",
		NodeSelector: map[string]string{"node-pool": "control-plane"},
		Tolerations: []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "hcp", Effect: corev1.TaintEffectNoSchedule},
		},
		PodLabels: map[string]string{"team": "storage", "app": "hcp-wants-this"},
		Verbosity: 2,
		Hashes: map[string]string{
			nodeconf.HashInput: "c0ffee",
			hashCredentials:    "5ec4e7",
		},
	}
}

// controllerDeployment renders the controller Deployment or fails the test.
func controllerDeployment(t testing.TB, in controllerInputs) *appsv1.Deployment {
	return testutil.Build(t, func(d *manifests.Decoder) (*appsv1.Deployment, error) { return desiredController(d, in) })
}

// podContainer returns the named container.
func podContainer(g Gomega, pod corev1.PodSpec, name string) corev1.Container {
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	g.Expect(i).NotTo(Equal(-1), "container %s", name)
	return pod.Containers[i]
}

func TestDesiredController(t *testing.T) {
	t.Parallel()
	sidecars := []string{"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"}

	tests := []struct {
		name  string
		edit  func(*controllerInputs)
		check func(g Gomega, dep *appsv1.Deployment)
	}{
		{
			name: "When on HyperShift, it should use the hypershift-control-plane priority class",
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Template.Spec.PriorityClassName).To(Equal("hypershift-control-plane"))
			},
		},
		{
			name: "When on HyperShift, it should tolerate control-plane and this cluster's nodes, then the HCP's tolerations",
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Template.Spec.Tolerations).To(Equal([]corev1.Toleration{
					{Key: "hypershift.openshift.io/control-plane", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
					{Key: "hypershift.openshift.io/cluster", Operator: corev1.TolerationOpEqual, Value: hcpNamespace, Effect: corev1.TaintEffectNoSchedule},
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "hcp", Effect: corev1.TaintEffectNoSchedule},
				}))
			},
		},
		{
			name: "When on HyperShift, it should prefer control-plane nodes, this cluster's nodes and the hosted control plane's pods",
			check: func(g Gomega, dep *appsv1.Deployment) {
				aff := dep.Spec.Template.Spec.Affinity
				g.Expect(aff).NotTo(BeNil())
				g.Expect(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeNil())
				terms := aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				g.Expect(terms).To(HaveLen(2))
				g.Expect(terms[0].Weight).To(Equal(int32(50)))
				g.Expect(terms[0].Preference.MatchExpressions).To(Equal([]corev1.NodeSelectorRequirement{
					{Key: "hypershift.openshift.io/control-plane", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}))
				g.Expect(terms[1].Weight).To(Equal(int32(100)))
				g.Expect(terms[1].Preference.MatchExpressions).To(Equal([]corev1.NodeSelectorRequirement{
					{Key: "hypershift.openshift.io/cluster", Operator: corev1.NodeSelectorOpIn, Values: []string{hcpNamespace}}}))

				pods := aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(map[string]string{"hypershift.openshift.io/hosted-control-plane": hcpNamespace}))
				g.Expect(pods[0].PodAffinityTerm.TopologyKey).To(Equal("kubernetes.io/hostname"))
			},
		},
		{
			name: "When on HyperShift, it should spread the replicas over nodes",
			check: func(g Gomega, dep *appsv1.Deployment) {
				anti := dep.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				g.Expect(anti).To(HaveLen(1))
				g.Expect(anti[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(dep.Spec.Selector.MatchLabels))
				g.Expect(anti[0].PodAffinityTerm.TopologyKey).To(Equal("kubernetes.io/hostname"))
			},
		},
		{
			name: "When on HyperShift, it should label the pods with the hosted control plane namespace",
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue("hypershift.openshift.io/hosted-control-plane", hcpNamespace))
			},
		},
		{
			name: "When the HostedControlPlane has labels, it should add them without overwriting app",
			check: func(g Gomega, dep *appsv1.Deployment) {
				labels := dep.Spec.Template.Labels
				g.Expect(labels).To(HaveKeyWithValue("team", "storage"))
				g.Expect(labels).To(HaveKeyWithValue("app", names.ControllerDeployment))
				for k, v := range dep.Spec.Selector.MatchLabels {
					g.Expect(labels).To(HaveKeyWithValue(k, v), "the selector must select the pods")
				}
			},
		},
		{
			name: "When the HostedControlPlane has a nodeSelector, it should apply it",
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"node-pool": "control-plane"}))
			},
		},
		{
			name: "When rendered, it should harden every container and give it resource requests",
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Template.Spec.Containers).To(HaveLen(11))
				for _, c := range dep.Spec.Template.Spec.Containers {
					g.Expect(c.SecurityContext).NotTo(BeNil(), c.Name)
					g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
					g.Expect(c.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError), c.Name)
					g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent), c.Name)
					g.Expect(c.Resources.Requests.Cpu().IsZero()).To(BeFalse(), c.Name)
					g.Expect(c.Resources.Requests.Memory().IsZero()).To(BeFalse(), c.Name)
					g.Expect(c.Resources.Limits).To(BeEmpty(), c.Name)
				}
			},
		},
		{
			name: "When on HyperShift, it should point the sidecars, and only them, at the mounted guest kubeconfig",
			check: func(g Gomega, dep *appsv1.Deployment) {
				pod := dep.Spec.Template.Spec
				vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "hosted-kubeconfig" })
				g.Expect(vol).NotTo(Equal(-1))
				g.Expect(pod.Volumes[vol].Secret).NotTo(BeNil())
				g.Expect(pod.Volumes[vol].Secret.SecretName).To(Equal("service-network-admin-kubeconfig"))
				for _, c := range pod.Containers {
					kubeconfig, hasFlag := testutil.FlagValue(c.Args, "kubeconfig")
					mount := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "hosted-kubeconfig" })
					if !slices.Contains(sidecars, c.Name) {
						g.Expect(hasFlag).To(BeFalse(), c.Name)
						g.Expect(mount).To(Equal(-1), c.Name)
						continue
					}
					g.Expect(hasFlag).To(BeTrue(), c.Name)
					g.Expect(mount).NotTo(Equal(-1), c.Name)
					m := c.VolumeMounts[mount]
					g.Expect(m.ReadOnly).To(BeTrue(), c.Name)
					g.Expect(kubeconfig).To(Equal(m.MountPath+"/kubeconfig"), c.Name)
				}
			},
		},
		{
			name: "When rendered, it should give the sidecars leader election with OpenShift's 137s/107s/26s timings in the guest namespace",
			check: func(g Gomega, dep *appsv1.Deployment) {
				for _, name := range sidecars {
					args := podContainer(g, dep.Spec.Template.Spec, name).Args
					g.Expect(args).To(ContainElement("--leader-election"), name)
					ns, ok := testutil.FlagValue(args, "leader-election-namespace")
					g.Expect(ok).To(BeTrue(), name)
					g.Expect(ns).To(Equal(names.GuestNamespace), name)
					for flagName, want := range map[string]time.Duration{
						"leader-election-lease-duration": 137 * time.Second,
						"leader-election-renew-deadline": 107 * time.Second,
						"leader-election-retry-period":   26 * time.Second,
					} {
						v, ok := testutil.FlagValue(args, flagName)
						g.Expect(ok).To(BeTrue(), "%s --%s", name, flagName)
						d, err := time.ParseDuration(v)
						g.Expect(err).NotTo(HaveOccurred(), "%s --%s", name, flagName)
						g.Expect(d).To(Equal(want), "%s --%s", name, flagName)
					}
				}
			},
		},
		{
			name: "When topology is off, it should pass --cluster, --with-topology=false and --v to the driver",
			edit: func(in *controllerInputs) { in.Verbosity = 6 },
			check: func(g Gomega, dep *appsv1.Deployment) {
				args := podContainer(g, dep.Spec.Template.Spec, "csi-driver").Args
				for flagName, want := range map[string]string{"cluster": "example-x7k2p", "with-topology": "false", "v": "6"} {
					v, ok := testutil.FlagValue(args, flagName)
					g.Expect(ok).To(BeTrue(), flagName)
					g.Expect(v).To(Equal(want), flagName)
				}
			},
		},
		{
			name: "When topology is on, it should pass --with-topology=true to the driver",
			edit: func(in *controllerInputs) { in.Topology = true },
			check: func(g Gomega, dep *appsv1.Deployment) {
				v, ok := testutil.FlagValue(podContainer(g, dep.Spec.Template.Spec, "csi-driver").Args, "with-topology")
				g.Expect(ok).To(BeTrue())
				g.Expect(v).To(Equal("true"))
			},
		},
		{
			name: "When the log level is set, it should pass the same --v to the driver, the sidecars and the liveness probe",
			edit: func(in *controllerInputs) { in.Verbosity = 4 },
			check: func(g Gomega, dep *appsv1.Deployment) {
				for _, name := range append([]string{"csi-driver", "csi-liveness-probe"}, sidecars...) {
					v, ok := testutil.FlagValue(podContainer(g, dep.Spec.Template.Spec, name).Args, "v")
					g.Expect(ok).To(BeTrue(), name)
					g.Expect(v).To(Equal("4"), name)
				}
			},
		},
		{
			name: "When the control plane is SingleReplica, it should run one replica and roll it out by starting the new pod before the old one goes, so that a controller stays available",
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Replicas).To(HaveValue(Equal(int32(1))))
				g.Expect(dep.Spec.Strategy.RollingUpdate).NotTo(BeNil())
				g.Expect(dep.Spec.Strategy.RollingUpdate.MaxSurge).To(HaveValue(Equal(intstr.FromInt32(1))))
				g.Expect(dep.Spec.Strategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(0))))
			},
		},
		{
			name: "When the control plane is HighlyAvailable, it should run two replicas and roll them one at a time without a third",
			edit: func(in *controllerInputs) { in.HighlyAvailable = true },
			check: func(g Gomega, dep *appsv1.Deployment) {
				g.Expect(dep.Spec.Replicas).To(HaveValue(Equal(int32(2))))
				g.Expect(dep.Spec.Strategy.RollingUpdate).NotTo(BeNil())
				g.Expect(dep.Spec.Strategy.RollingUpdate.MaxSurge).To(HaveValue(Equal(intstr.FromInt32(0))))
				g.Expect(dep.Spec.Strategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
			},
		},
		{
			name: "When rendered, it should put one kube-rbac-proxy in front of each metrics port 9202-9206",
			check: func(g Gomega, dep *appsv1.Deployment) {
				var exposed []int32
				for _, c := range dep.Spec.Template.Spec.Containers {
					if !strings.Contains(c.Name, "kube-rbac-proxy") {
						continue
					}
					g.Expect(c.Image).To(Equal(testImages().KubeRBACProxy), c.Name)
					g.Expect(c.Ports).To(HaveLen(1), c.Name)
					port := c.Ports[0].ContainerPort
					exposed = append(exposed, port)
					listen, _ := testutil.FlagValue(c.Args, "secure-listen-address")
					g.Expect(listen).To(HaveSuffix(":"+itoa(port)), c.Name)
					upstream, _ := testutil.FlagValue(c.Args, "upstream")
					g.Expect(upstream).To(Equal("http://127.0.0.1:"+itoa(port-1000)+"/"), c.Name)
					g.Expect(c.VolumeMounts).To(ContainElement(HaveField("Name", "metrics-serving-cert")), c.Name)
				}
				slices.Sort(exposed)
				g.Expect(exposed).To(Equal([]int32{9202, 9203, 9204, 9205, 9206}))
			},
		},
		{
			// The sidecars' listen addresses are in controller.yaml, the upstreams in metricsProxies:
			// this is what keeps the two one fact.
			name: "When rendered, it should forward each kube-rbac-proxy to a container's loopback metrics endpoint, one proxy each, and expose it within the metrics-range policy",
			check: func(g Gomega, dep *appsv1.Deployment) {
				// endpoints maps each loopback metrics port to the container serving it.
				endpoints := map[string]string{}
				for _, c := range dep.Spec.Template.Spec.Containers {
					for _, flag := range []string{"http-endpoint", "metrics-address"} {
						if addr, ok := testutil.FlagValue(c.Args, flag); ok && !manifests.IsKubeRBACProxy(c.Name) {
							host, port, err := net.SplitHostPort(addr)
							g.Expect(err).NotTo(HaveOccurred(), c.Name)
							g.Expect(host == "localhost" || net.ParseIP(host).IsLoopback()).To(BeTrue(), "%s serves its metrics only to its proxy", c.Name)
							endpoints[port] = c.Name
						}
					}
				}
				fronted := map[string]bool{}
				for _, c := range dep.Spec.Template.Spec.Containers {
					if !manifests.IsKubeRBACProxy(c.Name) {
						continue
					}
					upstream, _ := testutil.FlagValue(c.Args, "upstream")
					u, err := url.Parse(upstream)
					g.Expect(err).NotTo(HaveOccurred(), c.Name)
					g.Expect(endpoints).To(HaveKey(u.Port()), "%s forwards to a port where no container serves metrics", c.Name)
					g.Expect(fronted).NotTo(HaveKey(endpoints[u.Port()]), "%s has two proxies", endpoints[u.Port()])
					fronted[endpoints[u.Port()]] = true
					// cluster-storage-operator's metrics-range NetworkPolicy admits TCP 9201-9223
					// (09_network-policy-allow-ingress-to-metrics.yaml).
					g.Expect(c.Ports[0].ContainerPort).To(And(BeNumerically(">=", 9201), BeNumerically("<=", 9223)), c.Name)
				}
				g.Expect(fronted).To(HaveLen(len(endpoints)), "every metrics endpoint has a proxy")
			},
		},
		{
			name: "When on HyperShift with a proxy in the operator's environment, it should give every container that proxy",
			edit: func(in *controllerInputs) {
				in.Proxy = configv1.ProxyStatus{HTTPProxy: "http://proxy.example.com:3128", HTTPSProxy: "http://proxy.example.com:3129", NoProxy: ".svc,kube-apiserver"}
			},
			check: func(g Gomega, dep *appsv1.Deployment) {
				want := []corev1.EnvVar{
					{Name: "HTTP_PROXY", Value: "http://proxy.example.com:3128"}, {Name: "http_proxy", Value: "http://proxy.example.com:3128"},
					{Name: "HTTPS_PROXY", Value: "http://proxy.example.com:3129"}, {Name: "https_proxy", Value: "http://proxy.example.com:3129"},
					{Name: "NO_PROXY", Value: ".svc,kube-apiserver"}, {Name: "no_proxy", Value: ".svc,kube-apiserver"},
				}
				g.Expect(dep.Spec.Template.Spec.Containers).To(HaveLen(11))
				for _, c := range dep.Spec.Template.Spec.Containers {
					var proxyEnv []corev1.EnvVar
					for _, e := range c.Env {
						if strings.HasSuffix(strings.ToUpper(e.Name), "_PROXY") {
							proxyEnv = append(proxyEnv, e)
						}
					}
					g.Expect(proxyEnv).To(Equal(want), c.Name)
				}
			},
		},
		{
			name: "When on HyperShift without a proxy, it should give no container proxy variables",
			check: func(g Gomega, dep *appsv1.Deployment) {
				for _, c := range dep.Spec.Template.Spec.Containers {
					for _, e := range c.Env {
						g.Expect(strings.ToUpper(e.Name)).NotTo(HaveSuffix("_PROXY"), c.Name)
					}
				}
			},
		},
		{
			name: "When hashes are given, it should annotate the pod template with each and skip empty ones",
			edit: func(in *controllerInputs) {
				in.Hashes = map[string]string{nodeconf.HashInput: "abc", hashCredentials: ""}
			},
			check: func(g Gomega, dep *appsv1.Deployment) {
				ann := dep.Spec.Template.Annotations
				g.Expect(ann).To(HaveKeyWithValue(confighash.AnnotationKey(nodeconf.HashInput), "abc"))
				g.Expect(ann).NotTo(HaveKey(confighash.AnnotationKey(hashCredentials)))
			},
		},
		{
			name: "When rendered, it should set every image from the inputs and leave no placeholder",
			check: func(g Gomega, dep *appsv1.Deployment) {
				want := testImages()
				byName := map[string]string{
					"csi-driver": want.Driver, "csi-provisioner": want.Provisioner, "csi-attacher": want.Attacher,
					"csi-resizer": want.Resizer, "csi-snapshotter": want.Snapshotter, "csi-liveness-probe": want.LivenessProbe,
				}
				for _, c := range dep.Spec.Template.Spec.Containers {
					if img, ok := byName[c.Name]; ok {
						g.Expect(c.Image).To(Equal(img), c.Name)
					} else {
						g.Expect(c.Image).To(Equal(want.KubeRBACProxy), c.Name)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			in := hyperShiftInputs()
			if tt.edit != nil {
				tt.edit(&in)
			}
			tt.check(g, controllerDeployment(t, in))
		})
	}

	t.Run("When an image is missing, it should fail rather than render an empty or placeholder image", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		in := hyperShiftInputs()
		in.Images.Snapshotter = ""
		dep, err := desiredController(testutil.Decoder(t), in)
		g.Expect(err).To(MatchError(ContainSubstring("csi-snapshotter")))
		g.Expect(dep).To(BeNil())
	})

	t.Run("When rendered twice from the same inputs, it should be identical", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		in := hyperShiftInputs()
		in.PodLabels = map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
		first, err := golden.Marshal(controllerDeployment(t, in))
		g.Expect(err).NotTo(HaveOccurred())
		for range 5 {
			again, err := golden.Marshal(controllerDeployment(t, in))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(again)).To(Equal(string(first)))
		}
	})
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func TestSetControllerImages(t *testing.T) {
	t.Parallel()
	pod := func() *corev1.PodSpec {
		p := &corev1.PodSpec{}
		for _, n := range []string{"csi-driver", "csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter", "csi-liveness-probe", "provisioner-kube-rbac-proxy"} {
			p.Containers = append(p.Containers, corev1.Container{Name: n, Image: "placeholder"})
		}
		return p
	}
	tests := []struct {
		name    string
		edit    func(*operandimages.Controller)
		extra   string
		wantErr string
	}{
		{name: "When every image is set, it should set each container's image"},
		{name: "When the driver image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.Driver = "" }, wantErr: "csi-driver"},
		{name: "When the provisioner image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.Provisioner = "" }, wantErr: "csi-provisioner"},
		{name: "When the attacher image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.Attacher = "" }, wantErr: "csi-attacher"},
		{name: "When the resizer image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.Resizer = "" }, wantErr: "csi-resizer"},
		{name: "When the snapshotter image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.Snapshotter = "" }, wantErr: "csi-snapshotter"},
		{name: "When the liveness probe image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.LivenessProbe = "" }, wantErr: "csi-liveness-probe"},
		{name: "When the kube-rbac-proxy image is missing, it should name the container", edit: func(i *operandimages.Controller) { i.KubeRBACProxy = "" }, wantErr: "provisioner-kube-rbac-proxy"},
		{name: "When a container has no known image, it should fail", extra: "mystery", wantErr: "mystery"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			img := testImages()
			if tt.edit != nil {
				tt.edit(&img)
			}
			p := pod()
			if tt.extra != "" {
				p.Containers = append(p.Containers, corev1.Container{Name: tt.extra})
			}
			err := setControllerImages(p, img)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range p.Containers {
				g.Expect(c.Image).NotTo(BeEmpty(), c.Name)
				g.Expect(c.Image).NotTo(Equal("placeholder"), c.Name)
			}
			g.Expect(p.Containers[0].Image).To(Equal(img.Driver))
			g.Expect(p.Containers[6].Image).To(Equal(img.KubeRBACProxy))
		})
	}
}

func TestDesiredCloudConf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		topology bool
		ca       string
		want     map[string]string
	}{
		{
			name: "When there is no CA and topology is off, it should carry cloud.conf and enable_topology only",
			want: map[string]string{"cloud.conf": "conf", "enable_topology": "false"},
		},
		{
			name:     "When there is a CA and topology is on, it should carry the CA bundle too",
			topology: true, ca: testutil.CA,
			want: map[string]string{"cloud.conf": "conf", "enable_topology": "true", "ca-bundle.pem": testutil.CA},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			c := nodeconf.Defaults()
			c.CloudConf, c.Topology, c.CABundle = "conf", tt.topology, tt.ca
			cm := desiredCloudConf(hcpNamespace, names.CloudConfConfigMap, c)
			g.Expect(cm.Namespace).To(Equal(hcpNamespace))
			g.Expect(cm.Name).To(Equal(names.CloudConfConfigMap))
			g.Expect(cm.Data).To(Equal(tt.want))
			g.Expect(cm.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
			g.Expect(nodeconf.Usable(cm)).To(BeTrue(), "sealed with its data's hash")
		})
	}
}

func TestDesiredControllerObjects(t *testing.T) {
	t.Parallel()

	t.Run("When on HyperShift, it should return the trusted CA ConfigMap, ServiceAccount, Service, PDB and Deployment in apply order, labelled, in the HCP namespace", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs := testutil.Build(t, func(d *manifests.Decoder) ([]client.Object, error) {
			return desiredControllerObjects(d, hyperShiftInputs())
		})
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, fmt.Sprintf("%T", o))
			g.Expect(o.GetNamespace()).To(Equal(hcpNamespace), o.GetName())
			g.Expect(o.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue), o.GetName())
		}
		g.Expect(kinds).To(Equal([]string{"*v1.ConfigMap", "*v1.ServiceAccount", "*v1.Service", "*v1.PodDisruptionBudget", "*v1.Deployment"}))
	})

	t.Run("When on HyperShift, it should reference the pull secret from the ServiceAccount", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs := testutil.Build(t, func(d *manifests.Decoder) ([]client.Object, error) {
			return desiredControllerObjects(d, hyperShiftInputs())
		})
		sa, ok := objs[1].(*corev1.ServiceAccount)
		g.Expect(ok).To(BeTrue())
		g.Expect(sa.Name).To(Equal(names.ControllerServiceAccount))
		g.Expect(sa.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "pull-secret"}}))
		dep := objs[len(objs)-1].(*appsv1.Deployment)
		g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(sa.Name))
	})

	t.Run("When rendered, it should expose every kube-rbac-proxy port through the metrics Service", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs := testutil.Build(t, func(d *manifests.Decoder) ([]client.Object, error) {
			return desiredControllerObjects(d, hyperShiftInputs())
		})
		svc := objs[2].(*corev1.Service)
		dep := objs[4].(*appsv1.Deployment)
		containerPorts := map[string]int32{}
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				containerPorts[p.Name] = p.ContainerPort
			}
		}
		g.Expect(svc.Spec.Ports).To(HaveLen(5))
		for _, p := range svc.Spec.Ports {
			g.Expect(containerPorts).To(HaveKeyWithValue(p.TargetPort.StrVal, p.Port), p.Name)
		}
		for k, v := range svc.Spec.Selector {
			g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
		}
	})
}

func TestDesiredControllerPVCAnnotations(t *testing.T) {
	t.Parallel()
	standalone := func() controllerInputs {
		in := hyperShiftInputs()
		in.HyperShift, in.Namespace = false, names.GuestNamespace
		return in
	}
	for _, tt := range []struct {
		name string
		in   func() controllerInputs
		// kubeconfig is whether the driver must reach the guest through its kubeconfig.
		kubeconfig bool
	}{
		{name: "on HyperShift", in: hyperShiftInputs, kubeconfig: true},
		{name: "standalone", in: standalone},
	} {
		t.Run("When pvc_annotations is on "+tt.name+", it should give the driver --pvc-annotations and change nothing but the driver container", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			off := controllerDeployment(t, tt.in())
			in := tt.in()
			in.PVCAnnotations = true
			on := controllerDeployment(t, in)

			driverOff := podContainer(g, off.Spec.Template.Spec, manifests.ContainerDriver)
			driver := podContainer(g, on.Spec.Template.Spec, manifests.ContainerDriver)
			wantArgs := append(slices.Clone(driverOff.Args), "--pvc-annotations")
			wantMounts := slices.Clone(driverOff.VolumeMounts)
			if tt.kubeconfig {
				// The informer's claims are the guest's, through the kubeconfig the sidecars use.
				wantArgs = append(wantArgs, "--kubeconfig=/etc/hosted-kubernetes/kubeconfig")
				wantMounts = append(wantMounts, corev1.VolumeMount{Name: guestKubeconfigVolume, MountPath: guestKubeconfigDir, ReadOnly: true})
				provisioner := podContainer(g, on.Spec.Template.Spec, manifests.ContainerProvisioner)
				g.Expect(provisioner.Args).To(ContainElement("--kubeconfig=/etc/hosted-kubernetes/kubeconfig"))
			}
			g.Expect(driver.Args).To(Equal(wantArgs))
			g.Expect(driver.VolumeMounts).To(Equal(wantMounts))

			// Everything else is as without the setting.
			driver.Args, driver.VolumeMounts = driverOff.Args, driverOff.VolumeMounts
			i := slices.IndexFunc(on.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == manifests.ContainerDriver })
			on.Spec.Template.Spec.Containers[i] = driver
			g.Expect(on).To(Equal(off))
		})
	}

	t.Run("When pvc_annotations is on, the provisioner should already pass the claim's metadata the driver looks up", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		in := hyperShiftInputs()
		in.PVCAnnotations = true
		provisioner := podContainer(g, controllerDeployment(t, in).Spec.Template.Spec, manifests.ContainerProvisioner)
		g.Expect(provisioner.Args).To(ContainElement("--extra-create-metadata"))
	})
}
