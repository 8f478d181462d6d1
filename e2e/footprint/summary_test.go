//go:build e2e

package footprint

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// result is what one scenario measured.
type result struct {
	name, about string
	// settings describe the environment, operator the process measured, prepared what the
	// scenario created before the operator started.
	settings, operator string
	prepared           []string
	// envUp is how long the environment took to start, prepare how long the scenario's
	// preparation took; available and settled are when the install was done and quiet, from
	// the operator's start.
	envUp, prepare, available, settled time.Duration
	// daemonSet is how far the node DaemonSet was rolled out at Available.
	daemonSet string
	// windowStart and windowEnd bound the window as it ran.
	windowStart, windowEnd time.Time
	// rssSamples are VmRSS every sampleEvery through the window, in KiB; hwm is VmHWM (the
	// peak since the start) at its end.
	rssSamples []int64
	hwm        int64
	// leaseWrites are when the lease was updated in the window; other is every other request
	// the operator sent in it.
	leaseWrites []time.Time
	other       []request
	// install are the operator's requests from its start until the window.
	install []request
	// daemonSetStatusInstall and daemonSetStatusWindow count the DaemonSet controller's writes
	// of the node DaemonSet's status from the operator's start until the window and in it.
	daemonSetStatusInstall, daemonSetStatusWindow int
	// perNode are the per-node requests from the operator's start to the window's end.
	perNode []request
	// claimsInstall and claimsWindow are the requests about claims from the operator's start
	// until the window, and in it.
	claimsInstall, claimsWindow []request
	// Reconciles per controller: at the first scrape (firstScrape after the operator's start),
	// once settled, at the window's end.
	firstScrape                                       time.Duration
	reconcilesStart, reconcilesSettled, reconcilesEnd map[string]float64
}

// rssEnd returns VmRSS at the end of the window, in KiB.
func (r *result) rssEnd() int64 { return r.rssSamples[len(r.rssSamples)-1] }

// rssMax returns the largest VmRSS sample of the window, in KiB.
func (r *result) rssMax() int64 { return slices.Max(r.rssSamples) }

// rssByMinute lists VmRSS at the window's start and after each full minute, in MiB: the Go
// runtime returns freed memory to the system minutes after a burst of work, so the figure at the
// end of a window depends on its length.
func (r *result) rssByMinute() string {
	perMinute := int(time.Minute / sampleEvery)
	var out []string
	for i := 0; i < len(r.rssSamples); i += perMinute {
		out = append(out, fmt.Sprintf("%.1f", mibValue(r.rssSamples[i])))
	}
	return strings.Join(out, ", ") + " MiB"
}

// leaseWritesPerMinute returns how many times a minute the lease is updated.
//
// With two updates or more it is their rate, (n-1) over the time from the first to the last:
// counting n in the window instead over-reports by up to one update per window, as whether a
// renewal falls just inside or just outside each edge is chance (12 in a 5-minute window is
// 2.40/min for a lease renewed every 26 s, 2.31/min).
func (r *result) leaseWritesPerMinute() float64 {
	if n := len(r.leaseWrites); n >= 2 {
		if span := r.leaseWrites[n-1].Sub(r.leaseWrites[0]); span > 0 {
			return float64(n-1) / span.Minutes()
		}
	}
	return float64(len(r.leaseWrites)) / r.windowEnd.Sub(r.windowStart).Minutes()
}

// leaseIntervals describes the time between the lease's updates in the window.
func (r *result) leaseIntervals() string {
	if len(r.leaseWrites) < 2 {
		return "too few to tell the interval"
	}
	var intervals []time.Duration
	for i := 1; i < len(r.leaseWrites); i++ {
		intervals = append(intervals, r.leaseWrites[i].Sub(r.leaseWrites[i-1]))
	}
	var sum time.Duration
	for _, d := range intervals {
		sum += d
	}
	round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	return fmt.Sprintf("every %s on average (%s to %s)", round(sum/time.Duration(len(intervals))), round(slices.Min(intervals)), round(slices.Max(intervals)))
}

// counts returns how many of the requests were mutating, reads that are not watches, and watch
// (re)starts.
func counts(requests []request) (mutating, reads, watches int) {
	for _, q := range requests {
		switch {
		case q.Mutating():
			mutating++
		case q.watch():
			watches++
		default:
			reads++
		}
	}
	return mutating, reads, watches
}

// controllers returns the controller names of the reconcile counters, sorted.
func (r *result) controllers() []string {
	return slices.Sorted(maps.Keys(r.reconcilesEnd))
}

// reconciles returns the reconciles during the install (from the operator's start until
// settled: the counters of a new process start at zero, and the first scrape may already count
// some) and during the window, summed over controllers.
func (r *result) reconciles() (install, window float64) {
	for _, c := range r.controllers() {
		install += r.reconcilesSettled[c]
		window += r.reconcilesEnd[c] - r.reconcilesSettled[c]
	}
	return install, window
}

// report reports the figures as benchmark metrics and logs the scenario's section.
func (r *result) report(b *testing.B) {
	mutating, reads, watches := counts(r.other)
	install, window := r.reconciles()
	b.ReportMetric(mibValue(r.rssEnd()), "rss-MiB")
	b.ReportMetric(mibValue(r.rssMax()), "rss-max-MiB")
	b.ReportMetric(mibValue(r.hwm), "hwm-MiB")
	b.ReportMetric(r.leaseWritesPerMinute(), "lease-writes/min")
	b.ReportMetric(float64(len(r.other)), "other-requests")
	b.ReportMetric(float64(mutating), "other-writes")
	b.ReportMetric(float64(reads), "other-reads")
	b.ReportMetric(float64(watches), "watch-starts")
	b.ReportMetric(float64(len(r.perNode)), "per-node-requests")
	b.ReportMetric(float64(len(r.claimsWindow)), "claim-requests")
	b.ReportMetric(install, "install-reconciles")
	b.ReportMetric(window, "window-reconciles")
	b.ReportMetric(r.available.Seconds(), "available-s")
	b.Logf("\n%s", r.section())
}

// section is the scenario's part of the summary.
func (r *result) section() string {
	var s strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	mutating, reads, watches := counts(r.other)
	window := r.windowEnd.Sub(r.windowStart)

	line("== %s: %s", r.name, r.about)
	line("environment:        %s", r.settings)
	for _, p := range r.prepared {
		line("                    %s", p)
	}
	line("operator:           %s", r.operator)
	line("timings:            environment up in %s%s; from the operator's start: Available and rolled out %s, settled (no write but the lease's for %s) %s",
		r.envUp.Round(100*time.Millisecond), r.prepareTiming(), r.available.Round(100*time.Millisecond), settleQuiet, r.settled.Round(100*time.Millisecond))
	line("node DaemonSet:     %s at Available; its status written %d times by the DaemonSet controller during the install, %d in the window",
		r.daemonSet, r.daemonSetStatusInstall, r.daemonSetStatusWindow)
	var installWrites []request
	for _, q := range r.install {
		if q.Mutating() {
			installWrites = append(installWrites, q)
		}
	}
	im, ir, iw := counts(r.install)
	line("install requests:   %d from the operator's start until the window: %d mutating, %d reads that are not watches, %d watches; the mutating ones:", len(r.install), im, ir, iw)
	for _, g := range group(installWrites) {
		line("                    %s", g)
	}
	line("window:             %s, %s to %s", window.Round(time.Second), r.windowStart.Format("15:04:05"), r.windowEnd.Format("15:04:05"))
	line("RSS (VmRSS):        %s at the end of the window, %s max in the window (%d samples, every %s)", mib(r.rssEnd()), mib(r.rssMax()), len(r.rssSamples), sampleEvery)
	line("RSS each minute:    %s", r.rssByMinute())
	line("peak RSS (VmHWM):   %s since the operator's start", mib(r.hwm))
	line("lease writes:       %d updates of the leader election lease in the window: %.2f/min, %s", len(r.leaseWrites), r.leaseWritesPerMinute(), r.leaseIntervals())
	line("other requests:     %d in the window: %d mutating, %d reads that are not watches, %d watch (re)starts", len(r.other), mutating, reads, watches)
	for _, g := range group(r.other) {
		line("                    %s", g)
	}
	line("per-node requests:  %d from the operator's start to the window's end (nodes, pods, or a node's name)", len(r.perNode))
	for _, g := range group(r.perNode) {
		line("                    %s", g)
	}
	cm, cr, cw := counts(r.claimsWindow)
	line("claim requests:     %d from the operator's start until the window; %d in the window: %d mutating, %d reads that are not watches, %d watch (re)starts",
		len(r.claimsInstall), len(r.claimsWindow), cm, cr, cw)
	for _, g := range group(slices.Concat(r.claimsInstall, r.claimsWindow)) {
		line("                    %s", g)
	}
	install, windowReconciles := r.reconciles()
	line("reconciles:         %.0f during the install, %.0f in the window", install, windowReconciles)
	for _, c := range r.controllers() {
		line("                    %-13s install %.0f (%.0f of them by the first scrape, %s after the start), window %.0f",
			c+":", r.reconcilesSettled[c], r.reconcilesStart[c], r.firstScrape.Round(time.Millisecond), r.reconcilesEnd[c]-r.reconcilesSettled[c])
	}
	return s.String()
}

// prepareTiming says how long the scenario's preparation took, if it had one.
func (r *result) prepareTiming() string {
	if r.prepare == 0 {
		return ""
	}
	return fmt.Sprintf(", prepared in %s", r.prepare.Round(100*time.Millisecond))
}

// group lists requests by cluster, sender, verb, resource and namespace/name, with how often
// each was sent and when first and last.
func group(requests []request) []string {
	type entry struct {
		key         string
		n           int
		first, last time.Time
	}
	byKey := map[string]*entry{}
	for _, r := range requests {
		ref := r.ObjectRef
		resource := ref.Resource
		if ref.Subresource != "" {
			resource += "/" + ref.Subresource
		}
		key := fmt.Sprintf("%-10s %-15s %-6s %-24s %s/%s", r.cluster, r.sender(), r.Verb, resource, ref.Namespace, ref.Name)
		e := byKey[key]
		if e == nil {
			e = &entry{key: key, first: r.RequestReceivedTimestamp}
			byKey[key] = e
		}
		e.n++
		e.last = r.RequestReceivedTimestamp
	}
	entries := slices.SortedFunc(maps.Values(byKey), func(a, b *entry) int {
		return cmp.Or(a.first.Compare(b.first), strings.Compare(a.key, b.key))
	})
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		when := e.first.Format("15:04:05")
		if last := e.last.Format("15:04:05"); last != when {
			when += "–" + last
		}
		out = append(out, fmt.Sprintf("%s  x%d  %s", e.key, e.n, when))
	}
	return out
}

// growth compares the busy management cluster's RSS with the idle one's.
func growth(idle, busy *result) string {
	pct := func(a, b int64) float64 { return 100 * float64(b-a) / float64(a) }
	return fmt.Sprintf("RSS growth of busy-management over idle: %+.1f%% at the end of the window (%s → %s), %+.1f%% max in the window (%s → %s)",
		pct(idle.rssEnd(), busy.rssEnd()), mib(idle.rssEnd()), mib(busy.rssEnd()),
		pct(idle.rssMax(), busy.rssMax()), mib(idle.rssMax()), mib(busy.rssMax()))
}

// summary is the text of summary.txt: a section per scenario, in the order they ran, and the
// comparison of the busy management cluster with the idle one when both ran.
func summary(results map[string]*result, order []string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "Footprint of one operator (hostedcluster process) per hosted cluster, %s\n\n", time.Now().Format(time.RFC3339))
	for _, name := range order {
		s.WriteString(results[name].section())
		s.WriteString("\n")
	}
	if idle, busy := results["idle"], results["busy-management"]; idle != nil && busy != nil {
		s.WriteString(growth(idle, busy) + "\n")
	}
	return s.String()
}

// mibValue converts KiB to MiB.
func mibValue(kib int64) float64 { return float64(kib) / 1024 }

// mib formats KiB as MiB with one decimal.
func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", mibValue(kib)) }
