package desired

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
)

// Paths and names used only by the controller Deployment.
const (
	guestKubeconfigVolume = "hosted-kubeconfig"
	guestKubeconfigDir    = "/etc/hosted-kubernetes"
	standalonePriority    = "system-cluster-critical"
	hostnameTopologyKey   = "kubernetes.io/hostname"
)

// csiSidecars are the controller containers that talk to the Kubernetes API: on HyperShift they
// reach the guest through its kubeconfig, and they elect a leader among controller replicas.
var csiSidecars = []string{manifests.ContainerProvisioner, manifests.ContainerAttacher, manifests.ContainerResizer, manifests.ContainerSnapshotter}

// metricsProxy is one kube-rbac-proxy in front of a loopback metrics endpoint.
type metricsProxy struct {
	name     string
	port     string // Service and container port name
	loopback int
	exposed  int
}

// metricsProxies follows csi-operator's port registry and container names, so the metrics
// Service and any scrape configuration built for csi-operator keep working. The sidecars'
// listen addresses in controller.yaml, the metrics Service and the ServiceMonitor repeat its
// ports and port names; TestDesiredController, TestDesiredControllerObjects and
// TestDesiredMonitoring fail on any disagreement.
var metricsProxies = []metricsProxy{
	{name: "kube-rbac-proxy-8202", port: "driver-m", loopback: 8202, exposed: 9202},
	{name: "provisioner-kube-rbac-proxy", port: "provisioner-m", loopback: 8203, exposed: 9203},
	{name: "attacher-kube-rbac-proxy", port: "attacher-m", loopback: 8204, exposed: 9204},
	{name: "resizer-kube-rbac-proxy", port: "resizer-m", loopback: 8205, exposed: 9205},
	{name: "snapshotter-kube-rbac-proxy", port: "snapshotter-m", loopback: 8206, exposed: 9206},
}

// controllerInputs is everything the controller's objects are computed from.
type controllerInputs struct {
	HyperShift bool
	Namespace  string
	Images     operandimages.Controller
	// ClusterID tags the volumes the driver creates (--cluster), for cleanup on deletion.
	ClusterID string
	// HighlyAvailable gives two replicas spread over nodes, else one.
	HighlyAvailable bool
	// NodeSelector, Tolerations and Labels come from the HostedControlPlane (HyperShift) or
	// from the control plane topology (standalone).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	PodLabels    map[string]string
	Verbosity    int
	Topology     bool
	// PVCAnnotations gives the driver --pvc-annotations: it then watches claims, through the
	// guest kubeconfig on HyperShift.
	PVCAnnotations bool
	// Hashes are the per-input hashes written to the pod template, keyed by input name.
	Hashes map[string]string
	// Proxy is the cluster-wide proxy (standalone) or the operator's own (HyperShift).
	// TrustedCA is whether the injected CA bundle has content.
	Proxy     configv1.ProxyStatus
	TrustedCA bool
	// TLS is the cluster's TLS security profile, which every kube-rbac-proxy serves.
	TLS tlsprofile.Settings
	// Hosted is what a hosted control plane expects of the Deployment and gives its pods
	// (HyperShift only).
	Hosted hostedInputs
}

// trustedCAVolume holds the cluster's trusted CA bundle, mounted where the driver's TLS stack
// (and so gophercloud) finds system roots, so a proxy with its own CA works.
const trustedCAVolume = "non-standard-root-system-trust-ca-bundle"

// desiredCloudConf returns a cloud-conf ConfigMap holding c (nodeconf.Encode), sealed with the
// hash of its data: the controller copy holds the driver's keys alone (the generated cloud.conf,
// the topology decision and, when one exists, the OpenStack CA bundle), the node copy also the
// decisions for the guest manager.
func desiredCloudConf(namespace, name string, c nodeconf.Contents) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       nodeconf.Encode(c),
	}
	nodeconf.Seal(cm)
	operand.Managed(cm)
	return cm
}

// desiredControllerObjects returns the trusted CA bundle ConfigMap, ServiceAccount, metrics
// Service, PodDisruptionBudget and Deployment, in apply order.
func desiredControllerObjects(d *manifests.Decoder, in controllerInputs) ([]plan.Object, error) {
	sa, err := manifests.Object[*corev1.ServiceAccount](d, "controller_sa.yaml")
	if err != nil {
		return nil, err
	}
	if in.HyperShift {
		sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: names.PullSecret}}
	}
	svc, err := manifests.Object[*corev1.Service](d, "controller_metrics_service.yaml")
	if err != nil {
		return nil, err
	}
	pdb, err := manifests.Object[*policyv1.PodDisruptionBudget](d, "controller_pdb.yaml")
	if err != nil {
		return nil, err
	}
	dep, err := desiredController(d, in)
	if err != nil {
		return nil, err
	}
	ca, err := manifests.Object[*corev1.ConfigMap](d, "trusted_ca_bundle.yaml")
	if err != nil {
		return nil, err
	}
	objs := []plan.Object{ca, sa, svc, pdb, dep}
	for _, o := range objs {
		o.SetNamespace(in.Namespace)
		operand.Managed(o)
	}
	return objs, nil
}

// desiredController returns the controller Deployment.
func desiredController(d *manifests.Decoder, in controllerInputs) (*appsv1.Deployment, error) {
	dep, err := manifests.Object[*appsv1.Deployment](d, "controller.yaml")
	if err != nil {
		return nil, err
	}
	dep.Namespace = in.Namespace
	replicas := int32(1)
	if in.HighlyAvailable {
		replicas = 2
	}
	dep.Spec.Replicas = ptr.To(replicas)
	if replicas == 1 {
		// One replica rolled out by taking it away first leaves no controller for the rollout's
		// length, so an upgrade would report the driver unavailable on every single-replica
		// control plane. The new pod starts beside the old one instead: nothing holds it off the
		// same node (no host port, anti-affinity only preferred), and the sidecars' leader
		// election keeps the two from acting at once. Two replicas keep one available while one
		// rolls, as the manifest's strategy has it.
		dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}}
	}

	pod := &dep.Spec.Template.Spec
	pod.Containers = append(pod.Containers, kubeRBACProxies(in.Images.KubeRBACProxy, in.TLS)...)
	if err := setControllerImages(pod, in.Images); err != nil {
		return nil, err
	}
	verbosity := "--v=" + strconv.Itoa(in.Verbosity)
	operand.EachContainer(pod, func(c *corev1.Container) {
		switch {
		case c.Name == manifests.ContainerDriver:
			c.Args = append(c.Args, "--cluster="+in.ClusterID, "--with-topology="+strconv.FormatBool(in.Topology), verbosity)
			if in.PVCAnnotations {
				// The provisioner already passes the claim's name and namespace
				// (--extra-create-metadata), which the driver needs to look the claim up.
				// Standalone, the driver's claim informer runs as the controller's
				// ServiceAccount, which cluster-storage-operator's provisioner role
				// (openshift-csi-main-provisioner-role, bound in controller_rbac.yaml) already
				// lets list and watch claims cluster-wide.
				c.Args = append(c.Args, "--pvc-annotations")
			}
		case slices.Contains(csiSidecars, c.Name):
			c.Args = append(c.Args, sidecarLeaderElectionArgs()...)
			c.Args = append(c.Args, verbosity)
		case c.Name == manifests.ContainerLivenessProbe:
			c.Args = append(c.Args, verbosity)
		}
		operand.Harden(c)
	})

	tmpl := &dep.Spec.Template
	for k, v := range in.PodLabels {
		// The operator's own labels win: the selector depends on them.
		if _, taken := tmpl.Labels[k]; !taken {
			tmpl.Labels[k] = v
		}
	}
	pod.NodeSelector = maps.Clone(in.NodeSelector)
	if in.HyperShift {
		adaptHyperShiftController(tmpl, in)
		adaptHostedDeployment(dep, in.Hosted)
	} else {
		adaptStandaloneController(tmpl, in)
	}
	if in.TrustedCA {
		mountTrustedCA(pod)
	}
	confighash.Annotate(tmpl, in.Hashes)
	return dep, nil
}

// sidecarLeaderElectionArgs are the leader election flags of the CSI sidecars: OpenShift's
// timings, with the leases in the guest namespace (where the sidecars' API is the guest's on
// HyperShift).
//
// Each sidecar also releases its lease when it is told to stop (the sidecars' feature gate
// ReleaseLeaderElectionOnExit). Without it a rollout of the controller (a credential rotation, a
// topology or log-level change) leaves the new pod waiting for the old pod's lease to expire:
// with OpenShift's 137 s lease, measured on real nodes, no volume was provisioned, attached,
// resized or snapshotted for about three minutes after every rotation. Every sidecar version the
// operator is built for has the gate (provisioner v6, attacher v4.13, resizer v2.3,
// snapshotter v8.7).
func sidecarLeaderElectionArgs() []string {
	return []string{
		"--leader-election",
		"--leader-election-namespace=" + names.GuestNamespace,
		"--leader-election-lease-duration=" + seconds(clusters.LeaseDuration),
		"--leader-election-renew-deadline=" + seconds(clusters.RenewDeadline),
		"--leader-election-retry-period=" + seconds(clusters.RetryPeriod),
		"--feature-gates=ReleaseLeaderElectionOnExit=true",
	}
}

// seconds formats d as whole seconds ("137s"), the form OpenShift's manifests use.
func seconds(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) + "s" }

// kubeRBACProxies returns one kube-rbac-proxy container per metrics port, serving the cluster's
// TLS profile: a profile change is a change of their arguments, so it rolls the controller once.
// kube-rbac-proxy reloads its serving certificate from disk, so certificate rotation needs no
// rollout.
func kubeRBACProxies(image string, profile tlsprofile.Settings) []corev1.Container {
	out := make([]corev1.Container, 0, len(metricsProxies))
	for _, p := range metricsProxies {
		out = append(out, corev1.Container{
			Name:  p.name,
			Image: image,
			Args: append([]string{
				fmt.Sprintf("--secure-listen-address=0.0.0.0:%d", p.exposed),
				fmt.Sprintf("--upstream=http://127.0.0.1:%d/", p.loopback),
				"--tls-cert-file=/etc/tls/private/tls.crt",
				"--tls-private-key-file=/etc/tls/private/tls.key",
				"--logtostderr=true",
			}, profile.KubeRBACProxyArgs()...),
			Ports: []corev1.ContainerPort{{Name: p.port, ContainerPort: int32(p.exposed), Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("20Mi"),
			}},
			VolumeMounts: []corev1.VolumeMount{{Name: manifests.VolumeMetricsServingCert, MountPath: "/etc/tls/private"}},
		})
	}
	return out
}

// setControllerImages fills in every container's image by container role.
func setControllerImages(pod *corev1.PodSpec, img operandimages.Controller) error {
	byName := map[string]string{
		manifests.ContainerDriver:        img.Driver,
		manifests.ContainerProvisioner:   img.Provisioner,
		manifests.ContainerAttacher:      img.Attacher,
		manifests.ContainerResizer:       img.Resizer,
		manifests.ContainerSnapshotter:   img.Snapshotter,
		manifests.ContainerLivenessProbe: img.LivenessProbe,
	}
	return operand.SetImages(pod, func(container string) (string, bool) {
		if manifests.IsKubeRBACProxy(container) {
			return img.KubeRBACProxy, true
		}
		image, ok := byName[container]
		return image, ok
	})
}

// adaptHyperShiftController applies the HyperShift control-plane pod rules: colocation with the
// hosted control plane, its priority class, tolerations and affinity, the guest kubeconfig for
// the sidecars, and the operator's proxy for every container (as csi-operator does: the
// containers sit next to the operator and reach the same APIs).
func adaptHyperShiftController(tmpl *corev1.PodTemplateSpec, in controllerInputs) {
	pod := &tmpl.Spec
	tmpl.Labels[names.HostedControlPlaneLabel] = in.Namespace
	pod.PriorityClassName = names.HyperShiftPriorityClass
	pod.Tolerations = append([]corev1.Toleration{
		{Key: names.ControlPlaneNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: names.HostedClusterNodeLabel, Operator: corev1.TolerationOpEqual, Value: in.Namespace, Effect: corev1.TaintEffectNoSchedule},
	}, in.Tolerations...)
	pod.Affinity = &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 50, Preference: nodeTerm(names.ControlPlaneNodeLabel, "true")},
				{Weight: 100, Preference: nodeTerm(names.HostedClusterNodeLabel, in.Namespace)},
			},
		},
		PodAffinity: &corev1.PodAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{names.HostedControlPlaneLabel: in.Namespace}},
					TopologyKey:   hostnameTopologyKey,
				},
			}},
		},
		PodAntiAffinity: controllerAntiAffinity(),
	}

	pod.Volumes = append(pod.Volumes, corev1.Volume{
		Name: guestKubeconfigVolume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: names.GuestKubeconfigSecret,
			// Readable by the sidecars' non-root user whatever the management cluster's
			// security policy assigns as group (csi-operator uses the same mode).
			DefaultMode: ptr.To[int32](0o644),
		}},
	})
	operand.EachContainer(pod, func(c *corev1.Container) {
		c.Env = append(c.Env, proxyEnv(in.Proxy)...)
		// With --pvc-annotations the driver runs an informer on the claims, which live in the
		// guest: its in-cluster ServiceAccount would list the management cluster's instead.
		guestClient := slices.Contains(csiSidecars, c.Name) || (in.PVCAnnotations && c.Name == manifests.ContainerDriver)
		if !guestClient {
			return
		}
		c.Args = append(c.Args, "--kubeconfig="+guestKubeconfigDir+"/"+names.KeyKubeconfig)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: guestKubeconfigVolume, MountPath: guestKubeconfigDir, ReadOnly: true})
	})
}

// adaptStandaloneController applies the standalone rules: master nodes (unless the control plane
// is External), system-cluster-critical priority, replicas spread over masters.
func adaptStandaloneController(tmpl *corev1.PodTemplateSpec, in controllerInputs) {
	pod := &tmpl.Spec
	pod.PriorityClassName = standalonePriority
	pod.Tolerations = slices.Clone(in.Tolerations)
	pod.Affinity = &corev1.Affinity{PodAntiAffinity: controllerAntiAffinity()}
	operand.OnContainer(pod, manifests.ContainerDriver, func(c *corev1.Container) {
		c.Env = append(c.Env, proxyEnv(in.Proxy)...)
	})
}

// mountTrustedCA mounts the injected trusted CA bundle into the driver container, in place of
// the image's system bundle (the injected one holds the system CAs too), in both modes, as
// csi-operator does.
func mountTrustedCA(pod *corev1.PodSpec) {
	operand.MountConfigMapFile(pod, manifests.ContainerDriver, operand.ConfigMapFile{
		Volume:    trustedCAVolume,
		ConfigMap: names.TrustedCABundleConfigMap, Key: names.KeyTrustedCA,
		Path: "tls-ca-bundle.pem", Dir: "/etc/pki/ca-trust/extracted/pem",
	})
}

// proxyEnv returns the cluster-wide proxy as the conventional environment variables, upper and
// lower case (Go reads the former, other tools the latter).
func proxyEnv(p configv1.ProxyStatus) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, v := range []struct{ name, value string }{
		{"HTTP_PROXY", p.HTTPProxy}, {"HTTPS_PROXY", p.HTTPSProxy}, {"NO_PROXY", p.NoProxy},
	} {
		if v.value == "" {
			continue
		}
		env = append(env, corev1.EnvVar{Name: v.name, Value: v.value}, corev1.EnvVar{Name: strings.ToLower(v.name), Value: v.value})
	}
	return env
}

// controllerAntiAffinity spreads controller replicas over nodes.
func controllerAntiAffinity() *corev1.PodAntiAffinity {
	return &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{names.ControllerPodLabel: names.ControllerDeployment}},
				TopologyKey:   hostnameTopologyKey,
			},
		}},
	}
}

func nodeTerm(key, value string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}},
	}}
}
