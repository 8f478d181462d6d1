package realcloud

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// StartForTest starts a cloud for a test and stops it when the test ends, first printing the
// end of every service's log when the test failed. It skips the test, loudly and with the
// reason, where the cloud cannot run (not Linux, not root, packages missing); under CI=true that
// is a failure instead, so that CI cannot pass by skipping.
func StartForTest(t testing.TB, opts Options) *Cloud {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrUnsupported) && !localcluster.InCI() {
			t.Skipf("*** SKIPPED: %v (with CI=true this is a failure) ***", err)
		}
		t.Fatalf("Starting real OpenStack: %v", err)
	}
	// An interrupt (Ctrl-C, SIGTERM) would end the test binary without its cleanups: the
	// services die with it, but the bind mounts would stay until the next run's sweep.
	forget := procs.OnInterrupt("the real OpenStack", func() { _ = c.Stop() })
	t.Cleanup(func() {
		forget()
		if t.Failed() {
			c.logTails(20)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("Stopping real OpenStack: %v", err)
		}
	})
	return c
}
