package realnode

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// NewRunForTest starts a run for a test and closes it when the test ends. It skips the test,
// with the reason, when the host cannot run real nodes (see Check); when the CI environment
// variable is true and the test runs as root on Linux, it fails instead, so that a CI job on a
// capable host cannot pass by skipping.
func NewRunForTest(t testing.TB) *Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	r, err := NewRun(ctx, RunOptions{Logf: t.Logf})
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Closing real-node run: %v", err)
		}
	})
	return r
}

// StartNodeForTest starts a node for a test and stops it when the test ends, printing the end
// of its kubelet, containerd and kube-router logs first when the test failed (the logs go with
// the node). A missing kubelet or kube-router binary skips the test like NewRunForTest.
func StartNodeForTest(t testing.TB, r *Run, opts NodeOptions) *Node {
	t.Helper()
	n, err := r.StartNode(t.Context(), opts)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range []string{"containerd", "kubelet", kubeRouterName} {
				if _, err := os.Stat(n.LogPath(c)); err != nil {
					continue // stopped already, and its logs with it
				}
				t.Logf("Real node %s: last lines of %s:\n%s", n.Name(), n.LogPath(c), procs.LogTail(n.LogPath(c), 40))
			}
		}
		if err := n.Stop(); err != nil {
			t.Errorf("Stopping real node %s: %v", n.Name(), err)
		}
	})
	return n
}

// skipOrFail skips on a host that cannot run real nodes, except in CI on Linux as root, and
// fails on anything else.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	capable := runtime.GOOS == "linux" && os.Geteuid() == 0
	missing := errors.Is(err, ErrHostUnsupported) || errors.Is(err, ErrKubeletMissing) || errors.Is(err, ErrKubeRouterMissing)
	if missing && !(capable && localcluster.InCI()) {
		t.Skipf("Skipping: %v (with CI=true, as root on Linux, this is a failure)", err)
	}
	t.Fatalf("Real nodes: %v", err)
}
