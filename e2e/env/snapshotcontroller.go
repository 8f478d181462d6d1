package env

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SnapshotControllerNamespace is where the harness runs the snapshot controller on clusters with
// real nodes. On OpenShift the csi-snapshot-controller-operator runs it (in the hosted control
// plane on HyperShift); the operator under test does not own it, so the harness stands in for
// that operator, with the real snapshot-controller binary.
const SnapshotControllerNamespace = "e2e-snapshot-controller"

// snapshotControllerObjects are the snapshot controller's ServiceAccount, the cluster role it
// needs (the rules of the external-snapshotter's own RBAC for the v1 snapshot API, without
// group snapshots, which stay off) and a one-replica Deployment without leader election.
func snapshotControllerObjects(image string) []client.Object {
	const name = "snapshot-controller"
	labels := map[string]string{"app": name}
	verbs := func(v ...string) []string { return v }
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SnapshotControllerNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SnapshotControllerNamespace, Name: name}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: verbs("get", "list", "watch")},
				{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: verbs("get", "list", "watch", "update", "patch")},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: verbs("list", "watch", "create", "update", "patch")},
				{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: verbs("get", "list", "watch")},
				{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotclasses"}, Verbs: verbs("get", "list", "watch")},
				{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotcontents"}, Verbs: verbs("create", "get", "list", "watch", "update", "delete", "patch")},
				{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotcontents/status"}, Verbs: verbs("patch", "update")},
				{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots"}, Verbs: verbs("get", "list", "watch", "update", "patch", "delete")},
				{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots/status"}, Verbs: verbs("update", "patch")},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-" + name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: SnapshotControllerNamespace, Name: name}},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: SnapshotControllerNamespace, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: name,
						// Control-plane or master nodes may be tainted; the controller only
						// talks to the API server, so it may run anywhere.
						Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{
							Name:            name,
							Image:           image,
							ImagePullPolicy: corev1.PullIfNotPresent,
							Args:            []string{"--v=2", "--leader-election=false"},
						}},
					},
				},
			},
		},
	}
}
