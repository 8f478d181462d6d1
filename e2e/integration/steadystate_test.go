// Case 6, steady state: once installed and with nothing changing, the operator is silent. Its
// only writes are leader-election lease renewals at OpenShift's pace, its reads come from
// watches, and its reconcilers stay idle. Hundreds of hosted clusters each run both managers
// against one management cluster, so this is the operator's whole load at rest. The operator runs
// as the hostedcluster command runs it: both managers in one process under one lease, so at rest
// it renews one lease, where the split processes renew one each (twice the writes).
package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	// idleWindow is how long the operator is watched at rest.
	idleWindow = 5 * time.Minute
	// settleQuiet is how long neither manager may have written (leases aside) for the install
	// to count as settled: the rollouts' status updates come in bursts seconds apart.
	settleQuiet = 20 * time.Second
	// With a retry period of 26 s a leader renews about 11.5 times in five minutes;
	// controller-runtime's default of 2 s would give about 150.
	minLeaseRenewals, maxLeaseRenewals = 8, 14
	// maxIdleReconciles bounds the reconciles of each controller in the window. None is
	// expected (the controlplane's next topology recheck is ten minutes after the install);
	// the slack allows for an informer relist, which replays every object once.
	maxIdleReconciles = 2
)

// leaderLog is the request log (env.Operator.Requests) of the in-process operator's leader
// election: the one lease of both managers, held under the controlplane's lock name.
const leaderLog = "hostedcluster"

// senders are every request log of the in-process operator on HyperShift: the two reconcilers
// and the leader election.
var senders = []string{"controlplane", "guest", leaderLog}

// TestSteadyState is case 6: with nothing changing for idleWindow, the operator sends no mutating
// request other than the renewals of its one lease, nor a read that is not a watch, and no
// reconcile loop runs; and a reconcile that finds nothing changed sends no write.
func TestSteadyState(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift, Audit: true})
	op := e.RunOperatorForTest(t, env.OperatorOptions{LeaderElection: true})
	managers := []string{"controlplane", "guest"}

	waitAvailable(t, e)
	NewWithT(t).Eventually(func(g Gomega) {
		for _, m := range managers {
			var last time.Time
			for _, r := range op.Requests[m].Since(time.Time{}) {
				if r.Mutating() && !r.Lease() {
					last = r.Time
				}
			}
			g.Expect(last).NotTo(BeZero(), "%s never wrote: the install cannot have happened", m)
			g.Expect(time.Since(last)).To(BeNumerically(">=", settleQuiet), "%s wrote recently", m)
		}
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

	// The reconcile counter must see the install's reconciles, or its zero below means nothing.
	for _, m := range managers {
		NewWithT(t).Expect(op.Reconciles.Count(m)).To(BeNumerically(">", 0), "reconciles of %s counted during the install", m)
	}
	reconcilesBefore := map[string]int{}
	for _, m := range managers {
		reconcilesBefore[m] = op.Reconciles.Count(m)
	}
	globalBefore := reconcileTotals(t)
	start := time.Now()
	t.Logf("Install settled; watching the operator at rest for %s", idleWindow)
	// The test must observe that nothing happens over the whole window, so it waits the
	// window out (reporting progress) rather than polling for a condition.
	for deadline := start.Add(idleWindow); time.Now().Before(deadline); {
		time.Sleep(min(time.Minute, time.Until(deadline)))
		t.Logf("%s of %s at rest", time.Since(start).Round(time.Second), idleWindow)
	}
	end := time.Now()
	globalAfter := reconcileTotals(t)
	window := map[string][]env.Request{}

	for _, m := range senders {
		for _, r := range op.Requests[m].Since(start) {
			if r.Time.Before(end) {
				window[m] = append(window[m], r)
			}
		}
	}

	t.Run("When nothing changes for the idle window, the operator should send no mutating request but its lease renewals", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range senders {
			var writes []string
			for _, r := range window[m] {
				if r.Mutating() && !r.Lease() {
					writes = append(writes, describe(r))
				}
			}
			t.Logf("%s: %d mutating requests (leases aside) in %s", m, len(writes), idleWindow)
			g.Expect(writes).To(BeEmpty(), "mutating requests of %s at rest", m)
		}
	})

	t.Run("When nothing changes for the idle window, the operator should renew its one lease at OpenShift's pace, and neither manager a lease of its own", func(t *testing.T) {
		g := NewWithT(t)
		renewals, other := 0, 0
		for _, r := range window[leaderLog] {
			switch {
			case !r.Lease():
			case r.Method == http.MethodPut && r.Host == hostOf(e.Mgmt.RESTConfig().Host) &&
				strings.HasSuffix(r.Path, "/namespaces/"+e.Namespace+"/leases/"+names.LeaderElectionControlPlane):
				renewals++
			case r.Mutating():
				other++
			}
		}
		t.Logf("operator: %d lease renewals in %s", renewals, idleWindow)
		g.Expect(renewals).To(BeNumerically(">=", minLeaseRenewals), "lease renewals")
		g.Expect(renewals).To(BeNumerically("<=", maxLeaseRenewals), "lease renewals")
		g.Expect(other).To(BeZero(), "lease writes other than renewals of %s/%s", e.Namespace, names.LeaderElectionControlPlane)
		// Split into two processes, each manager renewed a lease of its own: twice the writes.
		for _, m := range managers {
			var leases []string
			for _, r := range window[m] {
				if r.Lease() {
					leases = append(leases, describe(r))
				}
			}
			g.Expect(leases).To(BeEmpty(), "lease requests of the %s manager itself", m)
		}
	})

	t.Run("When nothing changes for the idle window, every read the operator sends should be a watch", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range senders {
			var polls []string
			watches := 0
			for _, r := range window[m] {
				switch {
				case r.Method != http.MethodGet || r.Lease():
				case r.Watch:
					watches++
				default:
					polls = append(polls, describe(r))
				}
			}
			t.Logf("%s: %d watch requests, %d other reads (leases aside) in %s", m, watches, len(polls), idleWindow)
			g.Expect(polls).To(BeEmpty(), "reads of %s that are not watches", m)
		}
	})

	t.Run("When nothing changes for the idle window, the API servers' audit logs should show no write by the operator but lease renewals", func(t *testing.T) {
		g := NewWithT(t)
		writes := map[string][]string{}
		leaseUpdates := 0
		installWrites := map[string]int{}
		for _, path := range []string{e.Mgmt.AuditLogPath(), e.Guest.AuditLogPath()} {
			events, err := localcluster.ReadAuditLog(path)
			g.Expect(err).NotTo(HaveOccurred(), "reading the audit log %s", path)
			for _, ev := range events {
				at := ev.RequestReceivedTimestamp
				if !ev.Mutating() || at.After(end) {
					continue
				}
				ref := ev.ObjectRef
				// client-go's leader election appends "/leader-election" to the configured
				// user agent; what else is written under it is a finding.
				electing := strings.HasSuffix(ev.UserAgent, "/leader-election")
				m := auditSender(ev.UserAgent)
				switch {
				case m == "" && !electing:
					// Not the operator: the clusters' own components and the test.
				case at.Before(start):
					if m != "" && ref.Resource != "leases" {
						installWrites[m]++
					}
				case ref.Resource == "leases" && ref.Namespace == e.Namespace && ref.Name == names.LeaderElectionControlPlane && ev.Verb == "update":
					leaseUpdates++
				case m == "":
					writes["leader election"] = append(writes["leader election"], ev.String())
				default:
					writes[m] = append(writes[m], ev.String())
				}
			}
		}
		for _, m := range senders {
			t.Logf("audit, %s: %d writes during the install, %d writes in %s", m, installWrites[m], len(writes[m]), idleWindow)
			g.Expect(writes[m]).To(BeEmpty(), "writes of %s at rest, seen by the API server", m)
		}
		// The install's writes prove the user agent filter finds each manager's requests.
		for _, m := range managers {
			g.Expect(installWrites[m]).To(BeNumerically(">", 0), "install writes of %s in the audit log", m)
		}
		renewals := 0
		for _, r := range window[leaderLog] {
			if r.Lease() && r.Method == http.MethodPut {
				renewals++
			}
		}
		t.Logf("audit: %d lease updates in %s", leaseUpdates, idleWindow)
		g.Expect(leaseUpdates).To(BeNumerically(">=", minLeaseRenewals), "lease updates seen by the API server")
		g.Expect(leaseUpdates).To(BeNumerically("<=", maxLeaseRenewals), "lease updates seen by the API server")
		// The client records a request just before the server receives it: at the window's
		// edges one renewal may fall on either side.
		g.Expect(leaseUpdates).To(BeNumerically("~", renewals, 1), "lease updates: server and client disagree")
		g.Expect(writes["leader election"]).To(BeEmpty(), "leader-election writes other than the lease renewals")
	})

	t.Run("When nothing changes for the idle window, no reconcile loop should run", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range managers {
			own := op.Reconciles.Count(m) - reconcilesBefore[m]
			global := globalAfter[m] - globalBefore[m]
			// controller_runtime_reconcile_total is process-wide: with parallel tests it also
			// counts the other tests' operators, so it is logged and only bounds this one's.
			t.Logf("%s: %d reconciles in %s (controller_runtime_reconcile_total of the test process: +%.0f)", m, own, idleWindow, global)
			g.Expect(own).To(BeNumerically("<=", maxIdleReconciles), "reconciles of %s at rest", m)
			g.Expect(float64(own)).To(BeNumerically("<=", global), "this operator's reconciles of %s are part of the process's", m)
		}
	})

	t.Run("When a reconcile finds nothing changed, neither manager should send a mutating request", func(t *testing.T) {
		g := NewWithT(t)
		// The idle window may pass without a reconcile; an annotation on the
		// ClusterCSIDriver makes both managers reconcile without changing what they want.
		before := map[string]int{}
		for _, m := range managers {
			before[m] = op.Reconciles.Count(m)
		}
		since := time.Now()
		update(t, e.GuestClient, &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}, "test-user",
			func(d *operatorv1.ClusterCSIDriver) {
				metav1.SetMetaDataAnnotation(&d.ObjectMeta, "example.com/touched", since.Format(time.RFC3339Nano))
			})
		g.Eventually(func(g Gomega) {
			for _, m := range managers {
				g.Expect(op.Reconciles.Count(m)).To(BeNumerically(">", before[m]), "reconciles of %s", m)
			}
		}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
		for _, m := range managers {
			var writes []string
			for _, r := range op.Requests[m].Since(since) {
				if r.Mutating() && !r.Lease() {
					writes = append(writes, describe(r))
				}
			}
			t.Logf("%s: %d reconciles, %d mutating requests (leases aside)", m, op.Reconciles.Count(m)-before[m], len(writes))
			g.Expect(writes).To(BeEmpty(), "mutating requests of %s after a reconcile that found nothing changed", m)
		}
	})
}

// reconcileTotals returns controller-runtime's controller_runtime_reconcile_total per controller
// name, summed over results, from the process-wide metrics registry.
func reconcileTotals(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// auditSender returns the request log an audit event's user agent names ("controlplane",
// "guest", "hostedcluster"), or "" when the request is not the operator's.
func auditSender(userAgent string) string {
	for _, m := range senders {
		if strings.HasPrefix(userAgent, "cinder-csi-operator-"+m) {
			return m
		}
	}
	return ""
}

// hostOf returns the host:port of an API server URL, as env.Request records it.
func hostOf(server string) string {
	server = strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	host, _, _ := strings.Cut(server, "/")
	return host
}

// describe formats a recorded request for failure messages.
func describe(r env.Request) string {
	s := r.Method + " " + r.Host + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return r.Time.Format("15:04:05.000") + " " + s
}
