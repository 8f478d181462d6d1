//go:build e2e

package storage

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/images"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
)

var (
	operatorBinary = flag.String("operator", "../../bin/cinder-csi-operator", "cinder-csi-operator binary")
	binDir         = flag.String("bin", "../../bin", "directory of the kubelet and operand binaries (make operand-images)")
)

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
	// Operator is the operator's pod, deployed from the install manifests.
	Operator *env.OperatorPod
	// Env is the environment, for what the fields above do not cover.
	Env *env.Env
	// OperatorNamespace is where the operator runs and holds its lease (the controller's
	// namespace in both modes).
	OperatorNamespace string
}

// startWorld starts an environment of mode on real nodes and the operator against it. Where
// the host cannot run real nodes the test is skipped, loudly; under CI a skip is a failure.
func startWorld(t testing.TB, mode string) *world {
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
	e := env.StartForTest(t, env.Options{
		Mode:           mode,
		RealNodes:      &env.RealNodeOptions{BinDir: bin},
		AppCredentials: []fakeopenstack.AppCredential{rotatedCredential},
	})
	envUp := time.Since(envStart)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	op, err := e.DeployOperator(ctx, env.PodOptions{
		Binary: operator, ExtraArgs: []string{"--topology-recheck-interval=" + topologyRecheck.String()},
	})
	if err != nil {
		dumpLogs(e)
		t.Fatalf("deploying the operator: %v", err)
	}
	t.Cleanup(func() {
		op.Stop()
		if t.Failed() {
			dumpLogs(e)
		}
	})
	t.Logf("Operator pod Ready %s after the environment", time.Since(start).Round(time.Millisecond))
	return &world{
		Mgmt: e.MgmtClient, Guest: e.GuestClient, Namespace: e.Namespace,
		OpenStack: e.OpenStack, OpenStackURL: e.Real.OpenStackURL, Disks: e.Real.Disks,
		GuestNode: e.Real.GuestNode.Name(), GuestServerID: e.Real.GuestServerID,
		InfraID: env.DefaultInfraID, Zone: e.Zone(), Toolbox: e.Real.Images[images.Toolbox].Ref,
		EnvUp: envUp, OperatorStarted: start, Operator: op, OperatorNamespace: e.Namespace, Env: e,
	}
}

// dumpLogs prints the end of the kubelets' and containerd's logs and of every container log on
// the nodes (the operator's among them), so that a failure on CI can be read without the machine.
func dumpLogs(e *env.Env) {
	var paths []string
	for _, n := range []*realnode.Node{e.Real.MgmtNode, e.Real.GuestNode} {
		paths = append(paths, n.LogPath("kubelet"), n.LogPath("containerd"))
	}
	if matches, err := filepath.Glob(filepath.Join(e.Real.Dir(), "nodes", "*", "pod-logs", "*", "*", "*.log")); err == nil {
		paths = append(paths, matches...)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
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
