package main

import (
	"flag"
	"io"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// runStandalone runs both managers in one process against one OpenShift cluster.
func runStandalone(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f managerFlags
	f.bind(fs, false, ":8443", ":8081")
	var o operator.Standalone
	bindTopologyFlags(fs, &o.ControlPlane)
	if err := f.parse(fs, args, names.GuestNamespace); err != nil {
		return err
	}
	m, err := newStandalone(&f, o, stderr)
	if err != nil {
		return err
	}
	return serve(ctrl.SetupSignalHandler(), m)
}

// newStandalone builds the standalone operator from parsed flags, its images from the process's
// environment, and o's topology settings.
func newStandalone(f *managerFlags, o operator.Standalone, stderr io.Writer) (*clusters.Manager, error) {
	var err error
	if o.ControlPlane.Images, err = operandimages.ControllerImages(os.LookupEnv, false); err != nil {
		return nil, err
	}
	if o.Guest.Images, err = operandimages.NodeImages(os.LookupEnv); err != nil {
		return nil, err
	}
	o.ControlPlane.Namespace = f.namespace
	o.Common = f.common(stderr)
	if o.Cluster, err = restConfig(f.kubeconfig, userAgent("standalone")); err != nil {
		return nil, err
	}
	return operator.NewStandalone(o)
}
