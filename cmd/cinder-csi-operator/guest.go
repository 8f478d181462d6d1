package main

import (
	"errors"
	"flag"
	"io"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// runGuest runs the guest-side manager of one hosted cluster. It reconciles the guest through
// --guest-kubeconfig and elects its leader on the cluster where the pod runs (--kubeconfig, the
// management cluster), like every other hosted-control-plane component.
func runGuest(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("guest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f managerFlags
	f.bind(fs, true, ":8444", ":8083")
	if err := f.parse(fs, args, ""); err != nil {
		return err
	}
	if f.guestKubeconfig == "" {
		return errors.New("--guest-kubeconfig is required")
	}
	var o operator.Guest
	var err error
	if o.Config.Images, err = operandimages.NodeImages(os.LookupEnv); err != nil {
		return err
	}
	o.Common = f.common(stderr)
	if o.Guest, err = restConfig(f.guestKubeconfig, userAgent("guest")); err != nil {
		return err
	}
	// The cluster where the pod runs: the lease, the reviews of metrics scrapers and the TLS
	// profile (the HostedControlPlane's) live there.
	if o.Mgmt, err = restConfig(f.kubeconfig, userAgent("guest")); err != nil {
		return err
	}
	o.Namespace = f.namespace
	o.LeaderConfig = o.Mgmt
	m, err := operator.NewGuest(o)
	if err != nil {
		return err
	}
	return serve(ctrl.SetupSignalHandler(), m)
}
