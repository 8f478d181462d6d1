// API server outages: one of the two API servers stops for a minute while the operator runs,
// shorter than the renew deadline, so no manager loses its leadership while the API server
// returns in time (see TestAPIServerOutage for one that does not). When it is back, the
// operator must see and repair at once what changes there, as it does on the other cluster:
// the informers' watches must not sit out client-go's reflector backoff (up to 30 s, plus as
// much again of jitter) that a minute of failed requests builds up.
package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

const (
	// shortOutage is shorter than the renew deadline (107 s): the managers keep leading if the
	// API server is ready again within leaseKeptFor of its stop.
	shortOutage = 60 * time.Second
	// recoveryBound is the longest a repair may take once the API server is ready again (and
	// the deletion done, and a restarted operator running). It
	// is a semantic bound, far above the expected second or so on a loaded machine: after a
	// minute of failures the reflector's backoff alone would exceed it.
	recoveryBound = 15 * time.Second
	// recoveryWait is how long a repair is awaited before the test gives up measuring it.
	recoveryWait = 2 * time.Minute
)

// TestAPIServerOutage stops the guest and then the management API server for a minute each while
// the operator runs as the one process of its pod (the install's hostedcluster layout), starts it
// again on the same address with the same etcd, and deletes managed objects there as soon as it
// is ready. It does not wait for the driver to be reported Available again: the local clusters'
// controller-manager and kwok recover from an outage with client-go's backoff and mark nodes and
// pods not ready meanwhile, which says nothing about the operator.
//
// A minute is shorter than the renew deadline, but the management API server is unavailable from
// its stop until it is ready again, and on a slow or busy machine its start alone can take more
// than a minute. When that outlasts what the lease allows (leaseKeptFor), losing the lease and
// exiting is the operator's contract: the test then restarts it as its pod's kubelet would and
// times the repair from the later of the API server's return and that restart. Shorter, the
// process must not have ended.
func TestAPIServerOutage(t *testing.T) {
	t.Parallel()
	binary := operatorBinary(t)
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	p := startProcesses(t, e, env.ProcessOptions{Binary: binary, Output: operatorLog(t), PodName: leadingPod})
	k := startKubelet(t, p, oneProcess)
	waitAvailable(t, e)

	t.Run("When the guest API server is down for a minute, it should recreate the StorageClass and the guest cloud-conf deleted as soon as it is ready again, within seconds", func(t *testing.T) {
		objs := []client.Object{
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: nodeconf.Name(true)}},
		}
		// The lease lives on the management cluster: however long the guest is away, no
		// manager may end.
		outageAndRepair(t, k, e.Guest, e.GuestClient, shortOutage, objs, false)
	})

	t.Run("When the management API server is down for a minute, it should recreate the controller's cloud-conf deleted as soon as it is ready again, within seconds", func(t *testing.T) {
		objs := []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CloudConfConfigMap}},
		}
		outageAndRepair(t, k, e.Mgmt, e.MgmtClient, shortOutage, objs, true)
	})
}

// leaseKeptFor is the longest the management API server may be unavailable with the lease kept
// for certain: the leader renews every retry period, and once a renewal fails it keeps trying
// until the renew deadline, counted from its last success, at most a retry period before the
// outage began.
const leaseKeptFor = clusters.RenewDeadline - clusters.RetryPeriod

// outageAndRepair stops the API server of cluster for outage, starts it again, deletes objs
// through c the moment it is ready, and checks that every one is recreated within
// recoveryBound of the API server being ready, or of the operator's restart by k when the lease
// lives there (leaseHere) and the API server was away long enough to lose it.
func outageAndRepair(t *testing.T, k *kubelet, cluster *localcluster.Cluster, c client.Client, outage time.Duration, objs []client.Object, leaseHere bool) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(cluster.StopAPIServer()).To(Succeed())
	stopped := time.Now()
	t.Logf("API server of cluster %s stopped for %s", cluster.Name(), outage)
	// The outage itself is the condition under test, so it is waited out.
	time.Sleep(outage)
	g.Expect(cluster.StartAPIServer(t.Context())).To(Succeed())
	ready := time.Now()
	away := ready.Sub(stopped)
	deleted := deleteAll(t, c, objs)
	// The repair is timed from the API server's return, or from the restart of a process that
	// lost its lease meanwhile, which the kubelet does as soon as it ends, and never from before
	// the deletion.
	from := later(ready, deleted)
	restarts := k.restartsSince(stopped)
	switch {
	case len(restarts) == 0:
		t.Logf("API server of cluster %s away for %s (stop to ready); the operator kept running", cluster.Name(), away.Round(100*time.Millisecond))
	case leaseHere && away >= leaseKeptFor:
		from = later(ready, restarts[len(restarts)-1])
		t.Logf("API server of cluster %s away for %s (stop to ready), at least %s: the operator lost its lease, exited and was restarted %d times, the last %s after the API server was ready",
			cluster.Name(), away.Round(100*time.Millisecond), leaseKeptFor, len(restarts), restarts[len(restarts)-1].Sub(ready).Round(100*time.Millisecond))
	default:
		t.Fatalf("the operator ended %d times while the API server of cluster %s was away for %s, which %s",
			len(restarts), cluster.Name(), away.Round(100*time.Millisecond), map[bool]string{
				true:  "is shorter than the lease allows (" + leaseKeptFor.String() + ")",
				false: "holds no lease",
			}[leaseHere])
	}
	took := waitRecreated(t, c, objs, from)
	for _, o := range objs {
		t.Logf("%T %s recreated %s after the API server of cluster %s was ready again or the operator restarted (outage %s)",
			o, client.ObjectKeyFromObject(o), took[o].Round(10*time.Millisecond), cluster.Name(), outage)
	}
	for _, o := range objs {
		g.Expect(took[o]).To(BeNumerically("<", recoveryBound), "%T %s recreated", o, client.ObjectKeyFromObject(o))
	}
}

// deleteAll deletes objs through c and returns when it is done. A request that fails on the way
// (a TLS handshake that times out while a restarted API server is still slow to answer) is the
// test's own and is sent again, for deleteWait at most.
func deleteAll(t *testing.T, c client.Client, objs []client.Object) time.Time {
	t.Helper()
	for _, o := range objs {
		NewWithT(t).Eventually(func() error {
			return client.IgnoreNotFound(c.Delete(context.Background(), o))
		}).WithTimeout(deleteWait).WithPolling(poll).Should(Succeed(), "deleting %T %s", o, client.ObjectKeyFromObject(o))
	}
	return time.Now()
}

// deleteWait bounds deleteAll: a hang guard, stretched on a slow machine.
var deleteWait = machine.Scale(30 * time.Second)

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// kubelet restarts the operator's processes as soon as one ends, as the kubelet restarts a
// container of a running pod, and records when.
type kubelet struct {
	mu       sync.Mutex
	restarts map[string][]time.Time
}

// startKubelet watches the processes of layout for the rest of the test.
func startKubelet(t *testing.T, p *env.Processes, layout leaderLayout) *kubelet {
	t.Helper()
	k := &kubelet{restarts: map[string][]time.Time{}}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(poll):
			}
			for m := range layout.leases {
				if ended, err := p.Ended(m); err != nil || !ended {
					continue
				}
				if err := p.Restart(m); err != nil {
					t.Errorf("restarting the %s process: %v", m, err)
					continue
				}
				k.mu.Lock()
				k.restarts[m] = append(k.restarts[m], time.Now())
				k.mu.Unlock()
				t.Logf("The %s process ended; restarted it", m)
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
	return k
}

// restartsSince returns the restarts of every process since t, in order.
func (k *kubelet) restartsSince(t time.Time) []time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []time.Time
	for _, l := range k.restarts {
		for _, r := range l {
			if !r.Before(t) {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// restartCount returns how often process m was restarted.
func (k *kubelet) restartCount(m string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.restarts[m])
}

// waitRecreated polls until every object of objs exists again and returns, for each, how long
// after since it was first seen. since is when the repair could begin: the API server back, the
// deletion done, the operator running.
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
	p := startProcesses(t, e, env.ProcessOptions{Binary: binary, Output: operatorLog(t), PodName: leadingPod})
	k := startKubelet(t, p, oneProcess)
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
		// The outage itself is the condition under test, so it is waited out; the kubelet
		// restarts each process as soon as it ends meanwhile.
		time.Sleep(longOutage)
		for m := range oneProcess.leases {
			g.Expect(k.restartCount(m)).To(BeNumerically(">", 0), "the %s process lost its lease and exited", m)
		}
		g.Expect(e.Mgmt.StartAPIServer(t.Context())).To(Succeed())
		ready := time.Now()
		objs := map[client.Client][]client.Object{
			e.MgmtClient:  {&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CloudConfConfigMap}}},
			e.GuestClient: {&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}}},
		}
		deleted := ready
		for c, l := range objs {
			deleted = later(deleted, deleteAll(t, c, l))
		}
		if restarts := k.restartsSince(stopped); len(restarts) > 0 {
			t.Logf("The operator was restarted %d times, first %s into the outage", len(restarts), restarts[0].Sub(stopped).Round(100*time.Millisecond))
		}
		for c, l := range objs {
			took := waitRecreated(t, c, l, deleted)
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
