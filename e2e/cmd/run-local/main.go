// Command run-local is what `make run-local` runs: it starts local clusters from upstream binaries
// (management and guest in HyperShift mode, one cluster in standalone mode), a fake OpenStack over
// HTTPS (or, with --openstack=real, a real one from Debian's packages), seeds them as HyperShift (or an OpenShift installation) would, runs the cinder-csi-operator
// against them (on real nodes as a pod from its install manifests, as a platform runs it; on
// simulated nodes, where no container runs, as a process on this host), prints the ClusterCSIDriver conditions once the driver is available, and
// keeps everything running until interrupted; then it stops every process it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func main() {
	// The harness's clients log through controller-runtime; without a logger it prints a stack
	// trace saying so. Errors are worth showing, the rest is noise next to run-local's output.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	restore := takeTerminal()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx)
	stop()
	restore()
	switch {
	case err != nil && ctx.Err() != nil:
		// Interrupted before the driver was available: everything started is stopped (the
		// deferred stops have run), which is what Ctrl-C asks for.
		fmt.Println("\nInterrupted; everything run-local started is stopped.")
	case err != nil:
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	mode := flag.String("mode", env.ModeHyperShift, "hypershift (management and guest clusters) or standalone (one cluster)")
	binary := flag.String("operator", "bin/cinder-csi-operator", "path of the cinder-csi-operator binary")
	dir := flag.String("dir", ".local", "directory for the clusters' data, kubeconfigs and logs; the mode's subdirectory is replaced on start")
	workers := flag.Int("workers", 2, "fake worker nodes of the guest cluster")
	exitWhenAvailable := flag.Bool("exit-when-available", false, "stop everything once the driver is available (for scripted checks)")
	realNodes := flag.String("real-nodes", "auto", "auto (real nodes where this host allows them, kwok nodes otherwise), true or false")
	binDir := flag.String("bin", "bin", "directory of the kubelet and the operand images (make operand-images), for real nodes")
	cloud := flag.String("openstack", "fake", "fake (the harness's model of OpenStack, up at once) or real (Keystone, Placement, Nova and Cinder from Debian's packages, a few minutes to start; needs real nodes)")
	prometheus := flag.String("prometheus", "", "a prometheus binary: on real nodes, run it on the management node, configured from the operator's ServiceMonitors and PrometheusRule, and print where to reach it")
	split := flag.Bool("split", false, "in hypershift mode, run the controlplane and guest managers as two processes on this host (a split deployment) instead of the operator pod of the install manifests")
	flag.Parse()

	root, err := filepath.Abs(filepath.Join(*dir, *mode))
	if err != nil {
		return err
	}
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(*binary); err != nil {
		return fmt.Errorf("operator binary: %w (run `make build`)", err)
	}

	opts := env.Options{Mode: *mode, Dir: root, Workers: *workers, Masters: 1,
		Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }}
	switch why := realnode.Check(); {
	case *realNodes == "false":
		fmt.Println("Nodes: simulated (kwok), as asked: pods are reported Running but no container runs.")
	case why == nil:
		bin, err := filepath.Abs(*binDir)
		if err != nil {
			return err
		}
		opts.RealNodes = &env.RealNodeOptions{BinDir: bin}
		fmt.Println("Nodes: real (a kubelet and containerd per node, in network namespaces of their own): the driver provisions, attaches and mounts volumes.")
	case *realNodes == "true":
		return fmt.Errorf("real nodes were asked for, but this host cannot run them: %w", why)
	default:
		fmt.Printf("Nodes: simulated (kwok): pods are reported Running but no container runs, because this host cannot run real nodes: %v\n", why)
	}
	start := time.Now()
	stopCloud, err := startCloud(ctx, *cloud, &opts, root, start)
	if err != nil {
		return err
	}
	defer stopCloud()
	fmt.Printf("Starting %s clusters in %s\n", *mode, root)
	e, err := env.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer e.Stop()
	fmt.Printf("Clusters up in %s\n", time.Since(start).Round(100*time.Millisecond))
	if *mode == env.ModeHyperShift {
		fmt.Printf("  management kubeconfig: %s (HostedControlPlane namespace %s)\n", e.Mgmt.KubeconfigPath(), e.Namespace)
		fmt.Printf("  guest kubeconfig:      %s\n", e.Guest.KubeconfigPath())
	} else {
		fmt.Printf("  kubeconfig: %s\n", e.Mgmt.KubeconfigPath())
	}
	switch {
	case e.RealCloud != nil:
		fmt.Printf("  real OpenStack:        %s (inside the node %s); the guest node's server %s\n", e.Real.OpenStackURL, e.Real.MgmtNode.Name(), e.Real.GuestServerID)
	case e.Real != nil:
		fmt.Printf("  fake OpenStack:        %s (inside the node %s)\n", e.Real.OpenStackURL, e.Real.MgmtNode.Name())
	default:
		fmt.Printf("  fake OpenStack:        %s\n", e.OpenStack.AuthURL())
	}

	opStart := time.Now()
	var (
		failed <-chan error
		// logHint returns what to show of the operator's log when it did not come up (the
		// pod's failure carries its own).
		logHint = func() string { return "" }
	)
	if e.Real != nil && !*split {
		fmt.Println("Deploying the operator as a pod, from manifests/install, on the real node", e.Real.MgmtNode.Name())
		op, err := e.DeployOperator(ctx, env.PodOptions{Binary: *binary})
		if err != nil {
			return err
		}
		defer op.Stop()
		pod, err := op.Pod(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("Operator pod %s/%s Ready %s after its deployment (image %s)\n",
			pod.Namespace, pod.Name, time.Since(opStart).Round(100*time.Millisecond), op.Image.Ref)
		fmt.Printf("  its log: kubectl --kubeconfig %s -n %s logs deploy/%s\n", e.Mgmt.KubeconfigPath(), op.Namespace, op.Name)
		failed = op.Failed()
	} else {
		logPath := filepath.Join(root, "operator.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer func() { _ = logFile.Close() }()
		processes, err := e.StartOperatorProcesses(env.ProcessOptions{Binary: *binary, Output: logFile, Split: *split})
		if err != nil {
			return err
		}
		defer func() {
			if err := processes.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the operator:", err)
			}
		}()
		fmt.Printf("Operator started as processes on this host (log: %s)\n", logPath)
		for _, p := range processes.Pids() {
			fmt.Printf("  %s: pid %d\n", p.Name, p.Pid)
		}
		failed, logHint = processes.Exited(), func() string {
			return fmt.Sprintf("\nlast lines of %s:\n%s", logPath, procs.LogTail(logPath, 10))
		}
	}

	d, err := waitAvailable(ctx, e.GuestClient, failed, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("waiting for the driver to become available: %w%s", err, logHint())
	}
	fmt.Printf("\nCinder CSI driver available %s after the operator's start (%s after run-local started).\n\n",
		time.Since(opStart).Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	printConditions(d)
	stopPrometheus, err := startPrometheus(ctx, e, *prometheus, *split)
	if err != nil {
		return err
	}
	defer stopPrometheus()
	if e.Real != nil {
		printExample(e)
	}
	if *exitWhenAvailable {
		return nil
	}
	fmt.Println("\nRunning until interrupted (Ctrl-C).")
	select {
	case <-ctx.Done():
	case err := <-failed:
		return err
	}
	fmt.Println("\nStopping everything run-local started.")
	return nil
}

// startCloud starts the OpenStack kind asks for: nothing for the fake, which env.Start starts
// itself, or a real one, set in opts, with an openrc written into root. The returned function
// stops it.
func startCloud(ctx context.Context, kind string, opts *env.Options, root string, start time.Time) (stop func(), err error) {
	switch kind {
	case "fake":
		return func() {}, nil
	case "real":
	default:
		return nil, fmt.Errorf("--openstack=%q: want fake or real", kind)
	}
	if opts.RealNodes == nil {
		return nil, errors.New("a real OpenStack needs real nodes: its volumes are block devices a simulated node cannot use")
	}
	fmt.Println("Starting a real OpenStack (Keystone, Placement, Nova, Cinder from Debian's packages)")
	c, err := env.StartRealCloud(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	stop = func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the real OpenStack:", err)
		}
	}
	openrc := filepath.Join(root, "openrc")
	if err := c.WriteOpenRC(openrc); err != nil {
		stop()
		return nil, err
	}
	opts.RealCloud = c
	fmt.Printf("Real OpenStack up in %s; to look at it: . %s && openstack volume list\n", time.Since(start).Round(time.Second), openrc)
	return stop, nil
}

// waitAvailable polls the ClusterCSIDriver until the controller and node are Available; an
// operator process that exits ends the wait at once.
func waitAvailable(ctx context.Context, c client.Client, exited <-chan error, timeout time.Duration) (*operatorv1.ClusterCSIDriver, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		d := &operatorv1.ClusterCSIDriver{}
		if err := c.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err == nil &&
			env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable) &&
			env.ConditionTrue(d.Status.Conditions, names.ConditionNodeAvailable) {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("timed out")
		case err := <-exited:
			return nil, err
		case <-t.C:
		}
	}
}

func printConditions(d *operatorv1.ClusterCSIDriver) {
	conds := slices.Clone(d.Status.Conditions)
	slices.SortFunc(conds, func(a, b operatorv1.OperatorCondition) int {
		if a.Type < b.Type {
			return -1
		}
		if a.Type > b.Type {
			return 1
		}
		return 0
	})
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "ClusterCSIDriver %s\nTYPE\tSTATUS\tREASON\tMESSAGE\n", d.Name)
	for _, c := range conds {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = w.Flush()
}

// printExample prints a claim and a pod that writes to it, ready to apply to the guest, so that
// a user sees the operator-installed driver provision, attach and mount a volume.
func printExample(e *env.Env) {
	fmt.Printf(`
Try it: a claim on the default StorageClass and a pod that writes to it (on the real node %s):

  kubectl --kubeconfig %s apply -f - <<'EOF'
  apiVersion: v1
  kind: PersistentVolumeClaim
  metadata:
    name: example
    namespace: default
  spec:
    accessModes: [ReadWriteOnce]
    resources:
      requests:
        storage: 1Gi
  ---
  apiVersion: v1
  kind: Pod
  metadata:
    name: example
    namespace: default
  spec:
    containers:
    - name: writer
      image: %s
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, "echo written to a Cinder volume > /data/hello && cat /data/hello && df -h /data && sleep 3600"]
      volumeMounts:
      - name: data
        mountPath: /data
    volumes:
    - name: data
      persistentVolumeClaim:
        claimName: example
  EOF
  kubectl --kubeconfig %s wait --for=condition=Ready pod/example --timeout=3m
  kubectl --kubeconfig %s logs example

`, e.Real.GuestNode.Name(), e.Guest.KubeconfigPath(), e.Real.Images[imagetars.Toolbox].Ref,
		e.Guest.KubeconfigPath(), e.Guest.KubeconfigPath())
}
