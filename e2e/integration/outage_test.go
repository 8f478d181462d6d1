// API server outages: one of the two API servers stops for a minute while the operator runs,
// shorter than the renew deadline, so no manager loses its leadership. When it is back, the
// operator must see and repair at once what changes there, as it does on the other cluster:
// the informers' watches must not sit out client-go's reflector backoff (up to 30 s, plus as
// much again of jitter) that a minute of failed requests builds up.
package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	// shortOutage is shorter than the renew deadline (107 s): the managers keep leading.
	shortOutage = 60 * time.Second
	// recoveryBound is the longest a repair may take once the API server is ready again. It
	// is a semantic bound, far above the expected second or so on a loaded machine: after a
	// minute of failures the reflector's backoff alone would exceed it.
	recoveryBound = 15 * time.Second
	// recoveryWait is how long a repair is awaited before the test gives up measuring it.
	recoveryWait = 2 * time.Minute
)

// TestAPIServerOutage stops the guest and then the management API server for a minute each,
// starts it again on the same address with the same etcd, and deletes managed objects there
// as soon as it is ready. It does not wait for the driver to be reported Available again: the
// local clusters' controller-manager and kwok recover from an outage with client-go's backoff
// and mark nodes and pods not ready meanwhile, which says nothing about the operator.
func TestAPIServerOutage(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	op := e.RunOperatorForTest(t, env.OperatorOptions{LeaderElection: true})
	waitAvailable(t, e)

	t.Run("When the guest API server is down for a minute, it should recreate the StorageClass and the guest cloud-conf deleted as soon as it is ready again, within seconds", func(t *testing.T) {
		objs := []client.Object{
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeCloudConf(true)}},
		}
		outageAndRepair(t, op, e.Guest, e.GuestClient, shortOutage, objs)
	})

	t.Run("When the management API server is down for a minute, it should recreate the controller's cloud-conf deleted as soon as it is ready again, within seconds", func(t *testing.T) {
		objs := []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CloudConfConfigMap}},
		}
		outageAndRepair(t, op, e.Mgmt, e.MgmtClient, shortOutage, objs)
	})
}

// outageAndRepair stops the API server of cluster for outage, starts it again, deletes objs
// through c the moment it is ready, and checks that every one is recreated within
// recoveryBound.
func outageAndRepair(t *testing.T, op *env.Operator, cluster *localcluster.Cluster, c client.Client, outage time.Duration, objs []client.Object) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(cluster.StopAPIServer()).To(Succeed())
	t.Logf("API server of cluster %s stopped for %s", cluster.Name(), outage)
	// The outage itself is the condition under test, so it is waited out.
	time.Sleep(outage)
	g.Expect(op.Running()).To(BeTrue(), "a manager exited during the outage")
	g.Expect(cluster.StartAPIServer(t.Context())).To(Succeed())
	ready := time.Now()
	for _, o := range objs {
		g.Expect(c.Delete(context.Background(), o)).To(Succeed(), "deleting %T %s", o, client.ObjectKeyFromObject(o))
	}
	took := waitRecreated(t, c, objs, ready)
	for _, o := range objs {
		t.Logf("%T %s recreated %s after the API server of cluster %s was ready again (outage %s)",
			o, client.ObjectKeyFromObject(o), took[o].Round(10*time.Millisecond), cluster.Name(), outage)
	}
	for _, o := range objs {
		g.Expect(took[o]).To(BeNumerically("<", recoveryBound), "%T %s recreated", o, client.ObjectKeyFromObject(o))
	}
}

// waitRecreated polls until every object of objs exists again and returns, for each, how long
// after since it was first seen.
func waitRecreated(t *testing.T, c client.Client, objs []client.Object, since time.Time) map[client.Object]time.Duration {
	t.Helper()
	took := map[client.Object]time.Duration{}
	NewWithT(t).Eventually(func(g Gomega) {
		var missing []string
		for _, o := range objs {
			if _, ok := took[o]; ok {
				continue
			}
			key := client.ObjectKeyFromObject(o)
			if err := c.Get(context.Background(), key, o.DeepCopyObject().(client.Object)); err != nil {
				missing = append(missing, fmt.Sprintf("%T %s: %v", o, key, err))
				continue
			}
			took[o] = time.Since(since)
		}
		g.Expect(missing).To(BeEmpty())
	}).WithTimeout(recoveryWait).WithPolling(50 * time.Millisecond).Should(Succeed())
	return took
}

// longOutage is longer than the renew deadline (107 s): a process whose lease lives on the
// stopped API server loses its leadership and exits.
const longOutage = 150 * time.Second

// TestAPIServerLongOutage stops the management API server, where the lease lives, for longer
// than the renew deadline while the operator runs as the one process of its pod (the install's
// hostedcluster layout). It loses its leadership and exits; like a kubelet, the test starts it
// again as soon as it has ended, while the API server is still down. Once it is ready again, it
// must take its lease back and repair what is deleted on either cluster within seconds, without
// waiting for a lease to expire or for leader election's retry period.
func TestAPIServerLongOutage(t *testing.T) {
	t.Parallel()
	binary := operatorBinary(t)
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	out := operatorLog(t)
	p := startProcesses(t, e, env.ProcessOptions{Binary: binary, Output: out, PodName: leadingPod})
	leadingID := e.Namespace + "/" + leadingPod
	waitAvailable(t, e)
	g := NewWithT(t)
	before := map[string]*coordinationv1.Lease{}
	for m := range oneProcess.leases {
		before[m] = leaseNamed(g, e, oneProcess.leases[m])
	}

	t.Run("When the management API server is down for longer than the renew deadline, it should exit, and once restarted recreate what is deleted on either cluster within seconds of the API server being ready", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(e.Mgmt.StopAPIServer()).To(Succeed())
		stopped := time.Now()
		t.Logf("API server of cluster %s stopped for %s", e.Mgmt.Name(), longOutage)
		// Restart each process as soon as it ends, as a kubelet restarts a container.
		restarts := map[string]int{}
		for time.Since(stopped) < longOutage {
			for m := range oneProcess.leases {
				ended, err := p.Ended(m)
				g.Expect(err).NotTo(HaveOccurred())
				if !ended {
					continue
				}
				if restarts[m] == 0 {
					t.Logf("The %s process ended %s into the outage", m, since(stopped))
				}
				restarts[m]++
				g.Expect(p.Restart(m)).To(Succeed())
			}
			time.Sleep(poll)
		}
		for m := range oneProcess.leases {
			g.Expect(restarts[m]).To(BeNumerically(">", 0), "the %s process lost its lease and exited", m)
		}
		g.Expect(e.Mgmt.StartAPIServer(t.Context())).To(Succeed())
		ready := time.Now()
		objs := map[client.Client][]client.Object{
			e.MgmtClient:  {&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CloudConfConfigMap}}},
			e.GuestClient: {&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}}},
		}
		for c, l := range objs {
			for _, o := range l {
				g.Expect(c.Delete(context.Background(), o)).To(Succeed(), "deleting %T %s", o, client.ObjectKeyFromObject(o))
			}
		}
		for c, l := range objs {
			took := waitRecreated(t, c, l, ready)
			for _, o := range l {
				t.Logf("%T %s recreated %s after the API server of cluster %s was ready again (outage %s)",
					o, client.ObjectKeyFromObject(o), took[o].Round(10*time.Millisecond), e.Mgmt.Name(), longOutage)
				g.Expect(took[o]).To(BeNumerically("<", recoveryBound), "%T %s recreated", o, client.ObjectKeyFromObject(o))
			}
		}
		for m := range oneProcess.leases {
			l := leaseNamed(g, e, oneProcess.leases[m])
			g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(leadingID)), m)
			g.Expect(l.Spec.LeaseTransitions).To(Equal(before[m].Spec.LeaseTransitions), "%s: no leader transition", m)
		}
	})
}
