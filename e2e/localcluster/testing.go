package localcluster

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// StartForTest starts a cluster for a test and stops it in t.Cleanup. When the binaries are not
// built it skips the test, unless the CI environment variable is set to a true value: a CI job
// must not turn green by skipping everything. Under -short (`make test-unit`) it always skips.
// When the test has failed, the end of every component's log is printed before the cluster is
// stopped, because a temporary work directory is removed with it.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	skipShort(t)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Start(t.Context(), opts)
	if err != nil {
		failStart(t, err)
	}
	registerCleanup(t, c)
	return c
}

// StartPairForTest starts a management and a guest cluster concurrently for a test, like
// StartForTest.
func StartPairForTest(t testing.TB, mgmt, guest Options) (*Cluster, *Cluster) {
	t.Helper()
	skipShort(t)
	for _, o := range []*Options{&mgmt, &guest} {
		if o.Logf == nil {
			o.Logf = t.Logf
		}
	}
	m, g, err := StartPair(t.Context(), mgmt, guest)
	if err != nil {
		failStart(t, err)
	}
	registerCleanup(t, m, g)
	return m, g
}

// skipShort skips under -short: unit test runs need neither the upstream binaries nor the
// seconds a cluster takes to start.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("Skipping under -short: the test starts a local cluster")
	}
}

// failStart skips for missing binaries outside CI and fails otherwise.
func failStart(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrBinariesMissing) && !InCI() {
		t.Skipf("Skipping: local cluster binaries are not built (set CI=true to make this a failure): %v", err)
	}
	t.Fatalf("Starting local cluster: %v", err)
}

// InCI reports whether the CI environment variable is set to a true value: there, a test that
// cannot run its clusters or nodes fails instead of skipping.
func InCI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false", "False", "FALSE":
		return false
	}
	return true
}

// registerCleanup stops the clusters, concurrently, when the test ends, first printing the end
// of every component log if the test failed.
func registerCleanup(t testing.TB, clusters ...*Cluster) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range clusters {
				for _, p := range c.processes() {
					t.Logf("Cluster %s: last lines of %s:\n%s", c.name, p.LogPath(), procs.LogTail(p.LogPath(), procs.TailLines))
				}
			}
		}
		errs := make([]error, len(clusters))
		var wg sync.WaitGroup
		for i, c := range clusters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.Stop()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Errorf("Stopping local clusters: %v", err)
		}
	})
}
