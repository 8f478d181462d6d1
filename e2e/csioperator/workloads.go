package csioperator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// Where csi-operator mounts the trusted CA bundle the network operator injects (standalone).
const (
	TrustedCAVolume = "non-standard-root-system-trust-ca-bundle"
	TrustedCAPath   = "/etc/pki/ca-trust/extracted/pem"
)

// intermediateCiphers are the TLS 1.2 cipher suites of the Intermediate profile, by their IANA
// names, as csi-operator passes them to kube-rbac-proxy from the cluster's default APIServer
// profile (HTTP/2 needs one of the AES-128-GCM ones).
const intermediateCiphers = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256," +
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384," +
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"

// masterRoleLabel is the role label (and taint key) of OpenShift masters.
const masterRoleLabel = "node-role.kubernetes.io/master"

// hostedKubeconfigPath is where csi-operator's HyperShift controller mounts
// service-network-admin-kubeconfig for the CSI sidecars.
const hostedKubeconfigPath = "/etc/hosted-kubernetes"

func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

// driverEnv is the csi-driver env of both workloads: the topology decision comes from cloud-conf
// through $(ENABLE_TOPOLOGY).
func driverEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "CSI_ENDPOINT", Value: "unix://csi/csi.sock"},
		{Name: "CLOUD_CONFIG", Value: "/etc/kubernetes/config/cloud.conf"},
		{Name: "ENABLE_TOPOLOGY", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.CloudConfConfigMap}, Key: nodeconf.KeyEnableTopology,
		}}},
	}
}

// cloudVolumes are the cloud configuration volumes of both workloads: the node plugin mounts the
// credentials too.
func cloudVolumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: "secret-cinderplugin", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: names.CredentialsSecret, Items: []corev1.KeyToPath{{Key: names.KeyCloudsYAML, Path: names.KeyCloudsYAML}},
		}}},
		{Name: "config-cinderplugin", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.CloudConfConfigMap},
			Items:                []corev1.KeyToPath{{Key: nodeconf.KeyCloudConf, Path: nodeconf.KeyCloudConf}},
		}}},
		{Name: "cacert", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.CloudConfConfigMap},
			Items:                []corev1.KeyToPath{{Key: nodeconf.KeyCABundle, Path: nodeconf.KeyCABundle}},
			Optional:             ptr.To(true),
		}}},
	}
}

func cloudMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: "cacert", MountPath: "/etc/kubernetes/static-pod-resources/configmaps/cloud-config"},
		{Name: "config-cinderplugin", MountPath: "/etc/kubernetes/config", ReadOnly: true},
		{Name: "secret-cinderplugin", MountPath: "/etc/kubernetes/secret", ReadOnly: true},
	}
}

// container returns a container with csi-operator's common settings.
func container(name, image string, args []string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name: name, Image: image, Args: args,
		Resources:                requests("10m", "50Mi"),
		VolumeMounts:             mounts,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
	}
}

// image returns the image of variable v; on HyperShift the control-plane variant wins where
// csi-operator has one and it is set.
func (o Options) image(v, controlPlane string) string {
	if o.HyperShift && controlPlane != "" && o.Images[controlPlane] != "" {
		return o.Images[controlPlane]
	}
	return o.Images[v]
}

// controllerDeployment is csi-operator's controller Deployment (standalone on a SingleReplica
// control plane, or HyperShift after its hooks), with its hash annotations.
func controllerDeployment(o Options, hashes map[string]string) *appsv1.Deployment {
	ns := o.Namespace
	socket := corev1.VolumeMount{Name: "socket-dir", MountPath: "/var/lib/csi/sockets/pluginproxy/"}
	hostedKubeconfig := corev1.VolumeMount{Name: "hosted-kubeconfig", MountPath: hostedKubeconfigPath, ReadOnly: true}
	sidecar := func(name, image, endpoint string, extra ...string) corev1.Container {
		args := []string{"--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock", endpoint,
			"--leader-election", "--leader-election-lease-duration=137s", "--leader-election-renew-deadline=107s",
			"--leader-election-retry-period=26s", "--leader-election-namespace=" + names.GuestNamespace, "--v=2"}
		c := container(name, image, append(args, extra...), socket)
		if o.HyperShift {
			// The sidecars, and only they, talk to the guest's API server.
			c.Args = append(c.Args, "--kubeconfig=$(KUBECONFIG)")
			c.Env = []corev1.EnvVar{{Name: "KUBECONFIG", Value: hostedKubeconfigPath + "/kubeconfig"}}
			c.VolumeMounts = append(c.VolumeMounts, hostedKubeconfig)
		}
		return c
	}
	rbacProxy := func(name, port string, exposed, loopback int) corev1.Container {
		c := container(name, o.Images[operandimages.EnvKubeRBACProxy], []string{
			fmt.Sprintf("--secure-listen-address=0.0.0.0:%d", exposed), fmt.Sprintf("--upstream=http://127.0.0.1:%d/", loopback),
			"--tls-cert-file=/etc/tls/private/tls.crt", "--tls-private-key-file=/etc/tls/private/tls.key",
			"--tls-cipher-suites=" + intermediateCiphers, "--tls-min-version=VersionTLS12", "--logtostderr=true",
		}, corev1.VolumeMount{Name: "metrics-serving-cert", MountPath: "/etc/tls/private"})
		c.Resources = requests("10m", "20Mi")
		c.Ports = []corev1.ContainerPort{{Name: port, ContainerPort: int32(exposed), Protocol: corev1.ProtocolTCP}}
		return c
	}
	driverMounts := []corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"}}
	if o.TrustedCA != "" {
		driverMounts = append(driverMounts, corev1.VolumeMount{Name: TrustedCAVolume, MountPath: TrustedCAPath, ReadOnly: true})
	}
	driver := container("csi-driver", o.image(operandimages.EnvDriver, operandimages.EnvDriverControlPlane), []string{
		"/bin/cinder-csi-plugin", "--provide-controller-service=true", "--provide-node-service=false",
		"--endpoint=$(CSI_ENDPOINT)", "--http-endpoint=localhost:8202", "--cloud-config=$(CLOUD_CONFIG)",
		"--cluster=" + o.InfraID, "--with-topology=$(ENABLE_TOPOLOGY)", "--v=2",
	}, append(driverMounts, cloudMounts()...)...)
	driver.Env = driverEnv()
	driver.Ports = []corev1.ContainerPort{{Name: "healthz", ContainerPort: 10301, Protocol: corev1.ProtocolTCP}}
	driver.LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
		InitialDelaySeconds: 10, TimeoutSeconds: 10, PeriodSeconds: 30, FailureThreshold: 5,
	}
	liveness := container("csi-liveness-probe", o.image(operandimages.EnvLivenessProbe, operandimages.EnvLivenessProbeControlPlane),
		[]string{"--csi-address=/csi/csi.sock", "--health-port=10301", "--v=2", "--probe-timeout=10s"},
		corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"})

	selector := map[string]string{"app": names.ControllerDeployment}
	podLabels := map[string]string{
		"app": names.ControllerDeployment,
		"openshift.storage.network-policy.all-egress":    "allow",
		"openshift.storage.network-policy.api-server":    "allow",
		"openshift.storage.network-policy.dns":           "allow",
		"openshift.storage.network-policy.metrics-range": "allow",
	}
	podAnnotations := map[string]string{
		"target.workload.openshift.io/management":                      `{"effect": "PreferredDuringScheduling"}`,
		"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "cacert,config-cinderplugin,secret-cinderplugin,socket-dir",
		"openshift.io/required-scc":                                    "restricted-v2",
	}
	depLabels := map[string]string{}
	depAnnotations := map[string]string{
		"config.openshift.io/inject-proxy":          "csi-driver",
		"config.openshift.io/inject-proxy-cabundle": "csi-driver",
	}
	for k, v := range hashes {
		podAnnotations[k], depAnnotations[k] = v, v
	}
	volumes := []corev1.Volume{
		{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "metrics-serving-cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: names.ControllerMetricsSecret}}},
	}
	if o.TrustedCA != "" {
		// The trusted CA hook mounts the bundle only once the network operator has filled it.
		volumes = append(volumes, corev1.Volume{Name: TrustedCAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.TrustedCABundleConfigMap},
			Items:                []corev1.KeyToPath{{Key: names.KeyTrustedCA, Path: "tls-ca-bundle.pem"}},
		}}})
	}
	volumes = append(volumes, cloudVolumes()...)
	antiAffinity := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 100,
		PodAffinityTerm: corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
			TopologyKey:   corev1.LabelHostname,
		},
	}}}
	pod := corev1.PodSpec{
		ServiceAccountName: names.ControllerServiceAccount,
		PriorityClassName:  "system-cluster-critical",
		NodeSelector:       map[string]string{masterRoleLabel: ""},
		Tolerations: []corev1.Toleration{
			{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
			{Key: masterRoleLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		},
		Affinity: &corev1.Affinity{PodAntiAffinity: antiAffinity},
		Containers: []corev1.Container{
			driver,
			rbacProxy("kube-rbac-proxy-8202", "driver-m", 9202, 8202),
			sidecar("csi-provisioner", o.Images[operandimages.EnvProvisioner], "--http-endpoint=localhost:8203", "--timeout=3m", "--default-fstype=ext4"),
			rbacProxy("provisioner-kube-rbac-proxy", "provisioner-m", 9203, 8203),
			sidecar("csi-attacher", o.Images[operandimages.EnvAttacher], "--http-endpoint=localhost:8204", "--timeout=3m"),
			rbacProxy("attacher-kube-rbac-proxy", "attacher-m", 9204, 8204),
			sidecar("csi-resizer", o.Images[operandimages.EnvResizer], "--http-endpoint=localhost:8205"),
			rbacProxy("resizer-kube-rbac-proxy", "resizer-m", 9205, 8205),
			sidecar("csi-snapshotter", o.Images[operandimages.EnvSnapshotter], "--metrics-address=localhost:8206"),
			rbacProxy("snapshotter-kube-rbac-proxy", "snapshotter-m", 9206, 8206),
			liveness,
		},
		Volumes: volumes,
	}
	if o.HyperShift {
		hostedPod(o, podLabels, depLabels, depAnnotations, &pod)
	}

	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerDeployment, Labels: depLabels, Annotations: depAnnotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec:       pod,
			},
		},
	}
	d.Annotations[specHashAnnotation] = specHash(d.Spec)
	return d
}

// hostedPod applies csi-operator's HyperShift patches and hooks to the controller: the guest
// kubeconfig volume, HyperShift's scheduling (labels, priority class, affinities, tolerations),
// the HostedControlPlane's node selector, labels and tolerations, and the release annotation,
// empty because cluster-storage-operator sets no OPERATOR_IMAGE_VERSION for Cinder.
func hostedPod(o Options, podLabels, depLabels, depAnnotations map[string]string, pod *corev1.PodSpec) {
	ns := o.Namespace
	podLabels[names.HostedControlPlaneLabel] = ns
	// Not csi-operator's: its controller lacks the management API access label, so HyperShift's
	// management-kas NetworkPolicy selects it. kube-router, which enforces the policies on the
	// local real nodes, does not reliably let such a pod reach the addresses the policy allows
	// (OpenStack, the guest API server; e2e/README.md, "NetworkPolicy enforcement"), so the
	// label is given here, where the test is about the switch, not about that gap.
	podLabels[names.NeedManagementKASAccess] = "true"
	depLabels["hypershift.openshift.io/managed-by"] = "cluster-storage-operator"
	depAnnotations["release.openshift.io/desired-version"] = ""
	pod.PriorityClassName = names.HyperShiftPriorityClass
	pod.NodeSelector = nil
	pod.Tolerations = []corev1.Toleration{
		{Key: names.ControlPlaneNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: names.HostedClusterNodeLabel, Operator: corev1.TolerationOpEqual, Value: ns, Effect: corev1.TaintEffectNoSchedule},
	}
	pod.Affinity.NodeAffinity = &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: names.ControlPlaneNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}},
		{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: names.HostedClusterNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{ns}}}}},
	}}
	pod.Affinity.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 100,
		PodAffinityTerm: corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{names.HostedControlPlaneLabel: ns}},
			TopologyKey:   corev1.LabelHostname,
		},
	}}}
	if hcp := o.HostedControlPlane; hcp != nil {
		if len(hcp.Spec.NodeSelector) > 0 {
			pod.NodeSelector = map[string]string{}
			for k, v := range hcp.Spec.NodeSelector {
				pod.NodeSelector[k] = v
			}
		}
		for k, v := range hcp.Spec.Labels {
			if _, ok := podLabels[k]; !ok {
				podLabels[k] = v
			}
		}
		pod.Tolerations = append(pod.Tolerations, hcp.Spec.Tolerations...)
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "hosted-kubeconfig", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: names.GuestKubeconfigSecret, DefaultMode: ptr.To[int32](0o644),
	}}})
}

// nodeDaemonSet is csi-operator's node DaemonSet, the same in both flavours: it mounts cloud-conf
// and, through the same volumes as the controller, the OpenStack credentials.
func nodeDaemonSet(o Options, hashes map[string]string) *appsv1.DaemonSet {
	hostPath := func(name, path string, t corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
	}
	bidirectional, hostToContainer := corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer
	driver := container("csi-driver", o.Images[operandimages.EnvDriver], []string{
		"/bin/cinder-csi-plugin", "--provide-controller-service=false", "--provide-node-service=true",
		"--endpoint=$(CSI_ENDPOINT)", "--cloud-config=$(CLOUD_CONFIG)", "--with-topology=$(ENABLE_TOPOLOGY)", "--v=2",
	}, append([]corev1.VolumeMount{
		{Name: "kubelet-dir", MountPath: "/var/lib/kubelet", MountPropagation: &bidirectional},
		{Name: "socket-dir", MountPath: "/csi"},
		{Name: "device-dir", MountPath: "/dev", MountPropagation: &hostToContainer},
		{Name: "etc-selinux", MountPath: "/etc/selinux"},
		{Name: "sys-fs", MountPath: "/sys/fs"},
	}, cloudMounts()...)...)
	driver.Env = driverEnv()
	driver.SecurityContext = &corev1.SecurityContext{
		Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
	}
	driver.Ports = []corev1.ContainerPort{{Name: "healthz", ContainerPort: 10300, Protocol: corev1.ProtocolTCP}}
	driver.LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromString("healthz")}},
		InitialDelaySeconds: 10, TimeoutSeconds: 10, PeriodSeconds: 30, FailureThreshold: 5,
	}
	liveness := container("csi-liveness-probe", o.Images[operandimages.EnvLivenessProbe],
		[]string{"--csi-address=/csi/csi.sock", "--http-endpoint=127.0.0.1:10300", "--v=2", "--probe-timeout=10s"},
		corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"})
	registrar := container("csi-node-driver-registrar", o.Images[operandimages.EnvNodeDriverRegistrar], []string{
		"--csi-address=/csi/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/cinder.csi.openstack.org/csi.sock",
		"--http-endpoint=127.0.0.1:10304", "--v=2",
	}, corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"}, corev1.VolumeMount{Name: "registration-dir", MountPath: "/registration"})
	registrar.SecurityContext.Privileged = ptr.To(true)
	registrar.Ports = []corev1.ContainerPort{{Name: "rhealthz", ContainerPort: 10304, Protocol: corev1.ProtocolTCP}}
	registrar.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{
		"/bin/sh", "-c", "rm -rf /registration/cinder.csi.openstack.org-reg.sock /csi/csi.sock",
	}}}}

	selector := map[string]string{"app": names.NodeDaemonSet}
	volumes := append([]corev1.Volume{
		hostPath("kubelet-dir", "/var/lib/kubelet", corev1.HostPathDirectory),
		hostPath("socket-dir", "/var/lib/kubelet/plugins/cinder.csi.openstack.org/", corev1.HostPathDirectoryOrCreate),
		hostPath("registration-dir", "/var/lib/kubelet/plugins_registry/", corev1.HostPathDirectory),
		hostPath("device-dir", "/dev", corev1.HostPathDirectory),
		hostPath("etc-selinux", "/etc/selinux", corev1.HostPathDirectoryOrCreate),
		hostPath("sys-fs", "/sys/fs", corev1.HostPathDirectory),
		// Never created by anyone and mounted by no container: csi-operator's leftover.
		{Name: "metrics-serving-cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: names.AssetPrefix + "-node-metrics-serving-cert"}}},
	}, cloudVolumes()...)
	annotations := map[string]string{
		"config.openshift.io/inject-proxy":          "csi-driver",
		"config.openshift.io/inject-proxy-cabundle": "csi-driver",
	}
	podAnnotations := map[string]string{
		"target.workload.openshift.io/management":             `{"effect": "PreferredDuringScheduling"}`,
		"openshift.io/required-scc":                           "privileged",
		"cluster-autoscaler.kubernetes.io/enable-ds-eviction": "false",
	}
	for k, v := range hashes {
		annotations[k], podAnnotations[k] = v, v
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet, Annotations: annotations},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("10%"))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: names.NodeServiceAccount,
					PriorityClassName:  "system-node-critical",
					HostNetwork:        true,
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:         []corev1.Container{driver, liveness, registrar},
					Volumes:            volumes,
				},
			},
		},
	}
	ds.Annotations[specHashAnnotation] = specHash(ds.Spec)
	return ds
}
