package manifests

import "strings"

// The containers of the operand pods that the managers' adapters find by name, to set an image or
// add arguments. The manifests name them; TestOperandsAgree checks that each one is there.
const (
	// ContainerDriver is cinder-csi-plugin, in controller.yaml and node.yaml.
	ContainerDriver = "csi-driver"
	// ContainerLivenessProbe is the CSI livenessprobe, in controller.yaml and node.yaml.
	ContainerLivenessProbe = "csi-liveness-probe"

	// The CSI sidecars of controller.yaml.
	ContainerProvisioner = "csi-provisioner"
	ContainerAttacher    = "csi-attacher"
	ContainerResizer     = "csi-resizer"
	ContainerSnapshotter = "csi-snapshotter"

	// ContainerNodeDriverRegistrar is the registrar of node.yaml.
	ContainerNodeDriverRegistrar = "csi-node-driver-registrar"
)

// VolumeMetricsServingCert is controller.yaml's volume of the metrics serving certificate, which
// the controlplane manager mounts into each kube-rbac-proxy it adds.
const VolumeMetricsServingCert = "metrics-serving-cert"

// IsKubeRBACProxy reports whether the container named name is one of the controller's
// kube-rbac-proxies, which the controlplane manager adds to controller.yaml's. csi-operator names the driver's "kube-rbac-proxy-8202" and each sidecar's
// "<sidecar>-kube-rbac-proxy"; the names are kept, so that what was built for csi-operator's
// containers goes on working, and this is what they have in common.
func IsKubeRBACProxy(name string) bool {
	return strings.Contains(name, "kube-rbac-proxy")
}
