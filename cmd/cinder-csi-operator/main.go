// Command cinder-csi-operator installs, configures and keeps healthy the OpenStack Cinder CSI
// driver on OpenShift: in HyperShift mode as two managers (controlplane beside the hosted control
// plane, guest against the hosted cluster), both in one process (hostedcluster) or each in its
// own (controlplane, guest); in standalone mode as both in one process. start runs hostedcluster
// or standalone from csi-operator's command line and environment (see README.md).
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `Usage: cinder-csi-operator <command> [flags]

Commands:
  start         run as cluster-storage-operator runs csi-operator: standalone, or hostedcluster
                with --guest-kubeconfig (csi-operator's flags and environment)
  hostedcluster run both managers of a hosted cluster in one process, with one leader lease
  controlplane  run the management-side manager of a hosted cluster (CSI controller, cloud-conf)
  guest         run the guest-side manager of a hosted cluster (node plugin, CSIDriver, StorageClass)
  standalone    run both managers in one process against one OpenShift cluster
  render        print, offline, the objects the operator would apply for given inputs
  version       print the version

Run "cinder-csi-operator <command> -h" for the flags of a command.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "start":
		err = runStart(args[1:], stderr)
	case "hostedcluster", "controlplane", "guest", "standalone":
		err = runManagers(operator.Mode(args[0]), args[1:], stderr)
	case "render":
		err = runRender(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "cinder-csi-operator %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// serve runs m until ctx ends: SIGTERM or SIGINT (ctrl.SetupSignalHandler), or, for start, a
// change of a --terminate-on-files file.
func serve(ctx context.Context, m *clusters.Manager) error {
	return m.Start(ctx)
}
