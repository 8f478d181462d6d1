package main

import (
	"flag"
	"io"
	"os"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/images"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
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
	var err error
	if o.ControlPlane.Images, err = images.ControllerImages(os.LookupEnv, false); err != nil {
		return err
	}
	if o.Guest.Images, err = images.NodeImages(os.LookupEnv); err != nil {
		return err
	}
	o.ControlPlane.Namespace = f.namespace
	o.Common = f.common(stderr)
	if o.Cluster, err = restConfig(f.kubeconfig, userAgent("standalone")); err != nil {
		return err
	}
	m, err := operator.NewStandalone(o)
	if err != nil {
		return err
	}
	return start(m)
}
