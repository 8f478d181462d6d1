//go:build e2e

// Package suite is the end-to-end suite. It takes a management and a guest kubeconfig (flags or
// MGMT_KUBECONFIG, GUEST_KUBECONFIG, HCP_NAMESPACE) and checks a deployed operator there, for
// example on kind clusters; without them it starts local clusters from upstream binaries and a
// fake OpenStack, and runs the cinder-csi-operator binary against them as processes.
package suite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

var (
	mgmtKubeconfig  = flag.String("mgmt-kubeconfig", os.Getenv("MGMT_KUBECONFIG"), "management cluster kubeconfig; empty starts local clusters")
	guestKubeconfig = flag.String("guest-kubeconfig", os.Getenv("GUEST_KUBECONFIG"), "guest cluster kubeconfig")
	hcpNamespace    = flag.String("hcp-namespace", os.Getenv("HCP_NAMESPACE"), "HostedControlPlane namespace on the management cluster")
	operatorBinary  = flag.String("operator", "../../bin/cinder-csi-operator", "cinder-csi-operator binary for local runs")
)

// target is what the tests act on.
type target struct {
	Mgmt, Guest client.Client
	Namespace   string
	// Local is set when the suite started the clusters itself.
	Local *env.Env
}

var tgt target

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	scheme, err := clusters.NewScheme()
	if err != nil {
		return 0, err
	}
	if *mgmtKubeconfig != "" {
		if *guestKubeconfig == "" || *hcpNamespace == "" {
			return 0, fmt.Errorf("-mgmt-kubeconfig needs -guest-kubeconfig and -hcp-namespace")
		}
		for _, kc := range []struct {
			path string
			c    *client.Client
		}{{*mgmtKubeconfig, &tgt.Mgmt}, {*guestKubeconfig, &tgt.Guest}} {
			cfg, err := clientcmd.BuildConfigFromFlags("", kc.path)
			if err != nil {
				return 0, err
			}
			if *kc.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
				return 0, err
			}
		}
		tgt.Namespace = *hcpNamespace
		return m.Run(), nil
	}

	binary, err := filepath.Abs(*operatorBinary)
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(binary); err != nil {
		return 0, fmt.Errorf("operator binary %s: %w (run `make build`)", binary, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := env.Start(ctx, env.Options{Mode: env.ModeHyperShift})
	if err != nil {
		return 0, err
	}
	defer e.Stop()
	logPath := e.Path("operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer func() { _ = logFile.Close() }()
	procs, err := e.StartOperatorProcesses(env.ProcessOptions{Binary: binary, Output: logFile})
	if err != nil {
		return 0, err
	}
	defer func() { _ = procs.Stop() }()
	tgt = target{Mgmt: e.MgmtClient, Guest: e.GuestClient, Namespace: e.Namespace, Local: e}
	code := m.Run()
	if code != 0 {
		if b, err := os.ReadFile(logPath); err == nil {
			fmt.Fprintf(os.Stderr, "--- operator log (last 4 KiB) ---\n%s\n", tail(b, 4096))
		}
	}
	return code, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
