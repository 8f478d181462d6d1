// Command localcluster starts a local Kubernetes cluster for people to poke at by hand:
//
//	go run ./e2e/cmd/localcluster up --name X --dir D --masters N --workers M
//
// It prints the admin kubeconfig path, runs until SIGINT or SIGTERM, then stops the cluster.
// Tests and run-local use package localcluster directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		log.Fatal(err)
	}
}

// run parses the subcommand and its flags and runs the cluster until a signal arrives.
func run(args []string) error {
	if len(args) == 0 || args[0] != "up" {
		return errors.New("usage: localcluster up [--name NAME] [--dir DIR] [--masters N] [--workers N] [--crds none|management|guest] [--audit] [--control-plane-only]")
	}
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	opts := localcluster.Options{Logf: log.Printf}
	fs.StringVar(&opts.Name, "name", "local", "cluster name, used in directory and node names")
	fs.StringVar(&opts.WorkDir, "dir", "", "parent directory of the cluster directory, kept after exit (default: a temporary directory, removed on exit)")
	fs.IntVar(&opts.Masters, "masters", 1, "number of fake master nodes")
	fs.IntVar(&opts.Workers, "workers", 2, "number of fake worker nodes")
	fs.BoolVar(&opts.Audit, "audit", false, "write the API server audit log")
	fs.BoolVar(&opts.ControlPlaneOnly, "control-plane-only", false, "run only etcd and kube-apiserver")
	crds := fs.String("crds", "none", "CRD set to install: none, management or guest")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var err error
	switch *crds {
	case "none":
	case "management":
		opts.CRDs, err = localcluster.ManagementCRDs()
	case "guest":
		opts.CRDs, err = localcluster.GuestCRDs()
	default:
		return fmt.Errorf("unknown --crds %q: want none, management or guest", *crds)
	}
	if err != nil {
		return fmt.Errorf("finding CRDs: %w", err)
	}

	// The signal context also cancels a start in progress, so Ctrl-C never leaves a half-started
	// cluster behind.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n", c.KubeconfigPath())
	if c.AuditLogPath() != "" {
		log.Printf("Audit log: %s", c.AuditLogPath())
	}
	log.Printf("Cluster %s is running; logs in %s; press Ctrl-C to stop", c.Name(), c.Dir())
	<-ctx.Done()
	log.Printf("Stopping cluster %s", c.Name())
	if err := c.Stop(); err != nil {
		return fmt.Errorf("stopping cluster: %w", err)
	}
	return nil
}
