// Package sidecar is what the stand-in sidecars (csi-livenessprobe and csi-node-driver-registrar)
// share: the CSI driver client (both dial the driver's socket given by --csi-address and wait for
// the driver to tell its name; the liveness probe calls Probe) and the life of the process, as
// the upstream sidecars live it (klog flags, logging to stderr, SIGTERM ends the run).
package sidecar

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

// InitFlags registers klog's flags, as upstream sidecars accept them, and logs to stderr. Call
// it before flag.Parse.
func InitFlags() {
	klog.InitFlags(nil)
	_ = flag.Set("logtostderr", "true")
}

// Main runs run until SIGTERM or an interrupt and exits 1, after logging the error, when it
// fails. name names the stand-in in that log line.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		klog.ErrorS(err, "Stand-in "+name+" failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
