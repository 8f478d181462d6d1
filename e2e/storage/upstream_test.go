//go:build e2e

package storage

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/externalstorage"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
)

// The upstream external-storage suite's CI subset runs in the HyperShift worlds, once their own
// scenarios are done: on the fake cloud with the driver definition of the fake, on the real one
// with the definition of what its file backend supports (package externalstorage). make
// test-storage passes these flags; without -upstream-suite the subset is skipped, loudly.
var (
	upstreamSuite         = flag.String("upstream-suite", "", "directory of e2e.test, ginkgo and agnhost (make external-storage-suite); empty skips the upstream suite's subset")
	upstreamKubectl       = flag.String("upstream-kubectl", "", "kubectl binary the upstream suite runs")
	upstreamFocus         = flag.String("upstream-focus", "External.Storage", "ginkgo focus of the upstream subset")
	upstreamSkip          = flag.String("upstream-skip", "", "ginkgo skip of the upstream subset, on either cloud")
	upstreamRealCloudSkip = flag.String("upstream-realcloud-skip", "", "ginkgo skip added on the real cloud: what its file backend cannot do")
	upstreamOut           = flag.String("upstream-out", "", "directory for the subsets' reports and logs (<mode>, <mode>-realcloud); empty: the test's temporary directory")
)

// upstreamTimeout bounds one subset; the CI subset takes under ten minutes (on the reference
// machine; the bound stretches on a slower one).
var upstreamTimeout = machine.Scale(40 * time.Minute)

// preparing serialises Prepare: the worlds share the directory the suite's images are built in.
var preparing sync.Mutex

// upstreamSubset runs the upstream suite's CI subset against w's guest cluster and its
// operator-installed driver. On the real cloud it then expects nothing of the cluster left in
// Cinder.
func upstreamSubset(t *testing.T, w *world) {
	if *upstreamSuite == "" {
		t.Skip("SKIPPED: no -upstream-suite (make test-storage passes it)")
	}
	ctx := context.Background()
	driver, skip, procs, sub, cloud := externalstorage.TestDriver, *upstreamSkip, 3, w.Env.Mode, "fake"
	if w.Cloud != nil {
		// One process: under three, cinder-volume lost SQLite's write race creating a volume.
		driver, procs, sub, cloud = externalstorage.RealCloudTestDriver, 1, w.Env.Mode+"-realcloud", "real"
		skip = strings.Trim(skip+"|"+*upstreamRealCloudSkip, "|")
		t.Cleanup(func() { w.expectCinderClean(t) })
	}
	out := *upstreamOut
	if out == "" {
		out = t.TempDir()
	}
	dir := filepath.Join(out, sub)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	preparing.Lock()
	suite, err := externalstorage.Prepare(ctx, externalstorage.SuiteOptions{
		SuiteDir: *upstreamSuite, Kubectl: *upstreamKubectl, ImageDir: filepath.Join(*binDir, "images", "external-storage"),
		Dir: dir, Driver: driver, Focus: *upstreamFocus, Skip: skip, Timeout: upstreamTimeout, Procs: procs,
		// The suite's own output goes to its e2e.log only: beside another world's, it would bury
		// both. A failure prints the log's end.
		Output: io.Discard, Logf: t.Logf,
	})
	preparing.Unlock()
	if err != nil {
		t.Fatalf("preparing the upstream suite: %v", err)
	}
	sum, err := suite.Run(ctx, w.Env)
	if sum.ByPattern != nil {
		t.Logf("External storage suite, CI subset, %s mode, %s OpenStack, %s: %s (report: %s)", w.Env.Mode, cloud, sum.Took.Round(time.Second), sum, sum.ReportDir)
	}
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(dir, "e2e.log")); rerr == nil {
			t.Logf("--- end of %s ---\n%s", filepath.Join(dir, "e2e.log"), tailBytes(b, 16<<10))
		}
		t.Fatalf("upstream suite: %v", err)
	}
}

// tailBytes returns the last n bytes of b, from a line's start where one is near.
func tailBytes(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[len(b)-n:]
	if i := strings.IndexByte(string(b[:min(len(b), 512)]), '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}
