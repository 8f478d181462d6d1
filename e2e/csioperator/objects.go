package csioperator

import (
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Build returns csi-operator's objects for the cluster o describes (reference: csi-operator's
// generated standalone and HyperShift assets, its ConfigSync output and its hooks).
func Build(o Options) Objects {
	if o.CloudName == "" {
		o.CloudName = "openstack"
	}
	ns := o.Namespace
	cloudConf := func(namespace string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.CloudConfConfigMap},
			Data:       o.cloudConfData(),
		}
	}
	trustedCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: names.TrustedCABundleConfigMap,
		Labels: map[string]string{names.InjectTrustedCABundleLabel: "true"},
	}}
	controllerSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerServiceAccount}}
	if o.HyperShift {
		controllerSA.ImagePullSecrets = []corev1.LocalObjectReference{{Name: names.PullSecret}}
	}

	mgmt := []client.Object{cloudConf(ns), trustedCA, controllerSA}
	var guest []client.Object
	if o.HyperShift {
		// ConfigSync writes the same cloud-conf into both clusters.
		guest = append(guest, cloudConf(names.GuestNamespace))
	}
	guest = append(guest, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeServiceAccount}})
	guest = append(guest, guestStatic(ns)...)
	mgmt = append(mgmt, controllerPDB(ns), metricsService(ns))
	if !o.HyperShift {
		// csi-operator has no monitoring on HyperShift.
		mgmt = append(mgmt, serviceMonitor(ns))
	}

	// The hashes csi-operator's hooks put on the workloads, of each input as it is in the
	// cluster where the pods run. A Secret or ConfigMap that does not exist has none.
	controllerHashes := map[string]string{
		HashKey(ns, names.CloudConfConfigMap, KindConfigMap): Hash(o.cloudConfData()),
		HashKey(ns, names.CredentialsSecret, KindSecret):     Hash(o.Credentials),
	}
	if o.MetricsCert != nil {
		controllerHashes[HashKey(ns, names.ControllerMetricsSecret, KindSecret)] = Hash(o.MetricsCert)
	}
	if o.TrustedCA != "" {
		controllerHashes[HashKey(ns, names.TrustedCABundleConfigMap, KindConfigMap)] = Hash(map[string]string{names.KeyTrustedCA: o.TrustedCA})
	}
	nodeHashes := map[string]string{
		HashKey(names.GuestNamespace, names.CloudConfConfigMap, KindConfigMap): Hash(o.cloudConfData()),
		HashKey(names.GuestNamespace, names.CredentialsSecret, KindSecret):     Hash(o.guestCredentials()),
	}
	mgmt = append(mgmt, controllerDeployment(o, controllerHashes))
	guest = append(guest, &snapshotv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: names.VolumeSnapshotCls, Annotations: map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}},
		Driver:         names.DriverName,
		DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
		Parameters:     map[string]string{"force-create": "false"},
	}, nodeDaemonSet(o, nodeHashes))
	return Objects{Management: mgmt, Guest: guest}
}

// guestStatic returns the guest's static assets: the RBAC of the node plugin and of the
// controller's sidecars (whose subjects name the controller's ServiceAccount in the guest
// namespace, dangling on HyperShift), of its kube-rbac-proxies (naming it in its own namespace)
// and of Prometheus, the CSIDriver and the default StorageClass. Roles before their bindings, as
// csi-operator orders them.
func guestStatic(ns string) []client.Object {
	controllerSubject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: names.ControllerServiceAccount, Namespace: names.GuestNamespace}}
	const (
		lease      = names.AssetPrefix + "-lease-leader-election"
		prometheus = names.AssetPrefix + "-prometheus"
		rbacProxy  = "openstack-cinder-kube-rbac-proxy"
	)
	sidecarBinding := func(name, role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Subjects:   controllerSubject,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}
	}
	return []client.Object{
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "openstack-cinder-privileged-role"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"},
				ResourceNames: []string{"privileged"}, Verbs: []string{"use"}}},
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: rbacProxy + "-role"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}},
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: lease},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				Verbs: []string{"get", "watch", "list", "delete", "update", "create"}}},
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: prometheus},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"},
				Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: rbacProxy + "-binding"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: names.ControllerServiceAccount, Namespace: ns}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbacProxy + "-role"},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: lease},
			Subjects:   controllerSubject,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: lease},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: prometheus},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus-k8s", Namespace: "openshift-monitoring"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: prometheus},
		},
		sidecarBinding("openstack-cinder-csi-main-provisioner-binding", "openshift-csi-main-provisioner-role"),
		sidecarBinding("openstack-cinder-csi-main-attacher-binding", "openshift-csi-main-attacher-role"),
		sidecarBinding("openstack-cinder-csi-main-resizer-binding", "openshift-csi-main-resizer-role"),
		sidecarBinding("openstack-cinder-csi-main-snapshotter-binding", "openshift-csi-main-snapshotter-role"),
		sidecarBinding("openstack-cinder-csi-storageclass-reader-resizer-binding", "openshift-csi-resizer-storageclass-reader-role"),
		sidecarBinding("openstack-cinder-csi-volumesnapshot-reader-provisioner-binding", "openshift-csi-provisioner-volumesnapshot-reader-role"),
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "openstack-cinder-node-privileged-binding"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: names.NodeServiceAccount, Namespace: names.GuestNamespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "openstack-cinder-privileged-role"},
		},
		&storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: names.DriverName, Annotations: map[string]string{"csi.openshift.io/managed": "true"}},
			Spec: storagev1.CSIDriverSpec{
				AttachRequired:       ptr.To(true),
				PodInfoOnMount:       ptr.To(true),
				FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
				RequiresRepublish:    ptr.To(false),
				StorageCapacity:      ptr.To(false),
				SELinuxMount:         ptr.To(true),
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
			},
		},
		&storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{Name: names.StorageClass, Annotations: map[string]string{names.DefaultStorageClassAnnotation: "true"}},
			Provisioner:          names.DriverName,
			ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			AllowVolumeExpansion: ptr.To(true),
		},
	}
}

func controllerPDB(ns string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerPDB},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": names.ControllerDeployment}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// metricsPorts are the controller's exposed metrics ports by name, from 9202 on.
var metricsPorts = []string{"driver-m", "provisioner-m", "attacher-m", "resizer-m", "snapshotter-m"}

func metricsService(ns string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: names.ControllerMetricsService,
			Labels:      map[string]string{"app": names.ControllerMetricsService},
			Annotations: map[string]string{names.ServingCertAnnotation: names.ControllerMetricsSecret},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": names.ControllerDeployment},
		},
	}
	for i, p := range metricsPorts {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p, Port: int32(9202 + i), TargetPort: intstr.FromString(p), Protocol: corev1.ProtocolTCP,
		})
	}
	return svc
}

// serviceMonitor is the ServiceMonitor of csi-operator's standalone assets.
func serviceMonitor(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("monitoring.coreos.com/v1")
	u.SetKind("ServiceMonitor")
	u.SetNamespace(ns)
	u.SetName(names.ControllerServiceMonitor)
	var endpoints []any
	for _, p := range metricsPorts {
		endpoints = append(endpoints, map[string]any{
			"port": p, "path": "/metrics", "scheme": "https", "interval": "30s",
			"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
			"tlsConfig": map[string]any{
				"caFile":     "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
				"serverName": names.ControllerMetricsService + "." + ns + ".svc",
			},
		})
	}
	u.Object["spec"] = map[string]any{
		"jobLabel":  "component",
		"selector":  map[string]any{"matchLabels": map[string]any{"app": names.ControllerMetricsService}},
		"endpoints": endpoints,
	}
	return u
}
