// Command realnode-sweep removes everything that real-node runs (package e2e/realnode) whose
// process was killed left on this host: their containers and runc shims, mounts, network
// namespaces, cgroups, host paths and host settings, and the fake OpenStack's loop disks. It waits while a live run holds the
// host-wide lock, up to --timeout. Every run sweeps on its own start; this is for cleaning up by
// hand (`make clean-realnode`).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
	log.Print("No real-node leftovers")
}

// run parses the flags and sweeps.
func run() error {
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for a live real-node run to finish")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := realnode.Sweep(ctx, log.Printf); err != nil {
		return fmt.Errorf("sweeping real-node leftovers: %w", err)
	}
	if err := env.SweepLoopDisks(funcr.New(func(prefix, args string) { log.Println(prefix, args) }, funcr.Options{Verbosity: 1})); err != nil {
		return fmt.Errorf("sweeping loop disks: %w", err)
	}
	return nil
}
