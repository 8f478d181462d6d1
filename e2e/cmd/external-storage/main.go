// Command external-storage is what `make test-external-storage` runs: the upstream Kubernetes
// external-storage suite (e2e.test -storage.testdriver, from k8s.io/kubernetes at the local
// clusters' version) against the Cinder CSI driver the operator installs on real nodes. It starts
// the environment of one mode on real nodes (standalone: one cluster; hypershift: management and
// guest, the suite runs against the guest), on the fake OpenStack or, with --openstack=real, on
// a real one started for the run, deploys the operator as a pod from its install manifests,
// waits for the driver to be Available, runs the suite (package externalstorage) with a JUnit
// report, prints the counts and stops everything. The exit status is the suite's.
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

	operatorv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/externalstorage"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func main() {
	err := run()
	var ee *externalstorage.ExitError
	switch {
	case errors.As(err, &ee):
		fmt.Fprintln(os.Stderr, "external-storage:", err)
		os.Exit(ee.Code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "external-storage:", err)
		os.Exit(1)
	}
}

// The OpenStack kinds of --openstack.
const (
	fakeCloud = "fake"
	realCloud = "real"
)

func run() error {
	mode := flag.String("mode", env.ModeStandalone, "standalone (one cluster) or hypershift (management and guest; the suite runs against the guest)")
	cloud := flag.String("openstack", fakeCloud, "fake (the harness's model of OpenStack) or real (Keystone, Placement, Nova and Cinder from Debian's packages, started for the run)")
	operator := flag.String("operator", "bin/cinder-csi-operator", "cinder-csi-operator binary")
	binDir := flag.String("bin", "bin", "directory of the kubelet and the operand images (make operand-images)")
	suiteDir := flag.String("suite", "", "directory of e2e.test and agnhost (make external-storage-suite)")
	kubectl := flag.String("kubectl", "", "kubectl binary the suite runs")
	testDriver := flag.String("testdriver", "", "the suite's driver definition; empty: the built-in one of the OpenStack kind (e2e/externalstorage/testdriver.yaml, testdriver-realcloud.yaml)")
	focus := flag.String("focus", "External.Storage", "ginkgo focus regular expression")
	skip := flag.String("skip", "", "ginkgo skip regular expression")
	out := flag.String("out", "bin/external-storage", "directory for the JUnit report and logs; the run's subdirectory (<mode>, or <mode>-realcloud) is replaced on start")
	timeout := flag.Duration("timeout", 2*time.Hour, "the suite's overall timeout (-ginkgo.timeout)")
	extra := flag.String("ginkgo-args", "", "more e2e.test arguments, space separated")
	parallel := flag.Int("procs", 1, "parallel suite processes (ginkgo --procs); more than one runs the suite through the ginkgo CLI next to e2e.test")
	seed := flag.Int("seed", 1, "ginkgo's random seed, fixed so that a run's spec order can be repeated")
	flag.Parse()

	driver := externalstorage.TestDriver
	sub := *mode
	switch *cloud {
	case fakeCloud:
	case realCloud:
		driver, sub = externalstorage.RealCloudTestDriver, *mode+"-realcloud"
	default:
		return fmt.Errorf("--openstack=%q: want %s or %s", *cloud, fakeCloud, realCloud)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := realnode.Check(); err != nil {
		return fmt.Errorf("the suite needs real nodes, which this host cannot run: %w", err)
	}
	for _, p := range []*string{operator, binDir, out} {
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	if _, err := os.Stat(*operator); err != nil {
		return fmt.Errorf("%w (make build)", err)
	}
	if *testDriver != "" {
		b, err := os.ReadFile(*testDriver)
		if err != nil {
			return err
		}
		driver = b
	}

	dir := filepath.Join(*out, sub)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	logf := func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }
	suite, err := externalstorage.Prepare(ctx, externalstorage.SuiteOptions{
		SuiteDir: *suiteDir, Kubectl: *kubectl, ImageDir: filepath.Join(*binDir, "images", "external-storage"),
		Dir: dir, Driver: driver, Focus: *focus, Skip: *skip, Timeout: *timeout, Procs: *parallel, Seed: *seed,
		Args: strings.Fields(*extra), Logf: func(f string, a ...any) { fmt.Printf(f+"\n", a...) },
	})
	if err != nil {
		return err
	}

	started := time.Now()
	opts := env.Options{Mode: *mode, Dir: filepath.Join(dir, "env"), Logf: logf,
		RealNodes: &env.RealNodeOptions{BinDir: *binDir}}
	if *cloud == realCloud {
		stopCloud, err := startRealCloud(ctx, &opts, dir)
		if err != nil {
			return err
		}
		defer stopCloud()
	}
	e, err := env.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("starting the %s environment on real nodes: %w", *mode, err)
	}
	defer e.Stop()
	// The nodes' directories go with the environment; their logs (the operator's, the driver's,
	// the suite's pods') are what explains a failure.
	defer keepNodeLogs(e, filepath.Join(dir, "node-logs"))
	op, err := e.DeployOperator(ctx, env.PodOptions{Binary: *operator})
	if err != nil {
		return fmt.Errorf("deploying the operator: %w", err)
	}
	defer op.Stop()
	if err := waitAvailable(ctx, e.GuestClient, op.Failed(), 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("Driver Available %s after start (%s mode, real nodes, %s OpenStack); running the suite\n",
		time.Since(started).Round(time.Second), *mode, *cloud)

	sum, err := suite.Run(ctx, e)
	if sum.ByPattern != nil {
		fmt.Printf("External storage suite, %s mode, %s OpenStack, %s: %s (report: %s)\n",
			*mode, *cloud, sum.Took.Round(time.Second), sum, sum.ReportDir)
	}
	return err
}

// startRealCloud starts a real OpenStack for the environment of opts and sets it there. The
// returned function keeps the cloud's logs under dir/openstack-logs (the cloud removes its own
// directory) and stops it.
func startRealCloud(ctx context.Context, opts *env.Options, dir string) (func(), error) {
	fmt.Println("Starting a real OpenStack (Keystone, Placement, Nova, Cinder from Debian's packages)")
	start := time.Now()
	c, err := env.StartRealCloud(ctx, opts.Logf)
	if err != nil {
		return nil, fmt.Errorf("starting the real OpenStack: %w", err)
	}
	fmt.Printf("Real OpenStack up in %s\n", time.Since(start).Round(time.Second))
	opts.RealCloud = c
	return func() {
		logs := filepath.Join(dir, "openstack-logs")
		if out, err := exec.Command("cp", "-r", c.LogDir(), logs).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "keeping the real OpenStack's logs: %v: %s\n", err, out)
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the real OpenStack:", err)
		}
	}, nil
}

// keepNodeLogs copies the kubelet's, containerd's and the pods' logs of every node of e into dir,
// one directory per node.
func keepNodeLogs(e *env.Env, dir string) {
	for _, n := range e.Real.Nodes() {
		to := filepath.Join(dir, n.Name())
		if err := os.MkdirAll(to, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "keeping the nodes' logs:", err)
			return
		}
		for _, from := range []string{n.LogPath("kubelet"), n.LogPath("containerd"), filepath.Join(n.Dir(), "pod-logs")} {
			if _, err := os.Stat(from); err != nil {
				continue
			}
			if out, err := exec.Command("cp", "-r", from, to).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "keeping %s: %v: %s\n", from, err, out)
			}
		}
	}
}

// waitAvailable polls the ClusterCSIDriver until the controller and the node plugin are
// Available and neither is Progressing. On a timeout it names the conditions last seen.
func waitAvailable(ctx context.Context, c client.Client, exited <-chan error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	d := &operatorv1.ClusterCSIDriver{}
	for {
		if err := c.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err == nil &&
			env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable) &&
			env.ConditionTrue(d.Status.Conditions, names.ConditionNodeAvailable) &&
			!env.ConditionTrue(d.Status.Conditions, names.ConditionControllerProgressing) &&
			!env.ConditionTrue(d.Status.Conditions, names.ConditionNodeProgressing) {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the operator exited before the driver was Available: %w", err)
		case <-ctx.Done():
			var seen []string
			for _, cond := range d.Status.Conditions {
				seen = append(seen, fmt.Sprintf("%s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
			}
			return fmt.Errorf("waiting for the driver to be Available: %w; conditions: %s", ctx.Err(), strings.Join(seen, "; "))
		case <-tick.C:
		}
	}
}
