package main

import (
	"errors"
	"flag"
	"io"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// runHostedCluster runs both managers of one hosted cluster in one process: the controlplane
// reconciler against the management cluster (--kubeconfig) and the guest (--guest-kubeconfig),
// the guest reconciler against the guest, under one leader election on the management cluster.
// It takes the union of the controlplane and guest commands' flags and the union of their
// images.
func runHostedCluster(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("hostedcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f managerFlags
	f.bind(fs, true, ":8443", ":8081")
	var o operator.HostedCluster
	bindTopologyFlags(fs, &o.ControlPlaneConfig)
	if err := f.parse(fs, args, ""); err != nil {
		return err
	}
	m, err := newHostedCluster(&f, o, stderr)
	if err != nil {
		return err
	}
	return serve(ctrl.SetupSignalHandler(), m)
}

// newHostedCluster builds the hosted-cluster operator from parsed flags, its images and hosted
// environment from the process's environment, and o's topology settings.
func newHostedCluster(f *managerFlags, o operator.HostedCluster, stderr io.Writer) (*clusters.Manager, error) {
	if f.guestKubeconfig == "" {
		return nil, errors.New("--guest-kubeconfig is required")
	}
	var err error
	// Both sets are checked before anything starts, so one message names every missing image.
	ctrlImages, ctrlErr := operandimages.ControllerImages(os.LookupEnv, true)
	nodeImages, nodeErr := operandimages.NodeImages(os.LookupEnv)
	if err := errors.Join(ctrlErr, nodeErr); err != nil {
		return nil, err
	}
	o.ControlPlaneConfig.Images, o.GuestConfig.Images = ctrlImages, nodeImages
	o.ControlPlaneConfig.Namespace = f.namespace
	o.ControlPlaneConfig.Proxy = environmentProxy()
	if err := hostedEnvironment(os.Getenv, &o.ControlPlaneConfig); err != nil {
		return nil, err
	}
	o.Common = f.common(stderr)
	if o.Mgmt, err = restConfig(f.kubeconfig, userAgent("controlplane")); err != nil {
		return nil, err
	}
	// Each reconciler reaches the guest under its own user agent, as the split processes do, so
	// the guest API server's audit log tells their requests apart.
	if o.ControlPlaneGuest, err = restConfig(f.guestKubeconfig, userAgent("controlplane")); err != nil {
		return nil, err
	}
	if o.Guest, err = restConfig(f.guestKubeconfig, userAgent("guest")); err != nil {
		return nil, err
	}
	o.LeaderConfig = o.Mgmt
	return operator.NewHostedCluster(o)
}
