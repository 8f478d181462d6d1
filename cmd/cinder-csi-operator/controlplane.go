package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"golang.org/x/net/http/httpproxy"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// runControlPlane runs the management-side manager of one hosted cluster.
func runControlPlane(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f managerFlags
	f.bind(fs, true, ":8443", ":8081")
	var o operator.ControlPlane
	bindTopologyFlags(fs, &o.Config)
	if err := f.parse(fs, args, ""); err != nil {
		return err
	}
	if f.guestKubeconfig == "" {
		return errors.New("--guest-kubeconfig is required")
	}
	var err error
	if o.Config.Images, err = operandimages.ControllerImages(os.LookupEnv, true); err != nil {
		return err
	}
	o.Config.Namespace = f.namespace
	o.Config.Proxy = environmentProxy()
	if err := hostedEnvironment(os.Getenv, &o.Config); err != nil {
		return err
	}
	o.Common = f.common(stderr)
	if o.Mgmt, err = restConfig(f.kubeconfig, userAgent("controlplane")); err != nil {
		return err
	}
	if o.Guest, err = restConfig(f.guestKubeconfig, userAgent("controlplane")); err != nil {
		return err
	}
	o.LeaderConfig = o.Mgmt
	m, err := operator.NewControlPlane(o)
	if err != nil {
		return err
	}
	return serve(ctrl.SetupSignalHandler(), m)
}

// bindTopologyFlags registers the topology detection flags.
func bindTopologyFlags(fs *flag.FlagSet, cfg *controlplane.Config) {
	fs.DurationVar(&cfg.TopologyRecheckInterval, "topology-recheck-interval", controlplane.DefaultTopologyRecheckInterval,
		"How often the OpenStack availability zones are listed again to decide topology.")
	fs.DurationVar(&cfg.OpenStackTimeout, "openstack-timeout", controlplane.DefaultOpenStackTimeout,
		"Time limit of one topology detection against OpenStack.")
}

// defaultTopologyConfig is a controlplane.Config with the topology flags' defaults, for start,
// which has no such flags.
func defaultTopologyConfig() controlplane.Config {
	return controlplane.Config{
		TopologyRecheckInterval: controlplane.DefaultTopologyRecheckInterval,
		OpenStackTimeout:        controlplane.DefaultOpenStackTimeout,
	}
}

// What HyperShift's control-plane operator sets in the environment of a control-plane component
// besides the proxy and the images.
const (
	// envReleaseVersion is the release the component belongs to (the hosted cluster's release
	// version; library-go's operators read the same variable).
	envReleaseVersion = "OPERATOR_IMAGE_VERSION"
	// envRunAsUser is the UID its operands are to run as, set only on management clusters
	// without SecurityContextConstraints.
	envRunAsUser = "RUN_AS_USER"
)

// hostedEnvironment reads the release version and the operands' UID into cfg. A RUN_AS_USER that
// is not a non-negative integer is a startup error: the controller would otherwise run with a UID
// the management cluster did not ask for.
func hostedEnvironment(getenv func(string) string, cfg *controlplane.Config) error {
	cfg.ReleaseVersion = strings.TrimSpace(getenv(envReleaseVersion))
	uid := strings.TrimSpace(getenv(envRunAsUser))
	if uid == "" {
		return nil
	}
	n, err := strconv.ParseInt(uid, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%s=%q is not a user ID (a non-negative integer)", envRunAsUser, uid)
	}
	cfg.RunAsUser = &n
	return nil
}

// environmentProxy reads the proxy HyperShift's control-plane operator puts into the operator's
// environment, as net/http reads it (HTTPS_PROXY before https_proxy, and so on).
func environmentProxy() configv1.ProxyStatus {
	env := httpproxy.FromEnvironment()
	return configv1.ProxyStatus{HTTPProxy: env.HTTPProxy, HTTPSProxy: env.HTTPSProxy, NoProxy: env.NoProxy}
}
