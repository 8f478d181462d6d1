// Leader election across restarts: the operator runs as processes of the built binary, as in a
// pod, with POD_NAME from the downward API: the one hostedcluster process of the install
// manifests, and the split deployment's controlplane and guest processes. A container the
// kubelet restarts after a crash (SIGKILL, no shutdown code) must take its own lease back at once
// rather than wait out the 137 s lease of its previous run; a container stopped with SIGTERM must
// release its leases so that a standby pod takes over within a retry period.
package integration

import (
	"context"
	"flag"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

var operatorBinaryFlag = flag.String("operator", "",
	"cinder-csi-operator binary the process tests run; empty builds it into the test's temporary directory")

// Two operator pods of one Deployment: the one that leads, and the standby of a second replica
// or of a rollout.
const (
	leadingPod = "cinder-csi-operator-6f7d9c5b8-k2x4p"
	standbyPod = "cinder-csi-operator-6f7d9c5b8-r7m9w"
)

// leaderLayout is how the HyperShift managers run as processes, and which lease each holds.
type leaderLayout struct {
	// split runs the controlplane and guest processes instead of the one hostedcluster process.
	split bool
	// leases are the leader-election Leases, by the process that holds them.
	leases map[string]string
	// controlplane and guest name the process that runs each manager.
	controlplane, guest string
}

// The layouts: the hostedcluster process of the install manifests, one lease for both managers;
// and a split deployment, one process and one lease per manager.
var (
	oneProcess = leaderLayout{
		leases:       map[string]string{"hostedcluster": names.LeaderElectionControlPlane},
		controlplane: "hostedcluster", guest: "hostedcluster",
	}
	splitProcesses = leaderLayout{
		split:        true,
		leases:       map[string]string{"controlplane": names.LeaderElectionControlPlane, "guest": names.LeaderElectionGuest},
		controlplane: "controlplane", guest: "guest",
	}
)

// TestLeaderElection runs the HyperShift operator as the one hostedcluster process with a pod
// name, kills and restarts it, and hands its lease over to a standby pod.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	testLeaderElection(t, oneProcess)
}

// TestLeaderElectionSplit does the same with the split deployment's two processes, each killed
// and restarted on its own, each with its own lease.
func TestLeaderElectionSplit(t *testing.T) {
	t.Parallel()
	testLeaderElection(t, splitProcesses)
}

func testLeaderElection(t *testing.T, layout leaderLayout) {
	binary := operatorBinary(t)
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	out := operatorLog(t)
	leading := startProcesses(t, e, env.ProcessOptions{Binary: binary, Output: out, PodName: leadingPod, Split: layout.split})
	leadingID := e.Namespace + "/" + leadingPod
	cp, guest := layout.controlplane, layout.guest
	lease := func(g Gomega, process string) *coordinationv1.Lease {
		return leaseNamed(g, e, layout.leases[process])
	}

	t.Run("When the process of the controlplane manager is killed with SIGKILL during the install and started again with the same POD_NAME, it should take its lease back and finish the install", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			g.Expect(lease(g, cp).Spec.HolderIdentity).To(HaveValue(Equal(leadingID)))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		before, restarted := killAndRestart(t, leading, lease, cp, func() {})
		expiry := leaseExpiry(before)
		waitUntil(t, expiry, func(g Gomega) {
			expectTakenBack(g, lease(g, cp), before, leadingID, restarted)
			expectAvailable(g, e)
		})
		t.Logf("%s killed during the install: lease taken back and driver Available %s after the restart (the old lease would have expired %s after it)",
			cp, since(restarted), expiry.Sub(restarted).Round(time.Second))
		waitAvailable(t, e)
	})

	t.Run("When the operator leads, it should hold its leases under its pod's namespace and name", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			for p := range layout.leases {
				l := lease(g, p)
				g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(leadingID)), p)
				g.Expect(l.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(clusters.LeaseDuration/time.Second)), p)
			}
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		if !layout.split {
			// One process, one lease: the guest manager holds none of its own.
			err := e.MgmtClient.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: names.LeaderElectionGuest}, &coordinationv1.Lease{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the split layout's guest lease: %v", err)
		}
	})

	// killDeleteRecreate kills process, deletes obj through c while it is down, restarts it, and
	// requires the lease taken back, obj recreated and the driver Available before the old lease
	// would have expired.
	killDeleteRecreate := func(t *testing.T, process string, c client.Client, obj client.Object) {
		waitAvailable(t, e)
		before, restarted := killAndRestart(t, leading, lease, process, func() {
			NewWithT(t).Expect(c.Delete(context.Background(), obj)).To(Succeed())
		})
		expiry := leaseExpiry(before)
		waitUntil(t, expiry, func(g Gomega) {
			expectTakenBack(g, lease(g, process), before, leadingID, restarted)
			g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))).To(Succeed())
			expectAvailable(g, e)
		})
		t.Logf("%s killed: lease taken back, %T recreated and driver Available %s after the restart (the old lease would have expired %s after it)",
			process, obj, since(restarted), expiry.Sub(restarted).Round(time.Second))
	}

	t.Run("When the process of the controlplane manager is killed with SIGKILL and started again with the same POD_NAME, it should recreate an object deleted meanwhile before its old lease would have expired", func(t *testing.T) {
		killDeleteRecreate(t, cp, e.MgmtClient, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerPDB}})
	})

	t.Run("When the process of the guest manager is killed with SIGKILL and started again with the same POD_NAME, it should recreate the StorageClass deleted meanwhile before its old lease would have expired", func(t *testing.T) {
		killDeleteRecreate(t, guest, e.GuestClient, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}})
	})

	t.Run("When the leading pod is stopped with SIGTERM, it should release its leases and a standby pod should take them over at its next retry, long before they would have expired", func(t *testing.T) {
		g := NewWithT(t)
		waitAvailable(t, e)
		standby := startProcesses(t, e, env.ProcessOptions{Binary: binary, Output: out, PodName: standbyPod, Split: layout.split})
		standbyID := e.Namespace + "/" + standbyPod
		// The standby is up (its caches synced) and retrying for the leases the leader holds.
		g.Eventually(func(g Gomega) {
			for p := range layout.leases {
				expectReady(g, standby.HealthAddrs[p])
			}
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		for p := range layout.leases {
			g.Expect(lease(g, p).Spec.HolderIdentity).To(HaveValue(Equal(leadingID)), p)
		}

		released := map[string]time.Time{}
		before := map[string]*coordinationv1.Lease{}
		var deadline time.Time
		for p := range layout.leases {
			before[p] = lease(g, p)
			if d := leaseExpiry(before[p]); deadline.IsZero() || d.Before(deadline) {
				deadline = d
			}
			g.Expect(leading.Terminate(p)).To(Succeed(), p)
			released[p] = time.Now()
			// client-go releases a lease by clearing its holder and shortening it to one
			// second; the standby may already have taken it by the time it is read.
			l := lease(g, p)
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != standbyID {
				g.Expect(h).To(BeEmpty(), "%s lease holder after SIGTERM", p)
				g.Expect(l.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(1)), "%s lease duration after SIGTERM", p)
			}
			t.Logf("%s: SIGTERM released the lease (holder %q, duration %ds)", p, ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseDurationSeconds, 0))
		}

		took := map[string]time.Duration{}
		waitUntil(t, deadline, func(g Gomega) {
			for p := range layout.leases {
				if _, ok := took[p]; ok {
					continue
				}
				l := lease(g, p)
				g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(standbyID)), p)
				took[p] = time.Since(released[p])
			}
		})
		for p, d := range took {
			t.Logf("%s: the standby took the lease over %s after the leader released it (retry period %s, lease %s)",
				p, d.Round(100*time.Millisecond), clusters.RetryPeriod, clusters.LeaseDuration)
		}

		// The standby now reconciles: it recreates what is deleted on either side.
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerPDB}}
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}}
		g.Expect(e.MgmtClient.Delete(context.Background(), pdb)).To(Succeed())
		g.Expect(e.GuestClient.Delete(context.Background(), sc)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(e.MgmtClient.Get(context.Background(), client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{})).To(Succeed())
			g.Expect(e.GuestClient.Get(context.Background(), client.ObjectKeyFromObject(sc), &storagev1.StorageClass{})).To(Succeed())
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
	})
}

// operatorBinary returns the -operator binary, or builds one.
func operatorBinary(t *testing.T) string {
	t.Helper()
	if *operatorBinaryFlag != "" {
		abs, err := filepath.Abs(*operatorBinaryFlag)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return env.BuildOperatorForTest(t)
}

// startProcesses starts the operator processes for the rest of the test.
func startProcesses(t *testing.T, e *env.Env, o env.ProcessOptions) *env.Processes {
	t.Helper()
	p, err := e.StartOperatorProcesses(o)
	if err != nil {
		t.Fatalf("starting the operator processes: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the operator processes: %v", err)
		}
	})
	return p
}

// killAndRestart kills the process with SIGKILL once it holds its lease, runs whileDown, and
// starts it again with the same environment. It returns the lease as it was at the kill and the
// time of the restart.
func killAndRestart(t *testing.T, p *env.Processes, lease func(Gomega, string) *coordinationv1.Lease, process string, whileDown func()) (*coordinationv1.Lease, time.Time) {
	t.Helper()
	g := NewWithT(t)
	before := lease(g, process)
	g.Expect(p.Kill(process)).To(Succeed())
	whileDown()
	restarted := time.Now()
	g.Expect(p.Restart(process)).To(Succeed())
	return before, restarted
}

// leaseNamed reads a leader-election Lease in the operator's namespace on the management cluster.
func leaseNamed(g Gomega, e *env.Env, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(e.MgmtClient.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: name}, l)).To(Succeed())
	return l
}

// leaseExpiry is when a lease runs out if nobody renews it.
func leaseExpiry(l *coordinationv1.Lease) time.Time {
	return l.Spec.RenewTime.Add(time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second)
}

// expectTakenBack checks that the restarted process renewed its lease l under the same identity,
// without a leader transition: it recognised the lease as its own.
func expectTakenBack(g Gomega, l *coordinationv1.Lease, before *coordinationv1.Lease, identity string, restarted time.Time) {
	g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(identity)))
	g.Expect(l.Spec.RenewTime).NotTo(BeNil())
	g.Expect(l.Spec.RenewTime.Time).To(BeTemporally(">=", restarted.Truncate(time.Second)), "renewed since the restart")
	g.Expect(l.Spec.LeaseTransitions).To(Equal(before.Spec.LeaseTransitions), "no leader transition")
}

// expectAvailable checks the ClusterCSIDriver's Available conditions.
func expectAvailable(g Gomega, e *env.Env) {
	d := driver(g, e)
	for _, c := range []string{names.ConditionControllerAvailable, names.ConditionNodeAvailable} {
		g.Expect(env.ConditionTrue(d.Status.Conditions, c)).To(BeTrue(), c)
	}
}

// expectReady checks a manager's /readyz.
func expectReady(g Gomega, addr string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

// waitUntil polls check until it passes, failing the test if that is not before deadline: an
// outer bound that tells a lease taken back or handed over from one waited out, not a timing
// expectation.
func waitUntil(t *testing.T, deadline time.Time, check func(Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(check).WithTimeout(time.Until(deadline)).WithPolling(poll).Should(Succeed())
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
