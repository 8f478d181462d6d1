// Switching a standalone cluster from csi-operator: the objects csi-operator leaves behind carry
// the same names this operator uses, on purpose, so that it adopts them in place. Nothing may be
// deleted and recreated (a deleted controller Deployment or node DaemonSet is an outage, a
// recreated CSIDriver or StorageClass breaks volumes in use), and each workload may roll once,
// from csi-operator's template to this operator's.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/csioperator"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

func TestStandaloneAdoptsCSIOperatorObjects(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 1, Workers: 2})
	ctx := context.Background()
	g := NewWithT(t)

	// What csi-operator left behind, created as csi-operator did, with the trusted CA bundle
	// the cluster network operator filled.
	creds := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, creds)).To(Succeed())
	trustedCA := string(e.OpenStack.CACertPEM())
	opts := csioperator.Options{
		Namespace: e.Namespace, Images: env.LocalImages, InfraID: env.DefaultInfraID, CloudName: env.CloudName,
		CABundle: string(e.OpenStack.CACertPEM()), Credentials: creds.Data, TrustedCA: trustedCA,
	}
	objs := csioperator.Build(opts)
	g.Expect(csioperator.Install(ctx, e.MgmtClient, e.GuestClient, opts, objs)).To(Succeed())
	legacy := objs.All()

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
		for _, typ := range slices.Concat(names.ControlPlaneConditions, names.AttachmentConditions, names.GuestConditions) {
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
			"Deployment/" + names.ControllerDeployment:                                          names.FieldOwnerControlPlane,
			"ConfigMap/" + names.CloudConfConfigMap:                                             names.FieldOwnerControlPlane,
			"ConfigMap/" + names.TrustedCABundleConfigMap:                                       names.FieldOwnerControlPlane,
			"ServiceAccount/" + names.ControllerServiceAccount:                                  names.FieldOwnerControlPlane,
			"Service/" + names.ControllerMetricsService:                                         names.FieldOwnerControlPlane,
			"ServiceMonitor/" + names.ControllerServiceMonitor:                                  names.FieldOwnerControlPlane,
			"PodDisruptionBudget/" + names.ControllerPDB:                                        names.FieldOwnerControlPlane,
			"DaemonSet/" + names.NodeDaemonSet:                                                  names.FieldOwnerGuest,
			"ServiceAccount/" + names.NodeServiceAccount:                                        names.FieldOwnerGuest,
			"CSIDriver/" + names.DriverName:                                                     names.FieldOwnerGuest,
			"StorageClass/" + names.StorageClass:                                                names.FieldOwnerGuest,
			"Role/" + names.AssetPrefix + "-lease-leader-election":                              names.FieldOwnerGuest,
			"RoleBinding/" + names.AssetPrefix + "-lease-leader-election":                       names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-main-provisioner-binding":                  names.FieldOwnerGuest,
			"ClusterRole/openstack-cinder-privileged-role":                                      names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-node-privileged-binding":                       names.FieldOwnerGuest,
			"VolumeSnapshotClass/" + names.VolumeSnapshotCls:                                    names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-main-attacher-binding":                     names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-main-resizer-binding":                      names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-main-snapshotter-binding":                  names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-storageclass-reader-resizer-binding":       names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-csi-volumesnapshot-reader-provisioner-binding": names.FieldOwnerGuest,
			"ClusterRole/openstack-cinder-kube-rbac-proxy-role":                                 names.FieldOwnerGuest,
			"ClusterRoleBinding/openstack-cinder-kube-rbac-proxy-binding":                       names.FieldOwnerGuest,
			"Role/" + names.AssetPrefix + "-prometheus":                                         names.FieldOwnerGuest,
			"RoleBinding/" + names.AssetPrefix + "-prometheus":                                  names.FieldOwnerGuest,
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
			g.Expect(managerNames(fresh)).NotTo(ContainElement(HavePrefix(csioperator.FieldManager+" ")), "%s/%s", kind, fresh.GetName())
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
		g.Expect(configMapVolumes(pod)).To(Equal([]string{nodeconf.StandaloneName}))
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
		for _, k := range []string{
			csioperator.HashKey(e.Namespace, names.CloudConfConfigMap, csioperator.KindConfigMap),
			csioperator.HashKey(e.Namespace, names.CredentialsSecret, csioperator.KindSecret),
			csioperator.HashKey(e.Namespace, names.TrustedCABundleConfigMap, csioperator.KindConfigMap),
		} {
			g.Expect(dep.Annotations).NotTo(HaveKey(k))
			g.Expect(dep.Spec.Template.Annotations).NotTo(HaveKey(k))
		}
		// The trusted CA bundle the network operator filled is mounted as before.
		g.Expect(volumeNames(dep.Spec.Template.Spec)).To(ContainElement(csioperator.TrustedCAVolume))
		g.Expect(configMap(g, e.MgmtClient, e.Namespace, names.TrustedCABundleConfigMap).Data).To(Equal(map[string]string{names.KeyTrustedCA: trustedCA}))
	})

	t.Run("When it adopts csi-operator's StorageClass, it should keep it the default class", func(t *testing.T) {
		g := NewWithT(t)
		sc := &storagev1.StorageClass{}
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.StorageClass}, sc)).To(Succeed())
		g.Expect(sc.Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "true"))
	})
}

// reread reads o anew into an empty object of its type.
func reread(g Gomega, e *env.Env, o client.Object) client.Object {
	fresh := csioperator.EmptyLike(o)
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
