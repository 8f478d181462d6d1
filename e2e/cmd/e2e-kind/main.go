// Command e2e-kind runs the e2e suite against the operator deployed from its install manifests on
// two kind clusters: a management cluster, where the operator and the CSI controller run in the
// HostedControlPlane namespace, and a guest cluster, where the node plugin runs.
//
// It first checks that everything it needs is on the machine (a Docker engine, kind's node
// image, the operator image and the operand images) and stops at once, naming each missing
// piece, when something is not. Then it:
//
//  1. builds kind into ./bin when missing, and creates the two clusters;
//  2. loads the images into the clusters' nodes;
//  3. installs the CRDs the operator reads (the same files the local clusters use);
//  4. starts the fake OpenStack on the Docker network's gateway address, where pods reach it;
//  5. seeds the clusters as HyperShift would (HostedControlPlane, credentials, CA, guest
//     kubeconfig, ClusterCSIDriver, Infrastructure);
//  6. applies manifests/install/hypershift with the images and namespace filled in;
//  7. runs the e2e suite with the two kubeconfigs;
//  8. deletes the clusters (unless --keep).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
)

// options configure a run.
type options struct {
	Kind          string
	KindVersion   string
	NodeImage     string
	OperatorImage string
	Name          string
	HostedCluster string
	WorkDir       string
	Keep          bool
	GoTestFlags   string
	// Images are the operand images by environment variable (DRIVER_IMAGE, ...).
	Images map[string]string
}

func main() {
	var o options
	flag.StringVar(&o.Kind, "kind", "bin/kind", "kind binary; built from the Go module proxy when missing")
	flag.StringVar(&o.KindVersion, "kind-version", "v0.33.0", "kind version to build when --kind is missing")
	flag.StringVar(&o.NodeImage, "node-image", envOr("KIND_NODE_IMAGE", "kindest/node:v1.36.3"), "kind node image (must be in the local image store)")
	flag.StringVar(&o.OperatorImage, "operator-image", envOr("IMAGE", "cinder-csi-operator:dev"), "operator image (must be in the local image store)")
	flag.StringVar(&o.Name, "name", "cinder-e2e", "prefix of the kind clusters' names")
	flag.StringVar(&o.HostedCluster, "hosted-cluster", "example", "hosted cluster name; its HCP namespace is clusters-<name>")
	flag.StringVar(&o.WorkDir, "work-dir", "bin/e2e-kind", "kubeconfigs and logs")
	flag.BoolVar(&o.Keep, "keep", false, "keep the clusters after the run")
	flag.StringVar(&o.GoTestFlags, "go-test-flags", "-count=1 -timeout=30m", "flags for go test")
	flag.Parse()

	os.Exit(mainCode(o))
}

// mainCode runs the preflight and, when nothing is missing, the whole run; it returns the exit
// code: 2 when something is missing, 1 when the run failed.
func mainCode(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	p := realProbes()
	p.Getenv = os.Getenv
	if missing := preflight(ctx, p, o); len(missing) > 0 {
		fmt.Fprintln(os.Stderr, "e2e-kind: cannot run here; missing:")
		for _, m := range missing {
			fmt.Fprintln(os.Stderr, "  -", m)
		}
		fmt.Fprintln(os.Stderr, "The same e2e suite runs on local clusters from upstream binaries: make test-e2e")
		return 2
	}
	o.Images = map[string]string{}
	for _, op := range operandImages {
		o.Images[op.Env] = os.Getenv(op.Env)
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-kind:", err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// run does the steps of the package comment; the clusters are deleted on every path unless
// o.Keep.
func run(ctx context.Context, o options) (err error) {
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return err
	}
	if err := ensureKind(ctx, o); err != nil {
		return err
	}
	k := &kind{Binary: o.Kind, Dir: o.WorkDir, NodeImage: o.NodeImage}
	mgmtName, guestName := o.Name+"-mgmt", o.Name+"-guest"
	defer func() {
		if o.Keep {
			logf("Keeping the clusters %s and %s (kind delete cluster --name <name>)", mgmtName, guestName)
			return
		}
		// A fresh context: the run's may be cancelled.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, k.Delete(cctx, mgmtName), k.Delete(cctx, guestName))
	}()

	start := time.Now()
	mgmt, err := k.Create(ctx, mgmtName)
	if err != nil {
		return err
	}
	guest, err := k.Create(ctx, guestName)
	if err != nil {
		return err
	}
	logf("Clusters up in %s", time.Since(start).Round(time.Second))

	if err := loadImages(ctx, k, o, mgmtName, guestName); err != nil {
		return err
	}
	gw, err := gatewayIP(ctx)
	if err != nil {
		return err
	}
	w, err := newWorld(o, mgmt.Config, guest.Config, gw)
	if err != nil {
		return err
	}
	defer w.Close()
	guestKubeconfig, err := k.InternalKubeconfig(ctx, guestName)
	if err != nil {
		return err
	}
	if err := w.Prepare(ctx, guestKubeconfig); err != nil {
		return err
	}

	args := append([]string{"test", "-tags=e2e"}, strings.Fields(o.GoTestFlags)...)
	args = append(args, "./suite/...", "-args",
		"-mgmt-kubeconfig="+mgmt.Kubeconfig, "-guest-kubeconfig="+guest.Kubeconfig, "-hcp-namespace="+w.Namespace)
	logf("Running go %s", strings.Join(args, " "))
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	// The suite is a package of the harness's module, under e2e/.
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		w.DumpOperatorLogs(ctx)
		return fmt.Errorf("the e2e suite failed: %w", err)
	}
	return nil
}

// ensureKind builds kind into o.Kind when it is missing.
func ensureKind(ctx context.Context, o options) error {
	if _, err := os.Stat(o.Kind); err == nil {
		return nil
	}
	abs, err := filepath.Abs(o.Kind)
	if err != nil {
		return err
	}
	tmp := abs + ".build"
	logf("Building kind %s into %s", o.KindVersion, o.Kind)
	cmd := exec.CommandContext(ctx, "go", "install", "sigs.k8s.io/kind@"+o.KindVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building kind %s: %w", o.KindVersion, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	return os.Rename(filepath.Join(tmp, "kind"), abs)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s e2e-kind: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
