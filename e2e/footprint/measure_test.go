//go:build e2e

package footprint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	// process is the one operator process of a hosted cluster, as the install runs it.
	process = "hostedcluster"
	// podName is the operator's POD_NAME, as the downward API passes it in the install.
	podName = "cinder-csi-operator-7d9c5b6f4-footprint"
	// settleQuiet is how long the operator must not have written (leases aside) for the
	// install to count as settled: the rollouts' status updates come in bursts seconds apart.
	settleQuiet = 20 * time.Second
	// sampleEvery is how often the resident memory is sampled (and the audit logs read) in
	// the window.
	sampleEvery = 10 * time.Second
	// installTimeout bounds the wait for Available (and, on a large guest, for the node
	// DaemonSet on every node); settleTimeout the wait for the quiet after it. Both are
	// generous: a slow machine makes the figures later, not different.
	installTimeout = 10 * time.Minute
	settleTimeout  = 5 * time.Minute
	poll           = 500 * time.Millisecond
)

// run is one scenario's environment with the operator running against it.
type run struct {
	b     *testing.B
	e     *env.Env
	procs *env.Processes
	pid   int
	// requests follows the operator's requests in both audit logs.
	requests *requests
	// started is when the operator process was started.
	started time.Time
}

// measure starts the scenario's environment and the operator, waits for the install to settle,
// watches the operator for the window and returns what it measured.
func measure(b *testing.B, s scenario, operator string) *result {
	r := &result{name: s.name, about: s.about}
	begin := time.Now()
	e := env.StartForTest(b, s.options)
	r.envUp = time.Since(begin)
	dumpClusterLogsOnFailure(b, e)
	r.settings = settings(b, e)
	if s.prepare != nil {
		begin := time.Now()
		r.prepared = s.prepare(b, e)
		r.prepare = time.Since(begin)
	}

	nodeNames := clusterNodeNames(b, e)
	reqs := newRequests(b, e, nodeNames)
	// The logs so far hold the environment's start and the preparation; reading them now keeps
	// the first read during the install short.
	if err := reqs.poll(); err != nil {
		b.Fatalf("reading the audit logs: %v", err)
	}
	x := startOperator(b, e, operator, reqs)
	r.operator = fmt.Sprintf("%s, one %s process (POD_NAME %s, POD_NAMESPACE %s), pid %d", operator, process, podName, e.Namespace, x.pid)

	// The first scrape is taken as soon as /metrics answers, before the managers have settled;
	// it may already count the first reconciles.
	r.reconcilesStart, r.firstScrape = x.firstScrape()
	x.waitInstalled(s.allNodes, s.installed)
	r.available = time.Since(x.started)
	r.daemonSet = x.daemonSetSummary()
	x.waitSettled()
	r.settled = time.Since(x.started)
	r.reconcilesSettled = x.scrape()

	x.watch(r)
	r.reconcilesEnd = x.scrape()
	r.perNode = x.requests.perNode(x.started, r.windowEnd)
	r.claimsInstall = x.requests.claims(x.started, r.windowStart)
	r.claimsWindow = x.requests.claims(r.windowStart, r.windowEnd)
	return r
}

// dumpClusterLogsOnFailure prints, when the benchmark fails, the end of the logs of the
// components that roll out the operator's workloads, before the environment (and its temporary
// directory) is stopped.
func dumpClusterLogsOnFailure(b *testing.B, e *env.Env) {
	b.Cleanup(func() {
		if !b.Failed() {
			return
		}
		for _, c := range []*localcluster.Cluster{e.Mgmt, e.Guest} {
			for _, component := range []string{"kube-controller-manager", "kwok"} {
				path := filepath.Join(c.Dir(), "logs", component+".log")
				if data, err := os.ReadFile(path); err == nil {
					b.Logf("--- %s (end) ---\n%s", path, tail(data, 3000))
				}
			}
		}
	})
}

// settings describes the environment for the summary.
func settings(b *testing.B, e *env.Env) string {
	b.Helper()
	count := func(c client.Client) (masters, workers int) {
		l := &corev1.NodeList{}
		if err := c.List(context.Background(), l); err != nil {
			b.Fatalf("listing nodes: %v", err)
		}
		for _, n := range l.Items {
			if _, ok := n.Labels[localcluster.MasterRoleLabel]; ok {
				masters++
			} else {
				workers++
			}
		}
		return masters, workers
	}
	mm, mw := count(e.MgmtClient)
	gm, gw := count(e.GuestClient)
	return fmt.Sprintf("HyperShift, HCP namespace %s; management cluster: %d nodes, guest: %d nodes (masters %d, workers %d); simulated nodes (kwok); audit logs on; window %s",
		e.Namespace, mm+mw, gm+gw, gm, gw, *window)
}

// clusterNodeNames returns the names of both clusters' nodes: a request naming one is a
// per-node request.
func clusterNodeNames(b *testing.B, e *env.Env) map[string]bool {
	b.Helper()
	out := map[string]bool{}
	for _, c := range []client.Client{e.MgmtClient, e.GuestClient} {
		l := &corev1.NodeList{}
		if err := c.List(context.Background(), l); err != nil {
			b.Fatalf("listing nodes: %v", err)
		}
		for _, n := range l.Items {
			out[n.Name] = true
		}
	}
	return out
}

// startOperator runs the operator binary as the install runs it and stops it when the
// benchmark ends, printing the end of its log if the benchmark failed.
func startOperator(b *testing.B, e *env.Env, operator string, reqs *requests) *run {
	b.Helper()
	logPath := e.Path("operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	procs, err := e.StartOperatorProcesses(env.ProcessOptions{Binary: operator, Output: logFile, PodName: podName})
	if err != nil {
		b.Fatalf("starting the operator: %v", err)
	}
	b.Cleanup(func() {
		if err := procs.Stop(); err != nil {
			b.Errorf("stopping the operator: %v", err)
		}
		_ = logFile.Close()
		if b.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				b.Logf("--- operator log (end) ---\n%s", tail(data, 6000))
			}
		}
	})
	var pid int
	for _, p := range procs.Pids() {
		if p.Name == process {
			pid = p.Pid
		}
	}
	if pid == 0 {
		b.Fatalf("no %s process among %v", process, procs.Pids())
	}
	return &run{b: b, e: e, procs: procs, pid: pid, requests: reqs, started: started}
}

// alive returns an error when the operator process has ended.
func (x *run) alive() error {
	ended, err := x.procs.Ended(process)
	if err != nil || !ended {
		return err
	}
	select {
	case err := <-x.procs.Exited():
		return err
	default:
		return fmt.Errorf("the %s process exited", process)
	}
}

// eventually is gomega's Eventually for the benchmark, which stops at once when the operator
// has exited.
func (x *run) eventually(what string, timeout time.Duration, check func(g Gomega)) {
	x.b.Helper()
	begin := time.Now()
	NewWithT(x.b).Eventually(func(g Gomega) {
		if err := x.alive(); err != nil {
			StopTrying("the operator is gone").Wrap(err).Now()
		}
		check(g)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), what)
	x.b.Logf("%s after %s", what, time.Since(begin).Round(100*time.Millisecond))
}

// waitInstalled waits until the driver is Available and not Progressing on both sides, the
// node DaemonSet is rolled out on every node it schedules to, at least allNodes of them, and the
// driver is as installed expects, when set. Every failure names the DaemonSet's status and the
// failing condition, so that a timeout says whether the rollout or the operator's report of it
// was missing.
func (x *run) waitInstalled(allNodes int, installed func(g Gomega, d *operatorv1.ClusterCSIDriver)) {
	x.eventually("driver Available, node DaemonSet rolled out", installTimeout, func(g Gomega) {
		ds := x.daemonSet(g)
		st := ds.Status
		rollout := fmt.Sprintf("node DaemonSet generation %d, observed %d: %d desired, %d updated, %d available",
			ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberAvailable)
		d := &operatorv1.ClusterCSIDriver{}
		g.Expect(x.e.GuestClient.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d)).To(Succeed())
		expect := func(c string, want bool) {
			got := conditions.Find(d.Status.Conditions, c)
			if got == nil {
				got = &operatorv1.OperatorCondition{Type: c}
			}
			g.Expect(got.Status == operatorv1.ConditionTrue).To(Equal(want), "%s is %q (%s: %s); %s", c, got.Status, got.Reason, got.Message, rollout)
		}
		expect(names.ConditionControllerAvailable, true)
		expect(names.ConditionNodeAvailable, true)
		expect(names.ConditionControllerProgressing, false)
		expect(names.ConditionNodeProgressing, false)
		g.Expect(st.ObservedGeneration).To(Equal(ds.Generation), rollout)
		g.Expect(st.DesiredNumberScheduled).To(BeNumerically(">=", max(allNodes, 1)), rollout)
		g.Expect(st.UpdatedNumberScheduled).To(Equal(st.DesiredNumberScheduled), rollout)
		g.Expect(st.NumberAvailable).To(Equal(st.DesiredNumberScheduled), rollout)
		if installed != nil {
			installed(g, d)
		}
	})
}

// daemonSet reads the node DaemonSet.
func (x *run) daemonSet(g Gomega) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{}
	g.Expect(x.e.GuestClient.Get(context.Background(), client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, ds)).To(Succeed())
	return ds
}

// daemonSetSummary says how far the node DaemonSet is rolled out and how many of its pods kwok
// reports Running.
func (x *run) daemonSetSummary() string {
	g := NewWithT(x.b)
	ds := x.daemonSet(g)
	pods := &corev1.PodList{}
	g.Expect(x.e.GuestClient.List(context.Background(), pods, client.InNamespace(names.GuestNamespace),
		client.MatchingLabels(ds.Spec.Selector.MatchLabels))).To(Succeed())
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	st := ds.Status
	return fmt.Sprintf("%d desired, %d available, %d updated; %d pods Running", st.DesiredNumberScheduled, st.NumberAvailable, st.UpdatedNumberScheduled, running)
}

// waitSettled waits until the operator has not written, leases aside, for settleQuiet.
func (x *run) waitSettled() {
	x.eventually(fmt.Sprintf("no write by the operator (leases aside) for %s", settleQuiet), settleTimeout, func(g Gomega) {
		g.Expect(x.requests.poll()).To(Succeed(), "reading the audit logs")
		last := x.requests.lastWrite()
		g.Expect(last).NotTo(BeZero(), "the operator never wrote: the install cannot have happened")
		g.Expect(time.Since(last)).To(BeNumerically(">=", settleQuiet), "last write at %s", last.Format("15:04:05.000"))
	})
}

// firstScrape scrapes /metrics as soon as it answers, and says when that was.
func (x *run) firstScrape() (map[string]float64, time.Duration) {
	deadline := time.Now().Add(time.Minute)
	for {
		if err := x.alive(); err != nil {
			x.b.Fatalf("the operator exited at its start: %v", err)
		}
		out, err := reconcileTotals(x.procs, process)
		if err == nil {
			return out, time.Since(x.started)
		}
		if time.Now().After(deadline) {
			x.b.Fatalf("the operator's /metrics did not answer within a minute: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape returns the reconcile counters now.
func (x *run) scrape() map[string]float64 {
	out, err := reconcileTotals(x.procs, process)
	if err != nil {
		x.b.Fatalf("scraping the operator's metrics: %v", err)
	}
	return out
}

// watch watches the operator at rest for the window: its memory every sampleEvery, and, at the
// end, its requests in the window.
func (x *run) watch(r *result) {
	b := x.b
	b.Logf("Install settled %s after the operator's start; watching it at rest for %s", time.Since(x.started).Round(time.Second), *window)
	start := time.Now()
	deadline := start.Add(*window)
	lastLog := start
	for {
		if err := x.alive(); err != nil {
			b.Fatalf("the operator exited in the window: %v", err)
		}
		rss, hwm, err := readMemory(x.pid)
		if err != nil {
			b.Fatalf("reading the operator's memory: %v", err)
		}
		r.rssSamples = append(r.rssSamples, rss)
		r.hwm = hwm
		// Reading the logs as they grow follows a rotation (see localcluster.AuditLog).
		if err := x.requests.poll(); err != nil {
			b.Fatalf("reading the audit logs: %v", err)
		}
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		if now.Sub(lastLog) >= time.Minute {
			b.Logf("%s of %s at rest, RSS %s", now.Sub(start).Round(time.Second), *window, mib(rss))
			lastLog = now
		}
		time.Sleep(min(sampleEvery, time.Until(deadline)))
	}
	end := time.Now()
	// A request received just before the end is logged when it completes, a moment later.
	time.Sleep(2 * time.Second)
	if err := x.requests.poll(); err != nil {
		b.Fatalf("reading the audit logs: %v", err)
	}
	r.windowStart, r.windowEnd = start, end
	r.leaseWrites, r.other = x.requests.inWindow(start, end)
	r.install = x.requests.between(x.started, start)
	// The leader renews its lease every RetryPeriod whatever else it does: a window that long
	// without a renewal in the audit log means the requests were not found, not that there were
	// none.
	if len(r.leaseWrites) == 0 && end.Sub(start) >= 2*clusters.RetryPeriod {
		b.Fatalf("no update of the lease %s/%s in the management audit log in %s: the operator's requests cannot be told apart",
			x.e.Namespace, names.LeaderElectionControlPlane, end.Sub(start).Round(time.Second))
	}
	r.daemonSetStatusInstall = x.requests.daemonSetStatusWrites(x.started, start)
	r.daemonSetStatusWindow = x.requests.daemonSetStatusWrites(start, end)
}

// readMemory returns the process's resident set (VmRSS) and its peak (VmHWM), in KiB.
func readMemory(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	got := map[string]int64{}
	for line := range strings.Lines(string(data)) {
		key, value, _ := strings.Cut(line, ":")
		if key != "VmRSS" && key != "VmHWM" {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s of /proc/%d/status: %w", key, pid, err)
		}
		got[key] = kib
	}
	if len(got) != 2 {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return got["VmRSS"], got["VmHWM"], nil
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
