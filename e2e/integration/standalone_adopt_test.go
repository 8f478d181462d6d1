// Switching a standalone cluster from csi-operator: the objects csi-operator leaves behind carry
// the same names this operator uses, on purpose, so that it adopts them in place. Nothing may be
// deleted and recreated (a deleted controller Deployment or node DaemonSet is an outage, a
// recreated CSIDriver or StorageClass breaks volumes in use), and each workload may roll once,
// from csi-operator's template to this operator's.
package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/images"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// csiOperatorManager is the field manager of csi-operator's writes. library-go's resourceapply
// creates and updates (never applies) without naming a field manager, so the API server records
// the prefix of the client's user agent, the binary's name (names.LegacyFieldOwners), and the
// ownership is Update-style.
const csiOperatorManager = "openstack-cinder-csi-driver-operator"

// csi-operator's hash annotation keys (library-go's "operator.openshift.io/dep-" plus a digest of
// "<namespace>.<name>.<kind>"), as they appear on standalone clusters.
const (
	csiOperatorCloudConfHash   = "operator.openshift.io/dep-2a78a60e2cfb360d9fe72d1859d93b0fdd3bc"
	csiOperatorCredentialsHash = "operator.openshift.io/dep-4b51488ec5b742a098d092dfe49449df0986e"
	csiOperatorTrustedCAHash   = "operator.openshift.io/dep-28104e6bcb20f4d44a571c8e2f3f0a1f5a880"
)

func TestStandaloneAdoptsCSIOperatorObjects(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 1, Workers: 2})
	ctx := context.Background()
	g := NewWithT(t)

	// What csi-operator left behind, created as csi-operator did.
	creds := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, creds)).To(Succeed())
	legacy := csiOperatorObjects(e, creds)
	for _, o := range legacy {
		g.Expect(e.GuestClient.Create(ctx, o, client.FieldOwner(csiOperatorManager))).To(Succeed(), "%T %s", o, client.ObjectKeyFromObject(o))
	}
	// The cluster network operator filled the trusted CA bundle csi-operator created.
	trustedCA := string(e.OpenStack.CACertPEM())
	update(t, e.MgmtClient, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.TrustedCABundleConfigMap}},
		"cluster-network-operator", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{names.KeyTrustedCA: trustedCA} })

	// csi-operator's workloads run: one ReplicaSet, one ControllerRevision, rolled out.
	g.Eventually(func(g Gomega) {
		dep := controllerDeployment(g, e)
		expectDeploymentRolledOut(g, dep)
		g.Expect(replicaSets(g, e)).To(HaveLen(1))
		ds := nodeDaemonSet(g, e)
		expectDaemonSetRolledOut(g, ds)
		g.Expect(daemonSetRevisions(g, e)).To(HaveLen(1))
	}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
	uids := map[string]types.UID{}
	for _, o := range legacy {
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		uids[objectName(g, e, o)] = o.GetUID()
	}
	rs0 := replicaSets(g, e)[0]
	rev0 := daemonSetRevisions(g, e)[0]
	// And the conditions its controllers wrote, each applied under its own field manager as
	// library-go does, the node plugin's Degraded among them.
	for _, t := range names.CSIOperatorConditions {
		status, reason := "False", "AsExpected"
		switch {
		case t == "OpenStackCinderDriverNodeServiceControllerDegraded":
			status, reason = "True", "SyncError"
		case strings.HasSuffix(t, "Available"):
			status = "True"
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": operatorv1.GroupVersion.String(), "kind": "ClusterCSIDriver",
			"metadata": map[string]any{"name": names.ClusterCSIDriverName},
			"status": map[string]any{"conditions": []any{map[string]any{
				"type": t, "status": status, "reason": reason, "lastTransitionTime": "2026-01-02T03:04:05Z",
			}}},
		}}
		g.Expect(e.GuestClient.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(t+"-sync"), client.ForceOwnership)).To(Succeed(), t)
	}

	start := time.Now()
	op := e.RunOperatorForTest(t, env.OperatorOptions{})

	t.Run("When the operator starts on a cluster csi-operator managed, it should report the driver Available", func(t *testing.T) {
		waitAvailable(t, e)
		t.Logf("Available %s after the operator started", time.Since(start).Round(100*time.Millisecond))
		g := NewWithT(t)
		// Settled: both workloads rolled out and no write (but leases) for a while, so that
		// the counts below are final.
		g.Eventually(func(g Gomega) {
			expectDeploymentRolledOut(g, controllerDeployment(g, e))
			expectDaemonSetRolledOut(g, nodeDaemonSet(g, e))
			var last time.Time
			for _, r := range op.Requests[standaloneManager].Since(start) {
				if r.Mutating() && !r.Lease() {
					last = r.Time
				}
			}
			g.Expect(last).NotTo(BeZero())
			g.Expect(time.Since(last)).To(BeNumerically(">=", standaloneSettleQuiet), "the operator wrote recently")
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		waitAvailable(t, e)
		expectNotDegraded(g, driver(g, e))
	})

	t.Run("When it takes over csi-operator's ClusterCSIDriver, it should remove every condition csi-operator wrote and keep its own", func(t *testing.T) {
		g := NewWithT(t)
		d := driver(g, e)
		for _, c := range d.Status.Conditions {
			g.Expect(names.CSIOperatorConditions).NotTo(ContainElement(c.Type), "csi-operator's %s is left", c.Type)
		}
		for _, typ := range append(append([]string{}, names.ControlPlaneConditions...), names.GuestConditions...) {
			g.Expect(conditions.Find(d.Status.Conditions, typ)).NotTo(BeNil(), typ)
		}
	})

	t.Run("When it adopts csi-operator's objects, it should keep every one of them: nothing deleted or recreated", func(t *testing.T) {
		g := NewWithT(t)
		for _, o := range legacy {
			fresh := reread(g, e, o)
			name := objectName(g, e, fresh)
			g.Expect(fresh.GetUID()).To(Equal(uids[name]), name)
			g.Expect(fresh.GetDeletionTimestamp()).To(BeNil(), name)
		}
	})

	t.Run("When it adopts csi-operator's objects, it should own the fields it sets under its field owners and label every object as managed", func(t *testing.T) {
		g := NewWithT(t)
		owners := map[string]string{
			"Deployment/" + names.ControllerDeployment:                         names.FieldOwnerControlPlane,
			"ConfigMap/" + names.CloudConfConfigMap:                            names.FieldOwnerControlPlane,
			"ConfigMap/" + names.TrustedCABundleConfigMap:                      names.FieldOwnerControlPlane,
			"ServiceAccount/" + names.ControllerServiceAccount:                 names.FieldOwnerControlPlane,
			"Service/" + names.ControllerMetricsService:                        names.FieldOwnerControlPlane,
			"ServiceMonitor/" + names.ControllerServiceMonitor:                 names.FieldOwnerControlPlane,
			"PodDisruptionBudget/" + names.ControllerPDB:                       names.FieldOwnerControlPlane,
			"DaemonSet/" + names.NodeDaemonSet:                                 names.FieldOwnerGuest,
			"ServiceAccount/" + names.NodeServiceAccount:                       names.FieldOwnerGuest,
			"CSIDriver/" + names.DriverName:                                    names.FieldOwnerGuest,
			"StorageClass/" + names.StorageClass:                               names.FieldOwnerGuest,
			"Role/" + names.AssetPrefix + "-lease-leader-election":             names.FieldOwnerGuest,
			"RoleBinding/" + names.AssetPrefix + "-lease-leader-election":      names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-main-provisioner-binding": names.FieldOwnerGuest,
			"ClusterRole/openstack-cinder-privileged-role":                     names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-node-privileged-binding":      names.FieldOwnerGuest,
		}
		g.Expect(owners).To(HaveLen(len(legacy)), "every legacy object has an expected owner")
		for _, o := range legacy {
			fresh := reread(g, e, o)
			kind := kindName(g, e, fresh)
			owner, ok := owners[kind+"/"+fresh.GetName()]
			g.Expect(ok).To(BeTrue(), "no expected owner for %s/%s", kind, fresh.GetName())
			g.Expect(appliedBy(fresh, owner)).To(BeTrue(), "%s/%s has no Apply entry of %s: %v", kind, fresh.GetName(), owner, managerNames(fresh))
			g.Expect(fresh.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue), "%s/%s", kind, fresh.GetName())
			// Taken over entirely: csi-operator keeps no field it could leave behind.
			g.Expect(managerNames(fresh)).NotTo(ContainElement(HavePrefix(csiOperatorManager+" ")), "%s/%s", kind, fresh.GetName())
		}
		// The workloads' templates are the operator's now.
		dep := controllerDeployment(g, e)
		g.Expect(ownedFields(g, dep, names.FieldOwnerControlPlane)).To(HaveKey("f:spec"))
		g.Expect(ownedFields(g, dep, names.FieldOwnerControlPlane)["f:spec"]).To(HaveKey("f:template"))
		ds := nodeDaemonSet(g, e)
		g.Expect(ownedFields(g, ds, names.FieldOwnerGuest)["f:spec"]).To(HaveKey("f:template"))
	})

	t.Run("When it adopts csi-operator's workloads, it should roll each of them exactly once", func(t *testing.T) {
		g := NewWithT(t)
		dep := controllerDeployment(g, e)
		g.Expect(dep.Generation).To(Equal(int64(2)), "one template change after csi-operator's")
		rss := replicaSets(g, e)
		g.Expect(rss).To(HaveLen(2))
		for _, rs := range rss {
			if rs.UID == rs0.UID {
				g.Expect(ptr.Deref(rs.Spec.Replicas, -1)).To(BeZero(), "csi-operator's ReplicaSet is scaled down")
			} else {
				g.Expect(rs.Annotations).To(HaveKeyWithValue(deploymentRevision, dep.Annotations[deploymentRevision]))
				g.Expect(rs.Status.AvailableReplicas).To(Equal(ptr.Deref(dep.Spec.Replicas, 1)))
			}
		}
		ds := nodeDaemonSet(g, e)
		g.Expect(ds.Generation).To(Equal(int64(2)), "one template change after csi-operator's")
		revs := daemonSetRevisions(g, e)
		g.Expect(revs).To(HaveLen(2))
		g.Expect(revs).To(ContainElement(HaveField("UID", rev0.UID)))
		expectDaemonSetRolledOut(g, ds)
	})

	t.Run("When it adopts csi-operator's node DaemonSet, it should stop mounting the credentials and the controller's cloud-conf into the node plugin", func(t *testing.T) {
		g := NewWithT(t)
		pod := nodeDaemonSet(g, e).Spec.Template.Spec
		g.Expect(secretVolumes(pod)).To(BeEmpty())
		g.Expect(configMapVolumes(pod)).To(Equal([]string{names.CloudConfNodeConfigMap}))
		for _, c := range pod.Containers {
			for _, v := range c.Env {
				g.Expect(v.ValueFrom).To(BeNil(), "%s env %s", c.Name, v.Name)
			}
		}
		c := container(&pod, "csi-driver")
		g.Expect(c).NotTo(BeNil())
		g.Expect(flagValues(c.Args, "--with-topology")).To(Equal([]string{"true"}))
	})

	t.Run("When it adopts csi-operator's controller Deployment, it should run the driver with the operator's arguments and leave nothing of csi-operator's template", func(t *testing.T) {
		g := NewWithT(t)
		dep := controllerDeployment(g, e)
		c := container(&dep.Spec.Template.Spec, "csi-driver")
		g.Expect(c).NotTo(BeNil())
		g.Expect(flagValues(c.Args, "--with-topology")).To(Equal([]string{"true"}))
		g.Expect(flagValues(c.Args, "--cluster")).To(Equal([]string{env.DefaultInfraID}))
		g.Expect(envValues(c, "ENABLE_TOPOLOGY")).To(BeEmpty())
		for _, k := range []string{csiOperatorCloudConfHash, csiOperatorCredentialsHash, csiOperatorTrustedCAHash} {
			g.Expect(dep.Annotations).NotTo(HaveKey(k))
			g.Expect(dep.Spec.Template.Annotations).NotTo(HaveKey(k))
		}
		// The trusted CA bundle the network operator filled is mounted as before.
		g.Expect(volumeNames(dep.Spec.Template.Spec)).To(ContainElement(trustedCAVolume))
		g.Expect(configMap(g, e.MgmtClient, e.Namespace, names.TrustedCABundleConfigMap).Data).To(Equal(map[string]string{names.KeyTrustedCA: trustedCA}))
	})

	t.Run("When it adopts csi-operator's StorageClass, it should keep it the default class", func(t *testing.T) {
		g := NewWithT(t)
		sc := &storagev1.StorageClass{}
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.StorageClass}, sc)).To(Succeed())
		g.Expect(sc.Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "true"))
	})
}

// csiOperatorObjects returns the objects csi-operator's standalone flavour leaves in a cluster
// (reference: csi-operator.md sections 1 and 2), in creation order.
func csiOperatorObjects(e *env.Env, creds *corev1.Secret) []client.Object {
	ns := e.Namespace
	caBundle := string(e.OpenStack.CACertPEM())
	cloudConf := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CloudConfConfigMap},
		Data: map[string]string{
			names.KeyCloudConf: "[Global]\nuse-clouds = true\nclouds-file = " + names.CloudsFilePath + "\ncloud = " + env.CloudName +
				"\nca-file = " + names.CAFilePath + "\n",
			names.KeyEnableTopology: "true",
			names.KeyCABundle:       caBundle,
		},
	}
	trustedCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: names.TrustedCABundleConfigMap,
		Labels: map[string]string{names.InjectTrustedCABundleLabel: "true"},
	}}
	sa := func(name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	controllerSubject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: names.ControllerServiceAccount, Namespace: ns}}
	const lease = names.AssetPrefix + "-lease-leader-election"
	objs := []client.Object{
		cloudConf, trustedCA,
		sa(names.ControllerServiceAccount), sa(names.NodeServiceAccount),
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: lease},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				Verbs: []string{"get", "watch", "list", "delete", "update", "create"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: lease},
			Subjects:   controllerSubject,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: lease},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "openstack-cinder-csi-main-provisioner-binding"},
			Subjects:   controllerSubject,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "openshift-csi-main-provisioner-role"},
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "openstack-cinder-privileged-role"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"},
				ResourceNames: []string{"privileged"}, Verbs: []string{"use"}}},
		},
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
		&policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerPDB},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
				Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": names.ControllerDeployment}},
				UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
			},
		},
		csiOperatorMetricsService(ns),
		csiOperatorServiceMonitor(ns),
	}
	hashes := map[string]string{
		csiOperatorCloudConfHash:   libraryGoHash(cloudConf.Data),
		csiOperatorCredentialsHash: libraryGoHash(creds.Data),
		csiOperatorTrustedCAHash:   libraryGoHash(map[string]string{names.KeyTrustedCA: caBundle}),
	}
	return append(objs, csiOperatorDeployment(ns, hashes), csiOperatorDaemonSet(hashes[csiOperatorCloudConfHash]))
}

// libraryGoHash is the value of library-go's hash annotations: base64url of the FNV-32 of the
// JSON-encoded data.
func libraryGoHash(data any) string {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	h := fnv.New32()
	_, _ = h.Write(b)
	return base64.URLEncoding.EncodeToString(h.Sum(nil))
}

func csiOperatorMetricsService(ns string) *corev1.Service {
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
	for i, p := range []string{"driver-m", "provisioner-m", "attacher-m", "resizer-m", "snapshotter-m"} {
		port := int32(9202 + i)
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p, Port: port, TargetPort: intstr.FromString(p), Protocol: corev1.ProtocolTCP,
		})
	}
	return svc
}

// csiOperatorServiceMonitor is the ServiceMonitor of csi-operator's standalone assets.
func csiOperatorServiceMonitor(ns string) *unstructured.Unstructured {
	sm := serviceMonitor(ns)
	var endpoints []any
	for _, p := range []string{"driver-m", "provisioner-m", "attacher-m", "resizer-m", "snapshotter-m"} {
		endpoints = append(endpoints, map[string]any{
			"port": p, "path": "/metrics", "scheme": "https", "interval": "30s",
			"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
			"tlsConfig": map[string]any{
				"caFile":     "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
				"serverName": names.ControllerMetricsService + "." + ns + ".svc",
			},
		})
	}
	sm.Object["spec"] = map[string]any{
		"jobLabel":  "component",
		"selector":  map[string]any{"matchLabels": map[string]any{"app": names.ControllerMetricsService}},
		"endpoints": endpoints,
	}
	return sm
}

// requests returns resource requests of cpu and memory.
func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

// csiOperatorDriverEnv is the csi-driver env of both csi-operator workloads: the topology
// decision comes from cloud-conf through $(ENABLE_TOPOLOGY).
func csiOperatorDriverEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "CSI_ENDPOINT", Value: "unix://csi/csi.sock"},
		{Name: "CLOUD_CONFIG", Value: "/etc/kubernetes/config/cloud.conf"},
		{Name: "ENABLE_TOPOLOGY", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.CloudConfConfigMap}, Key: names.KeyEnableTopology,
		}}},
	}
}

// csiOperatorCloudVolumes are the cloud configuration volumes of both csi-operator workloads.
func csiOperatorCloudVolumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: "secret-cinderplugin", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: names.CredentialsSecret, Items: []corev1.KeyToPath{{Key: names.KeyCloudsYAML, Path: names.KeyCloudsYAML}},
		}}},
		{Name: "config-cinderplugin", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.CloudConfConfigMap},
			Items:                []corev1.KeyToPath{{Key: names.KeyCloudConf, Path: names.KeyCloudConf}},
		}}},
		{Name: "cacert", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.CloudConfConfigMap},
			Items:                []corev1.KeyToPath{{Key: names.KeyCABundle, Path: names.KeyCABundle}},
			Optional:             ptr.To(true),
		}}},
	}
}

func csiOperatorCloudMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: "cacert", MountPath: "/etc/kubernetes/static-pod-resources/configmaps/cloud-config"},
		{Name: "config-cinderplugin", MountPath: "/etc/kubernetes/config", ReadOnly: true},
		{Name: "secret-cinderplugin", MountPath: "/etc/kubernetes/secret", ReadOnly: true},
	}
}

// csiOperatorContainer returns a container with csi-operator's common settings.
func csiOperatorContainer(name, image string, args []string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name: name, Image: image, Args: args,
		Resources:                requests("10m", "50Mi"),
		VolumeMounts:             mounts,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)},
	}
}

// csiOperatorDeployment is csi-operator's standalone controller Deployment (reference §2a) on a
// SingleReplica control plane.
func csiOperatorDeployment(ns string, hashes map[string]string) *appsv1.Deployment {
	img := env.LocalImages
	socket := corev1.VolumeMount{Name: "socket-dir", MountPath: "/var/lib/csi/sockets/pluginproxy/"}
	sidecar := func(name, image, endpoint string, extra ...string) corev1.Container {
		args := []string{"--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock", endpoint,
			"--leader-election", "--leader-election-lease-duration=137s", "--leader-election-renew-deadline=107s",
			"--leader-election-retry-period=26s", "--leader-election-namespace=" + names.GuestNamespace, "--v=2"}
		return csiOperatorContainer(name, image, append(args, extra...), socket)
	}
	rbacProxy := func(name, port string, exposed, loopback int) corev1.Container {
		c := csiOperatorContainer(name, img[images.EnvKubeRBACProxy], []string{
			fmt.Sprintf("--secure-listen-address=0.0.0.0:%d", exposed), fmt.Sprintf("--upstream=http://127.0.0.1:%d/", loopback),
			"--tls-cert-file=/etc/tls/private/tls.crt", "--tls-private-key-file=/etc/tls/private/tls.key",
			"--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384", "--tls-min-version=VersionTLS12", "--logtostderr=true",
		}, corev1.VolumeMount{Name: "metrics-serving-cert", MountPath: "/etc/tls/private"})
		c.Resources = requests("10m", "20Mi")
		c.Ports = []corev1.ContainerPort{{Name: port, ContainerPort: int32(exposed), Protocol: corev1.ProtocolTCP}}
		return c
	}
	driver := csiOperatorContainer("csi-driver", img[images.EnvDriver], []string{
		"/bin/cinder-csi-plugin", "--provide-controller-service=true", "--provide-node-service=false",
		"--endpoint=$(CSI_ENDPOINT)", "--http-endpoint=localhost:8202", "--cloud-config=$(CLOUD_CONFIG)",
		"--cluster=" + env.DefaultInfraID, "--with-topology=$(ENABLE_TOPOLOGY)", "--v=2",
	}, append([]corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"},
		{Name: trustedCAVolume, MountPath: trustedCAPath, ReadOnly: true}}, csiOperatorCloudMounts()...)...)
	driver.Env = csiOperatorDriverEnv()
	driver.Ports = []corev1.ContainerPort{{Name: "healthz", ContainerPort: 10301, Protocol: corev1.ProtocolTCP}}
	driver.LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
		InitialDelaySeconds: 10, TimeoutSeconds: 10, PeriodSeconds: 30, FailureThreshold: 5,
	}
	liveness := csiOperatorContainer("csi-liveness-probe", img[images.EnvLivenessProbe],
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
	depAnnotations := map[string]string{
		"config.openshift.io/inject-proxy":          "csi-driver",
		"config.openshift.io/inject-proxy-cabundle": "csi-driver",
	}
	for k, v := range hashes {
		podAnnotations[k], depAnnotations[k] = v, v
	}
	volumes := append([]corev1.Volume{
		{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "metrics-serving-cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: names.ControllerMetricsSecret}}},
		{Name: trustedCAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.TrustedCABundleConfigMap},
			Items:                []corev1.KeyToPath{{Key: names.KeyTrustedCA, Path: "tls-ca-bundle.pem"}},
		}}},
	}, csiOperatorCloudVolumes()...)

	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerDeployment, Annotations: depAnnotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: names.ControllerServiceAccount,
					PriorityClassName:  "system-cluster-critical",
					NodeSelector:       map[string]string{masterRoleLabel: ""},
					Tolerations:        masterTolerations,
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
								TopologyKey:   "kubernetes.io/hostname",
							},
						}},
					}},
					Containers: []corev1.Container{
						driver,
						rbacProxy("kube-rbac-proxy-8202", "driver-m", 9202, 8202),
						sidecar("csi-provisioner", img[images.EnvProvisioner], "--http-endpoint=localhost:8203", "--timeout=3m", "--default-fstype=ext4"),
						rbacProxy("provisioner-kube-rbac-proxy", "provisioner-m", 9203, 8203),
						sidecar("csi-attacher", img[images.EnvAttacher], "--http-endpoint=localhost:8204", "--timeout=3m"),
						rbacProxy("attacher-kube-rbac-proxy", "attacher-m", 9204, 8204),
						sidecar("csi-resizer", img[images.EnvResizer], "--http-endpoint=localhost:8205"),
						rbacProxy("resizer-kube-rbac-proxy", "resizer-m", 9205, 8205),
						sidecar("csi-snapshotter", img[images.EnvSnapshotter], "--metrics-address=localhost:8206"),
						rbacProxy("snapshotter-kube-rbac-proxy", "snapshotter-m", 9206, 8206),
						liveness,
					},
					Volumes: volumes,
				},
			},
		},
	}
}

// csiOperatorDaemonSet is csi-operator's node DaemonSet (reference §2b): it mounts cloud-conf
// and, through the same volumes as the controller, the OpenStack credentials.
func csiOperatorDaemonSet(cloudConfHash string) *appsv1.DaemonSet {
	img := env.LocalImages
	hostPath := func(name, path string, t corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
	}
	bidirectional, hostToContainer := corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer
	driver := csiOperatorContainer("csi-driver", img[images.EnvDriver], []string{
		"/bin/cinder-csi-plugin", "--provide-controller-service=false", "--provide-node-service=true",
		"--endpoint=$(CSI_ENDPOINT)", "--cloud-config=$(CLOUD_CONFIG)", "--with-topology=$(ENABLE_TOPOLOGY)", "--v=2",
	}, append([]corev1.VolumeMount{
		{Name: "kubelet-dir", MountPath: "/var/lib/kubelet", MountPropagation: &bidirectional},
		{Name: "socket-dir", MountPath: "/csi"},
		{Name: "device-dir", MountPath: "/dev", MountPropagation: &hostToContainer},
		{Name: "etc-selinux", MountPath: "/etc/selinux"},
		{Name: "sys-fs", MountPath: "/sys/fs"},
	}, csiOperatorCloudMounts()...)...)
	driver.Env = csiOperatorDriverEnv()
	driver.SecurityContext = &corev1.SecurityContext{
		Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
	}
	driver.Ports = []corev1.ContainerPort{{Name: "healthz", ContainerPort: 10300, Protocol: corev1.ProtocolTCP}}
	liveness := csiOperatorContainer("csi-liveness-probe", img[images.EnvLivenessProbe],
		[]string{"--csi-address=/csi/csi.sock", "--http-endpoint=127.0.0.1:10300", "--v=2", "--probe-timeout=10s"},
		corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"})
	registrar := csiOperatorContainer("csi-node-driver-registrar", img[images.EnvNodeDriverRegistrar], []string{
		"--csi-address=/csi/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/cinder.csi.openstack.org/csi.sock",
		"--http-endpoint=127.0.0.1:10304", "--v=2",
	}, corev1.VolumeMount{Name: "socket-dir", MountPath: "/csi"}, corev1.VolumeMount{Name: "registration-dir", MountPath: "/registration"})
	registrar.SecurityContext.Privileged = ptr.To(true)
	registrar.Ports = []corev1.ContainerPort{{Name: "rhealthz", ContainerPort: 10304, Protocol: corev1.ProtocolTCP}}

	selector := map[string]string{"app": names.NodeDaemonSet}
	volumes := append([]corev1.Volume{
		hostPath("kubelet-dir", "/var/lib/kubelet", corev1.HostPathDirectory),
		hostPath("socket-dir", "/var/lib/kubelet/plugins/cinder.csi.openstack.org/", corev1.HostPathDirectoryOrCreate),
		hostPath("registration-dir", "/var/lib/kubelet/plugins_registry/", corev1.HostPathDirectory),
		hostPath("device-dir", "/dev", corev1.HostPathDirectory),
		hostPath("etc-selinux", "/etc/selinux", corev1.HostPathDirectoryOrCreate),
		hostPath("sys-fs", "/sys/fs", corev1.HostPathDirectory),
		{Name: "metrics-serving-cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: names.AssetPrefix + "-node-metrics-serving-cert"}}},
	}, csiOperatorCloudVolumes()...)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: names.GuestNamespace, Name: names.NodeDaemonSet,
			Annotations: map[string]string{
				"config.openshift.io/inject-proxy":          "csi-driver",
				"config.openshift.io/inject-proxy-cabundle": "csi-driver",
				csiOperatorCloudConfHash:                    cloudConfHash,
			},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("10%"))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: selector,
					Annotations: map[string]string{
						"target.workload.openshift.io/management":             `{"effect": "PreferredDuringScheduling"}`,
						"openshift.io/required-scc":                           "privileged",
						"cluster-autoscaler.kubernetes.io/enable-ds-eviction": "false",
						csiOperatorCloudConfHash:                              cloudConfHash,
					},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName: names.NodeServiceAccount,
					PriorityClassName:  "system-node-critical",
					HostNetwork:        true,
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:         []corev1.Container{driver, liveness, registrar},
					Volumes:            volumes,
				},
			},
		},
	}
}

// reread reads o anew into an empty object of its type: decoding into a used one would keep
// fields the server no longer has.
func reread(g Gomega, e *env.Env, o client.Object) client.Object {
	fresh := reflect.New(reflect.TypeOf(o).Elem()).Interface().(client.Object)
	if u, ok := o.(*unstructured.Unstructured); ok {
		fresh = &unstructured.Unstructured{}
		fresh.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	}
	g.Expect(e.GuestClient.Get(context.Background(), client.ObjectKeyFromObject(o), fresh)).To(Succeed())
	return fresh
}

// kindName returns the kind of an object.
func kindName(g Gomega, e *env.Env, o client.Object) string {
	gvk, err := e.GuestClient.GroupVersionKindFor(o)
	g.Expect(err).NotTo(HaveOccurred())
	return gvk.Kind
}

// objectName names an object by kind, namespace and name, for maps and messages.
func objectName(g Gomega, e *env.Env, o client.Object) string {
	return kindName(g, e, o) + "/" + client.ObjectKeyFromObject(o).String()
}

// appliedBy reports whether manager owns fields of o's main resource through server-side apply.
func appliedBy(o client.Object, manager string) bool {
	for _, f := range o.GetManagedFields() {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply && f.Subresource == "" {
			return true
		}
	}
	return false
}

func managerNames(o client.Object) []string {
	var out []string
	for _, f := range o.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s (%s %s)", f.Manager, f.Operation, f.Subresource))
	}
	return out
}

// ownedFields returns the decoded FieldsV1 of manager's Apply entry on o's main resource.
func ownedFields(g Gomega, o client.Object, manager string) map[string]any {
	for _, f := range o.GetManagedFields() {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply && f.Subresource == "" && f.FieldsV1 != nil {
			var m map[string]any
			g.Expect(json.Unmarshal(f.FieldsV1.GetRawBytes(), &m)).To(Succeed())
			return m
		}
	}
	return nil
}
