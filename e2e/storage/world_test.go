//go:build e2e

package storage

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/csioperator"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
)

var (
	operatorBinary = flag.String("operator", "../../bin/cinder-csi-operator", "cinder-csi-operator binary")
	binDir         = flag.String("bin", "../../bin", "directory of the kubelet and operand binaries (make operand-images)")
)

// The tests' own controller-runtime clients log nothing worth reading; without a logger,
// controller-runtime prints a warning with a stack instead, in the middle of the scenarios.
func init() { ctrllog.SetLogger(logr.Discard()) }

// topologyRecheck shortens the operator's zone re-detection so that the topology scenario sees
// a zone change within seconds; production keeps its default.
const topologyRecheck = 5 * time.Second

// world is one environment on real nodes with the operator running as a pod, from its install
// manifests.
type world struct {
	Mgmt, Guest client.Client
	// Namespace is the controller's namespace (the HCP namespace on HyperShift).
	Namespace string
	OpenStack *fakeopenstack.Server
	// OpenStackURL is the fake's address as clouds.yaml names it.
	OpenStackURL string
	Disks        *fakeopenstack.LoopDisks
	// GuestNode is the real node of the guest; GuestServerID its Nova server.
	GuestNode, GuestServerID string
	// InfraID is what the operator passes as --cluster, the volumes' cluster tag.
	InfraID string
	// Zone is the zone of the node and of the fake's zones.
	Zone string
	// Toolbox is the image of the test pods.
	Toolbox string
	// EnvUp is how long the environment took to start (clusters, real nodes, image imports);
	// OperatorStarted is when the operator's deployment began.
	EnvUp           time.Duration
	OperatorStarted time.Time
	// Operator is the operator's pod, deployed from the install manifests; nil until the switch
	// in a world that starts from csi-operator's install.
	Operator *env.OperatorPod
	// Env is the environment, for what the fields above do not cover.
	Env *env.Env
	// OperatorNamespace is where the operator runs and holds its lease (the controller's
	// namespace in both modes).
	OperatorNamespace string
	// CSIOperator is the cluster csi-operator ran in, when the world started from its install.
	CSIOperator *csioperator.Options
	// Cloud is the real OpenStack of a world that runs on one (OpenStack is then nil).
	Cloud *realcloud.Cloud

	operatorBinary string
	// release is the directory of the previous release the operator runs from, until the
	// upgrade scenario (realUpgrade) moves it to this tree; empty when it runs this tree's.
	release string
	// lockstep keeps the world in step with the others on a shared real cloud (nil: the world
	// has its cloud to itself); leaveLockstep takes it out.
	lockstep      *lockstep
	leaveLockstep func()
	// afterWorld runs when the world's test ends, before the environment stops: undoing what a
	// scenario changed in a cloud the world shares with others.
	afterWorld []func() error
}

// cleanupAfterWorld has fn run when the world's test ends (see afterWorld).
func (w *world) cleanupAfterWorld(fn func() error) { w.afterWorld = append(w.afterWorld, fn) }

// worldOptions choose how a world starts.
type worldOptions struct {
	// fromCSIOperator starts the world as a cluster that runs csi-operator today: its objects
	// written as it writes them (csioperator.Install), its workloads rolled out from the operand
	// images built here, its conditions on the ClusterCSIDriver, and this operator not deployed.
	// The switch scenario deploys it.
	fromCSIOperator bool
	// cloud, when set, is the world's OpenStack instead of the fake: a real one started by
	// env.StartRealCloud, which the world shares with others.
	cloud *realcloud.Cloud
	// lockstep, when set, keeps the world in step with the others on cloud: they run at the
	// same time and make the changes of the shared cloud together. The world has joined it
	// already; leaveLockstep takes it out.
	lockstep      *lockstep
	leaveLockstep func()
	// infraID is the cluster's infrastructure ID, its volumes' tag (default env.DefaultInfraID):
	// worlds that share a cloud at the same time take one each.
	infraID string
	// release, when set, is the directory of the operator's previous release (-previous-release):
	// the operator is deployed from its binary and install manifests, and the world's upgrade
	// scenario moves it to this tree.
	release string
}

// startWorld starts an environment of mode on real nodes and, unless o.fromCSIOperator, the
// operator against it. Where the host cannot run real nodes the test is skipped, loudly; under CI
// a skip is a failure.
func startWorld(t testing.TB, mode string, o worldOptions) *world {
	t.Helper()
	if err := realnode.Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real nodes are required under CI, but this host cannot run them: %v", err)
		}
		t.Skipf("SKIPPED: this host cannot run real nodes: %v", err)
	}
	bin, err := filepath.Abs(*binDir)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := filepath.Abs(*operatorBinary)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(operator); err != nil {
		t.Fatalf("operator binary: %v (run `make build`)", err)
	}
	envStart := time.Now()
	if o.leaveLockstep != nil {
		// A world that fails to start, or ends, holds the others up no longer.
		t.Cleanup(o.leaveLockstep)
	}
	opts := env.Options{Mode: mode, RealNodes: &env.RealNodeOptions{BinDir: bin}, RealCloud: o.cloud, InfraID: o.infraID}
	e := env.StartForTest(t, opts)
	w := &world{
		Mgmt: e.MgmtClient, Guest: e.GuestClient, Namespace: e.Namespace,
		OpenStack: e.OpenStack, Cloud: o.cloud, OpenStackURL: e.Real.OpenStackURL, Disks: e.Real.Disks,
		GuestNode: e.Real.GuestNode.Name(), GuestServerID: e.Real.GuestServerID,
		InfraID: e.InfraID(), Zone: e.Zone(), Toolbox: e.Real.Images[imagetars.Toolbox].Ref,
		EnvUp: time.Since(envStart), OperatorNamespace: e.Namespace, Env: e, operatorBinary: operator,
		lockstep: o.lockstep, leaveLockstep: o.leaveLockstep, release: o.release,
	}
	t.Cleanup(func() {
		if w.Operator != nil {
			w.Operator.Stop()
		}
		if t.Failed() {
			dumpLogs(e)
		}
		for _, fn := range slices.Backward(w.afterWorld) {
			if err := fn(); err != nil {
				t.Errorf("undoing a scenario's change to the shared cloud: %v", err)
			}
		}
	})
	if o.fromCSIOperator {
		w.installCSIOperator(t)
		return w
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.deployOperator(ctx); err != nil {
		t.Fatalf("deploying the operator: %v", err)
	}
	t.Logf("Operator pod Ready %s after the environment", time.Since(w.OperatorStarted).Round(time.Millisecond))
	return w
}

// deployOperator deploys the operator as a pod from its install manifests, this tree's or, in a
// world that starts from the previous release, that release's, and returns once the pod is Ready;
// w.Operator is the pod and w.OperatorStarted when its deployment began.
func (w *world) deployOperator(ctx context.Context) error {
	w.OperatorStarted = time.Now()
	o := env.PodOptions{Binary: w.operatorBinary, ExtraArgs: operatorTestArgs()}
	if w.release != "" {
		o.Binary, o.ManifestsRoot, o.Release = filepath.Join(w.release, "cinder-csi-operator"), w.release, previousReleaseName
	}
	op, err := w.Env.DeployOperator(ctx, o)
	if err != nil {
		return err
	}
	w.Operator = op
	return nil
}

// operatorTestArgs are the arguments the tests add to the operator's: a shorter zone re-detection.
func operatorTestArgs() []string {
	return []string{"--topology-recheck-interval=" + topologyRecheck.String()}
}

// dumpLogs prints the end of the kubelets' and containerd's logs and of every container log on
// the nodes (the operator's among them), so that a failure on CI can be read without the machine.
func dumpLogs(e *env.Env) {
	var paths []string
	for _, n := range e.Real.Nodes() {
		paths = append(paths, n.LogPath("kubelet"), n.LogPath("containerd"))
		if matches, err := filepath.Glob(filepath.Join(n.Dir(), "pod-logs", "*", "*", "*.log")); err == nil {
			paths = append(paths, matches...)
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		fmt.Fprintf(os.Stderr, "--- %s (end) ---\n%s\n", p, b)
	}
}
