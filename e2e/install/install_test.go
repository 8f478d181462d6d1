package install_test

import (
	"context"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// TestHyperShiftInstall applies hypershift/management.yaml to a management cluster and
// hypershift/guest.yaml to a guest cluster, then runs the operator as the hostedcluster command
// does (both managers, one leader election), on each cluster as the ServiceAccount those files bind (management side:
// clusters-<name>/cinder-csi-operator; guest side: openshift-cluster-csi-drivers/cinder-csi-operator),
// through install, Events, managementState Removed and back. Any request the RBAC denies fails
// the test.
func TestHyperShiftInstall(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	// The installer's substitution of the HostedControlPlane namespace.
	placeholder := strings.NewReplacer(install.PlaceholderNamespace, e.Namespace)
	mgmtDocs := readManifest(t, hyperShiftManagementFile, placeholder)
	guestDocs := readManifest(t, hyperShiftGuestFile, nil)
	mgmtID, guestID := serviceAccount(e.Namespace, operatorSA(hyperShiftManagementFile)), serviceAccount(names.GuestNamespace, operatorSA(hyperShiftGuestFile))
	ctx := context.Background()

	t.Run("When the install manifests are applied, it should create every object they hold", func(t *testing.T) {
		createAll(t, e.MgmtClient, mgmtDocs)
		createAll(t, e.GuestClient, guestDocs)
	})

	t.Run("When the RBAC is in place, every permission it grants should be in effect for the operator's identities", func(t *testing.T) {
		waitRulesInEffect(t, e.MgmtClient, mgmtDocs, mgmtID)
		waitRulesInEffect(t, e.GuestClient, guestDocs, guestID)
	})

	t.Run("When the operator's identities ask for more than they are granted, it should be forbidden", func(t *testing.T) {
		g := NewWithT(t)
		mgmt := impersonating(t, e.MgmtConfig(), mgmtID)
		guest := impersonating(t, e.GuestConfig(), guestID)
		// The positive control: the one Secret the operator reads.
		g.Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, &corev1.Secret{})).To(Succeed())
		for what, err := range map[string]error{
			"get the guest admin kubeconfig":    mgmt.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.GuestKubeconfigSecret}, &corev1.Secret{}),
			"list the HCP namespace's Secrets":  mgmt.List(ctx, &corev1.SecretList{}, client.InNamespace(e.Namespace)),
			"list Secrets of another namespace": mgmt.List(ctx, &corev1.SecretList{}, client.InNamespace(metav1.NamespaceSystem)),
			"delete a guest Node":               guest.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "any"}}),
			"list guest Secrets":                guest.List(ctx, &corev1.SecretList{}, client.InNamespace(names.GuestNamespace)),
		} {
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
		}
	})

	t.Run("When the operator Deployment is applied, it should roll out on the management cluster", func(t *testing.T) {
		waitDeploymentAvailable(t, e.MgmtClient, e.Namespace, operatorSA(hyperShiftManagementFile))
	})

	log := &apiLog{}
	ids := map[string]rest.ImpersonationConfig{env.ClusterManagement: mgmtID, env.ClusterGuest: guestID}
	start := time.Now()
	op := e.RunOperatorForTest(t, env.OperatorOptions{LeaderElection: true, WrapConfig: log.wrapConfig(t, ids)})
	// The guest manager sends nothing to the management cluster: the process's one lease is
	// the leader election's.
	allKeys := []string{"controlplane@" + env.ClusterManagement, "controlplane@" + env.ClusterGuest, "guest@" + env.ClusterGuest, "hostedcluster@" + env.ClusterManagement}

	t.Run("When both managers run as the operator's ServiceAccounts, it should install the driver to Available", func(t *testing.T) {
		waitAvailable(t, e)
		t.Logf("Available %s after the operator started", time.Since(start).Round(100*time.Millisecond))
		expectExist(t, e.MgmtClient, hyperShiftControllerObjects(e.Namespace))
		expectExist(t, e.GuestClient, append(guestObjects(t, true), snapshotClass()))
		log.expectAllowed(t, allKeys...)
	})

	t.Run("When leader election is on, the operator should hold its one lease on the management cluster", func(t *testing.T) {
		waitLeases(t, e.MgmtClient, e.Namespace, names.LeaderElectionControlPlane)
		err := e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.LeaderElectionGuest}, &coordinationv1.Lease{})
		NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the split layout's guest lease: %v", err)
	})

	t.Run("When the configuration turns bad and good again, it should record Events in the guest", func(t *testing.T) {
		exerciseEvents(t, e)
		log.expectAllowed(t)
	})

	t.Run("When managementState is Removed, it should delete what it created on both clusters", func(t *testing.T) {
		setManagementState(t, e, operatorv1.Removed)
		waitRemoved(t, e, e.MgmtClient, hyperShiftControllerObjects(e.Namespace))
		waitRemoved(t, e, e.GuestClient, guestObjects(t, true))
		log.expectAllowed(t)
	})

	t.Run("When managementState is Managed again, it should reinstall the driver", func(t *testing.T) {
		setManagementState(t, e, operatorv1.Managed)
		waitAvailable(t, e)
		expectExist(t, e.MgmtClient, hyperShiftControllerObjects(e.Namespace))
		expectExist(t, e.GuestClient, guestObjects(t, true))
	})

	t.Run("When the operator stops, no request of it should have been denied", func(t *testing.T) {
		NewWithT(t).Expect(op.Stop()).To(Succeed())
		log.expectAllowed(t, allKeys...)
	})
}

// TestStandaloneInstall applies standalone/operator.yaml to a standalone cluster and runs the
// standalone operator with leader election as the ServiceAccount it binds, through install,
// Events, managementState Removed and back. Any request the RBAC denies fails the test.
func TestStandaloneInstall(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone})
	docs := readManifest(t, standaloneFile, nil)
	id := serviceAccount(names.GuestNamespace, operatorSA(standaloneFile))
	ctx := context.Background()

	t.Run("When the install manifest is applied, it should create every object it holds", func(t *testing.T) {
		// The environment already created the namespace, as a cluster would have it.
		createAll(t, e.MgmtClient, docs)
	})

	t.Run("When the RBAC is in place, every permission it grants should be in effect for the operator's identity", func(t *testing.T) {
		waitRulesInEffect(t, e.MgmtClient, docs, id)
	})

	t.Run("When the operator's identity asks for more than it is granted, it should be forbidden", func(t *testing.T) {
		g := NewWithT(t)
		c := impersonating(t, e.MgmtConfig(), id)
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: names.CredentialsSecret}, &corev1.Secret{})).To(Succeed())
		for what, err := range map[string]error{
			"list its namespace's Secrets":      c.List(ctx, &corev1.SecretList{}, client.InNamespace(names.GuestNamespace)),
			"list Secrets of another namespace": c.List(ctx, &corev1.SecretList{}, client.InNamespace(metav1.NamespaceSystem)),
			"delete a Node":                     c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "any"}}),
			"list every namespace's ConfigMaps": c.List(ctx, &corev1.ConfigMapList{}),
		} {
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
		}
	})

	t.Run("When the operator Deployment is applied, it should roll out on a master", func(t *testing.T) {
		waitDeploymentAvailable(t, e.MgmtClient, names.GuestNamespace, operatorSA(standaloneFile))
	})

	log := &apiLog{}
	ids := map[string]rest.ImpersonationConfig{env.ClusterManagement: id}
	start := time.Now()
	op := e.RunOperatorForTest(t, env.OperatorOptions{LeaderElection: true, WrapConfig: log.wrapConfig(t, ids)})
	key := "standalone@" + env.ClusterManagement

	t.Run("When the operator runs as its ServiceAccount, it should install the driver to Available", func(t *testing.T) {
		waitAvailable(t, e)
		t.Logf("Available %s after the operator started", time.Since(start).Round(100*time.Millisecond))
		expectExist(t, e.MgmtClient, standaloneControllerObjects())
		expectExist(t, e.GuestClient, append(guestObjects(t, false), snapshotClass()))
		log.expectAllowed(t, key)
	})

	t.Run("When leader election is on, the operator should hold its lease", func(t *testing.T) {
		waitLeases(t, e.MgmtClient, names.GuestNamespace, names.LeaderElectionControlPlane)
	})

	t.Run("When the configuration turns bad and good again, it should record Events", func(t *testing.T) {
		exerciseEvents(t, e)
		log.expectAllowed(t)
	})

	t.Run("When the backup class is asked for, it should be created as the operator's ServiceAccount and go when no longer asked for", func(t *testing.T) {
		g := NewWithT(t)
		cm := userConfig(map[string]string{names.KeyBackupSnapshotClass: "true"})
		g.Expect(e.GuestClient.Create(ctx, cm)).To(Succeed())
		backup := &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.BackupSnapshotClass}}
		g.Eventually(func() error { return e.GuestClient.Get(ctx, client.ObjectKeyFromObject(backup), backup) }).
			WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(backup.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
		g.Expect(e.GuestClient.Delete(ctx, cm)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(e.GuestClient.Get(ctx, client.ObjectKeyFromObject(backup), &snapshotv1.VolumeSnapshotClass{}))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(BeTrue())
		log.expectAllowed(t)
	})

	t.Run("When managementState is Removed, it should delete what it created, its RBAC included", func(t *testing.T) {
		setManagementState(t, e, operatorv1.Removed)
		waitRemoved(t, e, e.MgmtClient, append(standaloneControllerObjects(), guestObjects(t, false)...))
		log.expectAllowed(t)
	})

	t.Run("When managementState is Managed again, it should reinstall the driver", func(t *testing.T) {
		setManagementState(t, e, operatorv1.Managed)
		waitAvailable(t, e)
		expectExist(t, e.MgmtClient, append(standaloneControllerObjects(), guestObjects(t, false)...))
	})

	t.Run("When the operator stops, no request of it should have been denied", func(t *testing.T) {
		NewWithT(t).Expect(op.Stop()).To(Succeed())
		log.expectAllowed(t, key)
	})
}

// controllerObjects are the objects the controlplane manager creates next to the controller, and
// removes for managementState Removed.
func controllerObjects(ns string) []client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: meta(names.ControllerDeployment)},
		&corev1.ServiceAccount{ObjectMeta: meta(names.ControllerServiceAccount)},
		&policyv1.PodDisruptionBudget{ObjectMeta: meta(names.ControllerPDB)},
		&corev1.Service{ObjectMeta: meta(names.ControllerMetricsService)},
		&corev1.ConfigMap{ObjectMeta: meta(names.CloudConfConfigMap)},
	}
}

// hyperShiftControllerObjects are the controlplane manager's objects in the HCP namespace.
func hyperShiftControllerObjects(ns string) []client.Object { return controllerObjects(ns) }

// standaloneControllerObjects are the controlplane manager's objects in standalone mode: the
// node copy of cloud-conf, the trusted CA bundle and the ServiceMonitor (the local clusters
// serve its CRD) included.
func standaloneControllerObjects() []client.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: name}
	}
	monitor := &unstructured.Unstructured{}
	monitor.SetAPIVersion("monitoring.coreos.com/v1")
	monitor.SetKind("ServiceMonitor")
	monitor.SetNamespace(names.GuestNamespace)
	monitor.SetName(names.ControllerServiceMonitor)
	return append(controllerObjects(names.GuestNamespace),
		&corev1.ConfigMap{ObjectMeta: meta(nodeconf.StandaloneName)},
		&corev1.ConfigMap{ObjectMeta: meta(names.TrustedCABundleConfigMap)},
		monitor)
}

// guestObjects are the objects in the guest (or the one standalone cluster) that managementState
// Removed deletes: the node DaemonSet, the StorageClass, and the static objects from the operand
// manifests (node ServiceAccount, RBAC, CSIDriver; standalone adds the controller's RBAC). On
// HyperShift the node copy of cloud-conf is added.
func guestObjects(t *testing.T, hyperShift bool) []client.Object {
	t.Helper()
	objs := []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}},
	}
	if hyperShift {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.CloudConfConfigMap}})
	}
	files := []string{"node_sa.yaml", "node_rbac.yaml", "csidriver.yaml"}
	if !hyperShift {
		files = append(files, "controller_rbac.yaml")
	}
	d := manifests.NewDecoder(newScheme(t))
	for _, f := range files {
		o, err := d.Operand(f)
		if err != nil {
			t.Fatalf("decoding operand %s: %v", f, err)
		}
		objs = append(objs, o...)
	}
	return objs
}

// snapshotClass is the VolumeSnapshotClass the guest manager applies once its CRD is served (it
// is on every local cluster). The tests here only check that the install creates it:
// managementState Removed deletes it with the rest of the guest objects (the guest plan's
// everything holds it while its kind is served), but the Removed steps do not wait for it.
func snapshotClass() client.Object {
	return &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.VolumeSnapshotCls}}
}

// waitLeases waits until each named Lease in ns has a holder.
func waitLeases(t *testing.T, c client.Client, ns string, leaseNames ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, n := range leaseNames {
			l := &coordinationv1.Lease{}
			g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, l)).To(Succeed(), n)
			g.Expect(l.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())), n)
		}
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
}

// waitDeploymentAvailable waits until the operator's own Deployment, ns/name, is Available: the
// cluster admitted its pod (priority class, ServiceAccount, placement) and kwok runs it.
func waitDeploymentAvailable(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		dep := &appsv1.Deployment{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, dep)).To(Succeed())
		g.Expect(dep.Status.AvailableReplicas).To(BeNumerically(">=", 1), "available replicas; conditions %v", dep.Status.Conditions)
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
}
