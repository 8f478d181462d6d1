package install_test

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/policylabels"
)

// guestKubeconfigDir is where the HyperShift operator pod mounts the guest kubeconfig.
const guestKubeconfigDir = "/etc/guest-kubeconfig"

// TestInstallManifests checks every YAML under manifests/install without a cluster: least
// privilege in the RBAC, and the pod rules of design.md in the Deployments.
func TestInstallManifests(t *testing.T) {
	t.Parallel()

	t.Run("When manifests/install is listed, it should hold the HyperShift and standalone sets", func(t *testing.T) {
		NewWithT(t).Expect(installFiles(t)).To(ContainElements(hyperShiftManagementFile, hyperShiftGuestFile, standaloneFile))
	})

	t.Run("When an RBAC rule is read, it should use no wildcard in verbs, resources, API groups, resource names or URLs", func(t *testing.T) {
		g := NewWithT(t)
		for _, f := range installFiles(t) {
			for _, d := range readManifest(t, f, nil) {
				if cr, ok := d.Obj.(*rbacv1.ClusterRole); ok {
					g.Expect(cr.AggregationRule).To(BeNil(), "%s: an aggregated role could pull in anything", d)
				}
				for i, r := range rulesOf(d) {
					for field, values := range map[string][]string{
						"verbs": r.Verbs, "resources": r.Resources, "apiGroups": r.APIGroups,
						"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
					} {
						for _, v := range values {
							g.Expect(v).NotTo(ContainSubstring("*"), "%s rule %d %s", d, i, field)
						}
					}
					g.Expect(r.Verbs).NotTo(BeEmpty(), "%s rule %d", d, i)
					g.Expect(r.NonResourceURLs).To(BeEmpty(), "%s rule %d", d, i)
				}
			}
		}
	})

	t.Run("When an RBAC rule is read, it should grant neither escalate nor impersonate", func(t *testing.T) {
		g := NewWithT(t)
		for _, f := range installFiles(t) {
			for _, d := range readManifest(t, f, nil) {
				for i, r := range rulesOf(d) {
					g.Expect(r.Verbs).NotTo(ContainElement(BeElementOf("escalate", "impersonate")), "%s rule %d", d, i)
				}
			}
		}
	})

	t.Run("When a binding is read, it should bind only the operator's ServiceAccount to a role of its own set", func(t *testing.T) {
		g := NewWithT(t)
		for _, f := range installFiles(t) {
			docs := readManifest(t, f, nil)
			defined := map[string]bool{}
			for _, r := range objectsOf[*rbacv1.Role](docs) {
				defined["Role/"+r.Namespace+"/"+r.Name] = true
			}
			for _, r := range objectsOf[*rbacv1.ClusterRole](docs) {
				defined["ClusterRole/"+r.Name] = true
			}
			check := func(what, ref string, subjects []rbacv1.Subject) {
				g.Expect(ref).NotTo(HaveSuffix("/cluster-admin"), what)
				g.Expect(defined).To(HaveKey(ref), "%s binds a role its set does not define", what)
				g.Expect(subjects).To(HaveLen(1), what)
				g.Expect(subjects[0].Kind).To(Equal(rbacv1.ServiceAccountKind), what)
				g.Expect(subjects[0].Name).To(Equal(operatorSA(f)), what)
			}
			for _, b := range objectsOf[*rbacv1.RoleBinding](docs) {
				ref := b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
				if b.RoleRef.Kind == "ClusterRole" {
					ref = "ClusterRole/" + b.RoleRef.Name
				}
				check(f+" RoleBinding "+b.Namespace+"/"+b.Name, ref, b.Subjects)
			}
			for _, b := range objectsOf[*rbacv1.ClusterRoleBinding](docs) {
				check(f+" ClusterRoleBinding "+b.Name, "ClusterRole/"+b.RoleRef.Name, b.Subjects)
			}
		}
	})

	t.Run("When the HyperShift management set is read, it should be namespaced in the placeholder HCP namespace only", func(t *testing.T) {
		g := NewWithT(t)
		for _, d := range readManifest(t, hyperShiftManagementFile, nil) {
			g.Expect(d.U.GetNamespace()).To(Equal(install.PlaceholderNamespace), "%s", d)
			g.Expect(d.U.GetKind()).NotTo(BeElementOf("ClusterRole", "ClusterRoleBinding", "Namespace"), "%s", d)
		}
		g.Expect(objectsOf[*appsv1.Deployment](readManifest(t, hyperShiftManagementFile, nil))).To(HaveLen(1))
	})

	t.Run("When an operator Deployment is read, it should serve its metrics with the certificate service-ca issues for its metrics Service", func(t *testing.T) {
		g := NewWithT(t)
		for _, f := range []string{hyperShiftManagementFile, standaloneFile} {
			docs := readManifest(t, f, nil)
			svcs := objectsOf[*corev1.Service](docs)
			g.Expect(svcs).To(HaveLen(1), f)
			svc := svcs[0]
			g.Expect(svc.Name).To(Equal("openstack-cinder-csi-driver-operator-metrics"), f)
			secret := svc.Annotations[names.ServingCertAnnotation]
			g.Expect(secret).To(Equal("openstack-cinder-csi-driver-operator-serving-cert"), f)
			dep := objectsOf[*appsv1.Deployment](docs)[0]
			g.Expect(svc.Spec.Selector).To(Equal(dep.Spec.Selector.MatchLabels), f)
			c := dep.Spec.Template.Spec.Containers[0]
			certDir := flagValue(c.Args, "--metrics-cert-dir")
			g.Expect(certDir).NotTo(BeEmpty(), f)
			var volume string
			for _, m := range c.VolumeMounts {
				if m.MountPath == certDir {
					volume = m.Name
				}
			}
			g.Expect(dep.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Name", volume),
				HaveField("Secret.SecretName", secret), HaveField("Secret.Optional", HaveValue(BeTrue())))), f)
			g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("TargetPort.StrVal", "metrics")), f)
			g.Expect(c.Ports).To(ContainElement(And(HaveField("Name", "metrics"), HaveField("ContainerPort", BeEquivalentTo(8443)))), f)
		}
	})

	t.Run("When an image reference is read, it should name no registry", func(t *testing.T) {
		g := NewWithT(t)
		for _, f := range installFiles(t) {
			for _, dep := range objectsOf[*appsv1.Deployment](readManifest(t, f, nil)) {
				for _, c := range dep.Spec.Template.Spec.Containers {
					g.Expect(c.Image).NotTo(ContainSubstring("/"), "%s container %s", f, c.Name)
					g.Expect(c.Image).NotTo(BeEmpty())
					for _, ev := range c.Env {
						if strings.HasSuffix(ev.Name, "_IMAGE") {
							g.Expect(ev.Value).NotTo(BeEmpty(), "%s %s", f, ev.Name)
							g.Expect(ev.Value).NotTo(ContainSubstring("/"), "%s %s", f, ev.Name)
						}
					}
				}
			}
		}
	})

	t.Run("When the HyperShift operator Deployment is read, it should follow the hosted-control-plane pod rules", func(t *testing.T) {
		g := NewWithT(t)
		deps := objectsOf[*appsv1.Deployment](readManifest(t, hyperShiftManagementFile, nil))
		g.Expect(deps).To(HaveLen(1))
		dep := deps[0]
		expectCommonPodRules(g, dep, operatorSA(hyperShiftManagementFile))
		expectHyperShiftPodRules(g, dep)
	})

	t.Run("When the standalone operator Deployment is read, it should run on the masters as system-cluster-critical", func(t *testing.T) {
		g := NewWithT(t)
		docs := readManifest(t, standaloneFile, nil)
		deps := objectsOf[*appsv1.Deployment](docs)
		g.Expect(deps).To(HaveLen(1))
		dep := deps[0]
		expectCommonPodRules(g, dep, operatorSA(standaloneFile))
		pod := dep.Spec.Template.Spec
		g.Expect(dep.Namespace).To(Equal(names.GuestNamespace))
		g.Expect(objectsOf[*corev1.Namespace](docs)).To(ContainElement(HaveField("Name", names.GuestNamespace)))
		g.Expect(pod.PriorityClassName).To(Equal("system-cluster-critical"))
		g.Expect(pod.NodeSelector).To(Equal(map[string]string{localcluster.MasterRoleLabel: ""}))
		g.Expect(pod.Tolerations).To(ContainElement(corev1.Toleration{
			Key: localcluster.MasterRoleLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
		g.Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		g.Expect(c.Args).NotTo(BeEmpty())
		g.Expect(c.Args[0]).To(Equal("standalone"))
		_, err := operandimages.ControllerImages(envLookup(c), false)
		g.Expect(err).NotTo(HaveOccurred(), "controller images")
		_, err = operandimages.NodeImages(envLookup(c))
		g.Expect(err).NotTo(HaveOccurred(), "node images")
	})

	t.Run("When the standalone install is read, it should name the operator's Deployment, ServiceAccount, pods and metrics Service as cluster-storage-operator names csi-operator's", func(t *testing.T) {
		g := NewWithT(t)
		cso, err := install.ReadDeployment(filepath.Join("..", "..", filepath.FromSlash(install.CSOStandaloneDeployment)))
		g.Expect(err).NotTo(HaveOccurred())
		docs := readManifest(t, standaloneFile, nil)
		deps := objectsOf[*appsv1.Deployment](docs)
		g.Expect(deps).To(HaveLen(1))
		dep := deps[0]
		g.Expect(dep.Name).To(Equal(cso.Name))
		g.Expect(dep.Name).To(Equal(names.OperatorName))
		g.Expect(dep.Namespace).To(Equal(cso.Namespace))
		g.Expect(dep.Spec.Selector).To(Equal(cso.Spec.Selector))
		for k, v := range cso.Spec.Template.Labels {
			g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
		}
		g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(cso.Spec.Template.Spec.ServiceAccountName))
		g.Expect(objectsOf[*corev1.ServiceAccount](docs)).To(ConsistOf(HaveField("Name", cso.Spec.Template.Spec.ServiceAccountName)))
		// The metrics Service (cluster-storage-operator's openstack-cinder-csi-driver-operator-metrics)
		// selects the pods, and its serving certificate is the Secret csi-operator's pod mounts.
		svcs := objectsOf[*corev1.Service](docs)
		g.Expect(svcs).To(HaveLen(1))
		g.Expect(svcs[0].Name).To(Equal(names.OperatorName + "-metrics"))
		g.Expect(svcs[0].Spec.Selector).To(Equal(cso.Spec.Selector.MatchLabels))
		secret := func(pod corev1.PodSpec) string {
			for _, v := range pod.Volumes {
				if v.Name == "serving-cert" && v.Secret != nil {
					return v.Secret.SecretName
				}
			}
			return ""
		}
		g.Expect(secret(dep.Spec.Template.Spec)).To(Equal(secret(cso.Spec.Template.Spec)))
		g.Expect(svcs[0].Annotations).To(HaveKeyWithValue(names.ServingCertAnnotation, secret(cso.Spec.Template.Spec)))
	})

	t.Run("When an operator Deployment is read, it should carry every NetworkPolicy label the platform requires of its pods", func(t *testing.T) {
		g := NewWithT(t)
		for _, f := range []string{hyperShiftManagementFile, standaloneFile} {
			deps := objectsOf[*appsv1.Deployment](readManifest(t, f, nil))
			g.Expect(deps).To(HaveLen(1), f)
			for k, v := range policylabels.Operator() {
				g.Expect(deps[0].Spec.Template.Labels).To(HaveKeyWithValue(k, v), f)
			}
		}
	})
}

// expectHyperShiftPodRules checks the hosted-control-plane rules of the HyperShift operator
// Deployment: management KAS access, the HCP label, priority class, tolerations and affinities,
// the guest kubeconfig, and the one container that runs both managers, with the images of both.
func expectHyperShiftPodRules(g Gomega, dep *appsv1.Deployment) {
	pod := dep.Spec.Template.Spec
	ns := dep.Namespace

	g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(names.NeedManagementKASAccess, "true"))
	g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(names.HostedControlPlaneLabel, ns))
	g.Expect(pod.PriorityClassName).To(Equal(names.HyperShiftPriorityClass))
	g.Expect(pod.Tolerations).To(ContainElements(
		corev1.Toleration{Key: names.ControlPlaneNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: names.HostedClusterNodeLabel, Operator: corev1.TolerationOpEqual, Value: ns, Effect: corev1.TaintEffectNoSchedule},
	))
	g.Expect(pod.Affinity).NotTo(BeNil())
	g.Expect(pod.Affinity.NodeAffinity).NotTo(BeNil())
	var nodeTerms []string
	for _, p := range pod.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		for _, m := range p.Preference.MatchExpressions {
			nodeTerms = append(nodeTerms, m.Key+" "+string(m.Operator)+" "+strings.Join(m.Values, ","))
		}
	}
	g.Expect(nodeTerms).To(ContainElements(names.ControlPlaneNodeLabel+" In true", names.HostedClusterNodeLabel+" In "+ns))
	g.Expect(pod.Affinity.PodAffinity).NotTo(BeNil())
	g.Expect(pod.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(ContainElement(
		HaveField("PodAffinityTerm.LabelSelector.MatchLabels", HaveKeyWithValue(names.HostedControlPlaneLabel, ns))))

	var guestVolume bool
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == names.GuestKubeconfigSecret {
			guestVolume = true
			for _, c := range pod.Containers {
				g.Expect(c.VolumeMounts).To(ContainElement(And(
					HaveField("Name", v.Name), HaveField("MountPath", guestKubeconfigDir))), c.Name)
			}
		}
	}
	g.Expect(guestVolume).To(BeTrue(), "a volume from Secret %s", names.GuestKubeconfigSecret)

	// One container runs both managers, with one leader lease.
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Args).NotTo(BeEmpty())
	g.Expect(c.Args[0]).To(Equal("hostedcluster"))
	g.Expect(c.Args).To(ContainElement("--guest-kubeconfig=" + guestKubeconfigDir + "/" + names.KeyKubeconfig))
	g.Expect(flagValue(c.Args, "--metrics-bind-address")).To(Equal(":8443"))
	g.Expect(flagValue(c.Args, "--health-probe-bind-address")).To(Equal(":8081"))
	ctrl, err := operandimages.ControllerImages(envLookup(c), true)
	g.Expect(err).NotTo(HaveOccurred(), "controller images")
	_, err = operandimages.NodeImages(envLookup(c))
	g.Expect(err).NotTo(HaveOccurred(), "node images")
	// The controller runs on the management cluster: every image it has a control-plane
	// variable for comes from the control-plane release payload, not from the guest's.
	for env, got := range map[string]string{
		operandimages.EnvDriverControlPlane: ctrl.Driver, operandimages.EnvLivenessProbeControlPlane: ctrl.LivenessProbe,
		operandimages.EnvKubeRBACProxyControlPlane: ctrl.KubeRBACProxy,
	} {
		want, ok := envLookup(c)(env)
		g.Expect(ok).To(BeTrue(), "%s is set", env)
		g.Expect(got).To(Equal(want), env)
	}
}

// rulesOf returns the rules of a Role or ClusterRole, nil for other objects.
func rulesOf(d doc) []rbacv1.PolicyRule {
	switch o := d.Obj.(type) {
	case *rbacv1.Role:
		return o.Rules
	case *rbacv1.ClusterRole:
		return o.Rules
	}
	return nil
}

// expectCommonPodRules checks the rules every operator pod follows: non-root with the runtime's
// seccomp profile, the operator's ServiceAccount sa, and per container resource requests, a
// read-only root filesystem, no privilege escalation, no capabilities, FallbackToLogsOnError,
// IfNotPresent, health probes on the probe port it serves, its own ports, and POD_NAMESPACE and
// POD_NAME (the leader election identity) from the downward API.
func expectCommonPodRules(g Gomega, dep *appsv1.Deployment, sa string) {
	pod := dep.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(sa))
	g.Expect(pod.SecurityContext).NotTo(BeNil())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(pod.SecurityContext.SeccompProfile).To(HaveValue(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault)))
	g.Expect(pod.Containers).NotTo(BeEmpty())
	g.Expect(dep.Spec.Selector).NotTo(BeNil())
	for k, v := range dep.Spec.Selector.MatchLabels {
		g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
	}

	ports := map[int32]string{}
	for _, c := range pod.Containers {
		g.Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceCPU), c.Name)
		g.Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceMemory), c.Name)
		sc := c.SecurityContext
		g.Expect(sc).NotTo(BeNil(), c.Name)
		g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
		g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
		g.Expect(sc.Privileged).To(Or(BeNil(), HaveValue(BeFalse())), c.Name)
		g.Expect(sc.Capabilities).NotTo(BeNil(), c.Name)
		g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), c.Name)
		g.Expect(sc.Capabilities.Add).To(BeEmpty(), c.Name)
		g.Expect(c.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError), c.Name)
		g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent), c.Name)

		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}), c.Name)
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}), c.Name)

		metrics := bindPort(g, flagValue(c.Args, "--metrics-bind-address"))
		probes := bindPort(g, flagValue(c.Args, "--health-probe-bind-address"))
		var declared []int32
		for _, p := range c.Ports {
			declared = append(declared, p.ContainerPort)
			g.Expect(ports).NotTo(HaveKey(p.ContainerPort), "port %d of %s is taken by %s", p.ContainerPort, c.Name, ports[p.ContainerPort])
			ports[p.ContainerPort] = c.Name
		}
		g.Expect(declared).To(ConsistOf(metrics, probes), c.Name)
		for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			g.Expect(probe).NotTo(BeNil(), "%s probe %s", c.Name, path)
			g.Expect(probe.HTTPGet).NotTo(BeNil(), "%s probe %s", c.Name, path)
			g.Expect(probe.HTTPGet.Path).To(Equal(path), c.Name)
			g.Expect(probe.HTTPGet.Port.IntValue()).To(BeEquivalentTo(probes), "%s probe %s", c.Name, path)
		}
	}
}

// flagValue returns the value of "--name=value" in args, or "".
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// bindPort returns the port of a ":port" bind address.
func bindPort(g Gomega, addr string) int32 {
	g.Expect(addr).To(MatchRegexp(`^:[0-9]+$`), "bind address")
	var port int32
	for _, r := range addr[1:] {
		port = port*10 + int32(r-'0')
	}
	return port
}

// envLookup looks up a container's literal environment like os.LookupEnv.
func envLookup(c corev1.Container) operandimages.Lookup {
	return func(name string) (string, bool) {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom == nil {
				return e.Value, true
			}
		}
		return "", false
	}
}
