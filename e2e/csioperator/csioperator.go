// Package csioperator builds what openshift/csi-operator leaves in a cluster for the Cinder CSI
// driver, and writes it as csi-operator does, so that tests can start from a cluster that runs
// csi-operator today and switch it to this operator (and back). Objects carry csi-operator's
// names, its field manager, its hash annotations and its conditions on the ClusterCSIDriver; in
// HyperShift mode the controller's objects live in the hosted control plane's namespace on the
// management cluster and the rest in the guest, as csi-operator splits them.
//
// Nothing here runs csi-operator itself: the objects are what its last reconcile wrote, and a
// test that switches back writes them again as its next reconcile would.
package csioperator

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// FieldManager is the field manager of csi-operator's writes. library-go's resourceapply creates
// and updates (never applies) without naming a field manager, so the API server records the
// prefix of the client's user agent, the binary's name (names.LegacyFieldOwners), and the
// ownership is Update-style.
const FieldManager = "openstack-cinder-csi-driver-operator"

// Kinds in library-go's hash annotation keys.
const (
	KindConfigMap = "configmap"
	KindSecret    = "secret"
)

// HashKey is the annotation key under which library-go records the hash of an input of a
// workload: "operator.openshift.io/dep-" followed by the hex SHA-256 of
// "<namespace>.<name>.<kind>", cut to a label key's 63 characters (every Cinder input's key is
// that long).
func HashKey(namespace, name, kind string) string {
	const prefix = "operator.openshift.io/dep-"
	sum := sha256.Sum256([]byte(namespace + "." + name + "." + kind))
	key := prefix + hex.EncodeToString(sum[:])
	return key[:63]
}

// Hash is the value of library-go's hash annotations: base64url of the FNV-32 of the
// JSON-encoded data.
func Hash(data any) string {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	h := fnv.New32()
	_, _ = h.Write(b)
	return base64.URLEncoding.EncodeToString(h.Sum(nil))
}

// specHash is library-go's spec-hash annotation value of a Deployment or DaemonSet: the hex
// SHA-256 of its JSON-encoded spec, by which resourceapply skips updates that change nothing.
func specHash(spec any) string {
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// specHashAnnotation is where library-go's resourceapply keeps specHash.
const specHashAnnotation = "operator.openshift.io/spec-hash"

// Options describe the cluster csi-operator ran in.
type Options struct {
	// HyperShift selects csi-operator's HyperShift flavour: the controller's objects in
	// Namespace on the management cluster, the rest in the guest.
	HyperShift bool
	// Namespace is the controller's namespace: the HCP namespace, or
	// openshift-cluster-csi-drivers in standalone mode.
	Namespace string
	// Images are the operand images by the variables csi-operator reads (DRIVER_IMAGE, ...).
	Images map[string]string
	// InfraID is the Infrastructure's infrastructureName, the driver's --cluster.
	InfraID string
	// CloudName is the clouds.yaml entry cloud.conf names.
	CloudName string
	// CABundle is the OpenStack CA that ConfigSync copies into cloud-conf; empty for none.
	CABundle string
	// Credentials is the data of the controller's credentials Secret, which the controller's
	// hash annotation covers.
	Credentials map[string][]byte
	// GuestCredentials is the data of the guest's credentials Secret, which the node plugin
	// mounts (HyperShift: hosted-cluster-config-operator's copy; standalone: the same Secret as
	// Credentials).
	GuestCredentials map[string][]byte
	// TrustedCA is the bundle the cluster network operator injects into csi-operator's trusted
	// CA ConfigMap (standalone); empty when nothing injects it, as on a management cluster.
	TrustedCA string
	// MetricsCert is the data of the controller's metrics serving-cert Secret, when service-ca
	// has issued it; nil leaves its hash out, as library-go does for a missing Secret.
	MetricsCert map[string][]byte
	// HostedControlPlane is what csi-operator's HyperShift hooks read: its node selector, labels
	// and tolerations go to the controller's pods.
	HostedControlPlane *hyperv1.HostedControlPlane
}

// Objects are csi-operator's objects in one cluster, split by the cluster they live in, each list
// in creation order (what its pods mount before the pods). In standalone mode both are in the one
// cluster.
type Objects struct {
	// Management holds the controller's objects: the HCP namespace's on HyperShift.
	Management []client.Object
	// Guest holds the node plugin's and the cluster-scoped objects.
	Guest []client.Object
}

// All returns every object, the management ones first.
func (o Objects) All() []client.Object {
	return append(append([]client.Object{}, o.Management...), o.Guest...)
}

// guestCredentials returns the guest Secret csi-operator's node plugin mounts.
func (o Options) guestCredentials() map[string][]byte {
	if o.GuestCredentials != nil {
		return o.GuestCredentials
	}
	return o.Credentials
}

// cloudConfData is what csi-operator's ConfigSync writes into cloud-conf (both copies on
// HyperShift): [Global] pointing at the mounted clouds.yaml, the topology decision and the CA.
func (o Options) cloudConfData() map[string]string {
	conf := "[Global]\nuse-clouds = true\nclouds-file = " + names.CloudsFilePath + "\ncloud = " + o.CloudName + "\n"
	data := map[string]string{nodeconf.KeyEnableTopology: "true"}
	if o.CABundle != "" {
		conf += "ca-file = " + names.CAFilePath + "\n"
		data[nodeconf.KeyCABundle] = o.CABundle
	}
	data[nodeconf.KeyCloudConf] = conf
	return data
}
