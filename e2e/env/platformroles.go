package env

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sidecarClusterRoles are the ClusterRoles that OpenShift's cluster-storage-operator ships for
// every CSI driver's sidecars and that the operator's standalone controller binds to (as
// csi-operator does) instead of defining its own. A standalone OpenShift cluster always has
// them; a plain cluster does not, so the seed creates them.
//
// Names and rules are exactly cluster-storage-operator's: openshift/cluster-storage-operator at
// commit bb8d2fd11a18ce59cf84a2982189d9ca2c23599e, manifests/09_sidecar-main_*_role.yaml and
// manifests/09_openshift-csi-*-role.yaml (annotations left out). They must not be broader: the
// operator may bind a role only if it holds every rule of it (or has `bind` on it), and under
// cluster-storage-operator's RBAC it holds only the operator ClusterRole of the fixture
// testdata/cso/standalone-rbac.yaml, which covers these roles but for the VolumeAttributesClass
// readers. A seeded role with a rule that the real one lacks (a volumeattributesclasses rule in
// the provisioner role, say) makes the binding forbidden here although it is allowed on OpenShift.
//
// All ten are seeded, as a cluster has them, although Cinder's controller is bound to six only:
// openshift/csi-operator at commit f7f9dc59603d190abbcda1ae818f489c9dc2f167
// (assets/overlays/openstack-cinder/generated/standalone/, pkg/driver/openstack-cinder) binds the
// four main roles, the resizer's StorageClass reader and the provisioner's VolumeSnapshot reader.
// The VolumeAttributesClass readers are bound for AWS EBS, Azure Disk and GCP PD only (drivers
// that implement ControllerModifyVolume); the Cinder plugin does not advertise MODIFY_VOLUME, so
// the resizer starts no VolumeAttributesClass informer, and the provisioner (v6) has none.
func sidecarClusterRoles() []client.Object {
	rule := func(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	role := func(name string, rules ...rbacv1.PolicyRule) client.Object {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	const storage, snapshot = "storage.k8s.io", "snapshot.storage.k8s.io"
	events := rule("", []string{"events"}, "list", "watch", "create", "update", "patch")
	return []client.Object{
		// 09_sidecar-main_provisioner_role.yaml (last changed in 3014bae5e).
		role("openshift-csi-main-provisioner-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "create", "delete", "patch"),
			rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch", "update"),
			rule(storage, []string{"storageclasses"}, "get", "list", "watch"),
			events,
			rule(storage, []string{"csinodes"}, "get", "list", "watch"),
			rule("", []string{"nodes"}, "get", "list", "watch"),
		),
		// 09_sidecar-main_attacher_role.yaml (last changed in 7b4d8861d).
		role("openshift-csi-main-attacher-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "update", "patch"),
			rule("", []string{"nodes"}, "get", "list", "watch"),
			rule(storage, []string{"csinodes"}, "get", "list", "watch"),
			rule(storage, []string{"volumeattachments"}, "get", "list", "watch", "update", "patch"),
			rule(storage, []string{"volumeattachments/status"}, "patch"),
		),
		// 09_sidecar-main_resizer_role.yaml (last changed in 7b4d8861d).
		role("openshift-csi-main-resizer-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "update", "patch"),
			rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch"),
			rule("", []string{"persistentvolumeclaims/status"}, "update", "patch"),
			events,
			rule("", []string{"pods"}, "get", "list", "watch"),
		),
		// 09_sidecar-main_snapshotter_role.yaml (last changed in 7b4d8861d).
		role("openshift-csi-main-snapshotter-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch"),
			rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch"),
			rule(storage, []string{"storageclasses"}, "get", "list", "watch"),
			events,
			rule("", []string{"secrets"}, "get", "list"),
			rule(snapshot, []string{"volumesnapshotclasses"}, "get", "list", "watch"),
			rule(snapshot, []string{"volumesnapshotcontents"}, "create", "get", "list", "watch", "update", "delete", "patch"),
			rule(snapshot, []string{"volumesnapshotcontents/status"}, "update", "patch"),
			rule(snapshot, []string{"volumesnapshots"}, "get", "list", "watch", "update"),
			rule("apiextensions.k8s.io", []string{"customresourcedefinitions"}, "create", "list", "watch", "delete"),
		),
		// 09_openshift-csi-provisioner-configmap-and-secret-reader-role.yaml (7b4d8861d).
		role("openshift-csi-provisioner-configmap-and-secret-reader-role",
			rule("", []string{"configmaps"}, "get", "list"),
			rule("", []string{"secrets"}, "get", "list", "watch"),
		),
		// 09_openshift-csi-provisioner-volumeattachment-reader-role.yaml (7b4d8861d).
		role("openshift-csi-provisioner-volumeattachment-reader-role",
			rule(storage, []string{"volumeattachments"}, "get", "list", "watch"),
		),
		// 09_openshift-csi-provisioner-volumeattributesclass-reader-role.yaml (2690145a8).
		role("openshift-csi-provisioner-volumeattributesclass-reader-role",
			rule(storage, []string{"volumeattributesclasses"}, "get", "list", "watch"),
		),
		// 09_openshift-csi-provisioner-volumesnapshot-reader-role.yaml (7335bce26).
		role("openshift-csi-provisioner-volumesnapshot-reader-role",
			rule(snapshot, []string{"volumesnapshots"}, "get", "list", "watch", "update"),
			rule(snapshot, []string{"volumesnapshotcontents"}, "get", "list"),
		),
		// 09_openshift-csi-resizer-storageclass-reader-role.yaml (7b4d8861d).
		role("openshift-csi-resizer-storageclass-reader-role",
			rule(storage, []string{"storageclasses"}, "get", "list", "watch"),
		),
		// 09_openshift-csi-resizer-volumeattributesclass-reader-role.yaml (2690145a8).
		role("openshift-csi-resizer-volumeattributesclass-reader-role",
			rule(storage, []string{"volumeattributesclasses"}, "get", "list", "watch"),
		),
	}
}
