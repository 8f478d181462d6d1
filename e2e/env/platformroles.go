package env

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sidecarClusterRoles are the ClusterRoles that OpenShift's cluster-storage-operator ships for
// every CSI driver's sidecars and that the operator's standalone controller binds to (as
// csi-operator does) instead of defining its own. A standalone OpenShift cluster always has
// them; a plain cluster does not, so the seed creates them, with the rules each sidecar's
// informers and writes need. Without them the provisioner, attacher, resizer and snapshotter
// cannot even list their objects and no volume is ever provisioned.
func sidecarClusterRoles() []client.Object {
	rule := func(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	events := rule("", []string{"events"}, "list", "watch", "create", "update", "patch")
	role := func(name string, rules ...rbacv1.PolicyRule) client.Object {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	const storage, snapshot = "storage.k8s.io", "snapshot.storage.k8s.io"
	return []client.Object{
		role("openshift-csi-main-provisioner-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "create", "patch", "delete"),
			rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch", "update"),
			rule(storage, []string{"storageclasses"}, "get", "list", "watch"),
			events,
			rule(snapshot, []string{"volumesnapshots", "volumesnapshotcontents"}, "get", "list"),
			rule(storage, []string{"csinodes"}, "get", "list", "watch"),
			rule("", []string{"nodes"}, "get", "list", "watch"),
			rule(storage, []string{"volumeattachments"}, "get", "list", "watch"),
			rule(storage, []string{"volumeattributesclasses"}, "get", "list", "watch"),
		),
		role("openshift-csi-main-attacher-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "patch"),
			rule(storage, []string{"csinodes"}, "get", "list", "watch"),
			rule(storage, []string{"volumeattachments"}, "get", "list", "watch", "patch"),
			rule(storage, []string{"volumeattachments/status"}, "patch"),
			events,
		),
		role("openshift-csi-main-resizer-role",
			rule("", []string{"persistentvolumes"}, "get", "list", "watch", "patch"),
			rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch"),
			rule("", []string{"pods"}, "get", "list", "watch"),
			rule("", []string{"persistentvolumeclaims/status"}, "patch"),
			rule(storage, []string{"volumeattributesclasses"}, "get", "list", "watch"),
			events,
		),
		role("openshift-csi-main-snapshotter-role",
			events,
			rule(snapshot, []string{"volumesnapshotclasses"}, "get", "list", "watch"),
			rule(snapshot, []string{"volumesnapshotcontents"}, "get", "list", "watch", "update", "patch"),
			rule(snapshot, []string{"volumesnapshotcontents/status"}, "update", "patch"),
		),
		role("openshift-csi-provisioner-volumesnapshot-reader-role",
			rule(snapshot, []string{"volumesnapshots"}, "get", "list", "watch"),
		),
		role("openshift-csi-resizer-storageclass-reader-role",
			rule(storage, []string{"storageclasses"}, "get", "list", "watch"),
		),
	}
}
