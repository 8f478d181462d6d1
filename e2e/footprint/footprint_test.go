//go:build e2e

// Package footprint measures what one operator costs a management cluster at rest: a management
// cluster runs one operator per hosted cluster, so whatever one costs is paid hundreds of times.
// Each scenario starts its own HyperShift environment (local clusters with simulated nodes and
// audit logs, a fake OpenStack) and runs the operator binary as the install runs it, one
// hostedcluster process, then watches it at rest for -window: its resident memory, its lease
// writes, every other request it sends (from both API servers' audit logs) and its reconciles
// (from its /metrics). Run it with `make bench-footprint`; it writes a summary to -out.
//
// The benchmark asserts no target, since machines are noisy; it fails only when the measurement
// itself is impossible: the operator exited, the driver never became Available, an audit log or
// the metrics could not be read.
package footprint

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
)

var (
	operatorBinary = flag.String("operator", "../../bin/cinder-csi-operator", "cinder-csi-operator binary")
	window         = flag.Duration("window", 5*time.Minute, "how long the operator is watched at rest")
	namespaces     = flag.Int("namespaces", 500, "busy-management: unrelated namespaces created on the management cluster")
	objects        = flag.Int("objects", 20, "busy-management: objects in each of those namespaces")
	nodes          = flag.Int("nodes", 1000, "large-guest: worker nodes of the guest cluster")
	claims         = flag.Int("claims", 10000, "kept-zone-class: bound claims in the guest")
	outDir         = flag.String("out", "../../bin/footprint", "directory of summary.txt")
)

// scenario is one environment the operator is measured in.
type scenario struct {
	name string
	// about says in a few words what the scenario is, for the summary.
	about   string
	options env.Options
	// prepare, when set, runs after the environment has started and before the operator does,
	// and returns lines for the summary.
	prepare func(b *testing.B, e *env.Env) []string
	// allNodes makes the wait for the install include the node DaemonSet running on this many
	// nodes.
	allNodes int
	// installed, when set, is what the wait for the install also expects of the driver.
	installed func(g Gomega, d *operatorv1.ClusterCSIDriver)
}

// scenarios are the benchmark's sub-benchmarks, in order.
func scenarios() []scenario {
	return []scenario{
		{
			name:    "idle",
			about:   "a fresh install on otherwise empty clusters",
			options: env.Options{Mode: env.ModeHyperShift, Audit: true},
		},
		{
			name: "busy-management",
			about: fmt.Sprintf("%d unrelated namespaces of %d objects each on the management cluster, created before the operator starts",
				*namespaces, *objects),
			options: env.Options{Mode: env.ModeHyperShift, Audit: true},
			prepare: func(b *testing.B, e *env.Env) []string { return busyManagement(b, e, *namespaces, *objects) },
		},
		{
			name:     "large-guest",
			about:    fmt.Sprintf("a guest of %d worker nodes, the node DaemonSet rolled out on all of them", *nodes),
			options:  env.Options{Mode: env.ModeHyperShift, Audit: true, Workers: *nodes},
			allNodes: *nodes,
		},
		{
			name: "kept-zone-class",
			about: fmt.Sprintf("%d bound claims in the guest, one in %d of a per-zone StorageClass whose zone is no longer asked for, which the operator keeps for them",
				*claims, keptEvery),
			options:   env.Options{Mode: env.ModeHyperShift, Audit: true},
			prepare:   func(b *testing.B, e *env.Env) []string { return keptZoneClass(b, e, *claims) },
			installed: keptZoneWarning((*claims + keptEvery - 1) / keptEvery),
		},
	}
}

// BenchmarkFootprint measures the operator at rest in each scenario (idle, busy-management,
// large-guest, kept-zone-class), each in its own environment. One iteration is a whole environment and a window
// of -window, so run it with -benchtime=1x; -bench=BenchmarkFootprint/idle picks one scenario.
func BenchmarkFootprint(b *testing.B) {
	operator, err := filepath.Abs(*operatorBinary)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(operator); err != nil {
		b.Fatalf("operator binary: %v (run `make build`)", err)
	}
	results := map[string]*result{}
	var order []string
	for _, s := range scenarios() {
		b.Run(s.name, func(b *testing.B) {
			if b.N > 1 {
				b.Skip("one iteration is a whole environment and a window at rest: run with -benchtime=1x")
			}
			r := measure(b, s, operator)
			results[s.name] = r
			order = append(order, s.name)
			r.report(b)
			writeSummary(b, results, order)
		})
	}
	if len(results) == 0 {
		return
	}
	if idle, busy := results["idle"], results["busy-management"]; idle != nil && busy != nil {
		b.Logf("%s", growth(idle, busy))
	}
	writeSummary(b, results, order)
	b.Logf("Summary of %s written to %s", strings.Join(order, ", "), summaryPath())
}

// summaryPath is where the summary is written.
func summaryPath() string { return filepath.Join(*outDir, "summary.txt") }

// writeSummary writes the summary of the scenarios measured so far, so that a later scenario's
// failure keeps the earlier ones' figures.
func writeSummary(b *testing.B, results map[string]*result, order []string) {
	b.Helper()
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		b.Fatalf("creating %s: %v", *outDir, err)
	}
	if err := os.WriteFile(summaryPath(), []byte(summary(results, order)), 0o644); err != nil {
		b.Fatalf("writing the summary: %v", err)
	}
}
