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
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// runManagers runs the command of one kind of managers (hostedcluster, controlplane, guest,
// standalone) from its flags and the process's environment.
//
// The guest manager alone listens on ports of its own, so that it can share a pod with the
// controlplane manager. It reconciles the guest through --guest-kubeconfig and elects its leader
// on the cluster where the pod runs (--kubeconfig, the management cluster), like every other
// hosted-control-plane component.
func runManagers(kind operator.Mode, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(string(kind), flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f managerFlags
	metricsAddr, probeAddr := ":8443", ":8081"
	if kind == operator.Guest {
		metricsAddr, probeAddr = ":8444", ":8083"
	}
	f.bind(fs, kind.HyperShift(), metricsAddr, probeAddr)
	o := operator.Options{Managers: kind}
	if kind.RunsControlPlane() {
		bindTopologyFlags(fs, &o.ControlPlane)
	}
	defaultNamespace := ""
	if !kind.HyperShift() {
		defaultNamespace = names.GuestNamespace
	}
	if err := f.parse(fs, args, defaultNamespace); err != nil {
		return err
	}
	m, err := newManagers(&f, o, stderr)
	if err != nil {
		return err
	}
	return serve(ctrl.SetupSignalHandler(), m)
}

// newManagers builds the managers o.Managers names from parsed flags, their images and, on
// HyperShift, the hosted environment from the process's environment, and o's topology
// settings. Each reconciler reaches its clusters under its own user agent, as the split
// processes do, so that the API servers' audit logs tell their requests apart.
func newManagers(f *managerFlags, o operator.Options, stderr io.Writer) (*clusters.Manager, error) {
	kind := o.Managers
	if kind.HyperShift() && f.guestKubeconfig == "" {
		return nil, errors.New("--guest-kubeconfig is required")
	}
	// Both sets are checked before anything starts, so one message names every missing image.
	var ctrlErr, nodeErr error
	if kind.RunsControlPlane() {
		o.ControlPlane.Images, ctrlErr = operandimages.ControllerImages(os.LookupEnv, kind.HyperShift())
	}
	if kind.RunsGuest() {
		o.Guest.Images, nodeErr = operandimages.NodeImages(os.LookupEnv)
	}
	if err := errors.Join(ctrlErr, nodeErr); err != nil {
		return nil, err
	}
	o.Namespace = f.namespace
	if kind.HyperShift() && kind.RunsControlPlane() {
		o.ControlPlane.Proxy = environmentProxy()
		if err := hostedEnvironment(os.Getenv, &o.ControlPlane); err != nil {
			return nil, err
		}
	}
	o.Common = f.common(stderr)
	agent := func(reconciler string) string {
		if !kind.HyperShift() {
			return userAgent(string(operator.Standalone))
		}
		return userAgent(reconciler)
	}
	// The cluster where the pod runs: the controlplane reconciler's, else the guest manager's
	// lease, metrics reviews and TLS profile.
	mgmtAgent := agent(string(operator.ControlPlane))
	if !kind.RunsControlPlane() {
		mgmtAgent = agent(string(operator.Guest))
	}
	var err error
	if o.MgmtCluster, err = restConfig(f.kubeconfig, mgmtAgent); err != nil {
		return nil, err
	}
	if kind.HyperShift() && kind.RunsControlPlane() {
		if o.ControlPlaneGuestCluster, err = restConfig(f.guestKubeconfig, agent(string(operator.ControlPlane))); err != nil {
			return nil, err
		}
	}
	if kind.HyperShift() && kind.RunsGuest() {
		if o.GuestCluster, err = restConfig(f.guestKubeconfig, agent(string(operator.Guest))); err != nil {
			return nil, err
		}
	}
	o.LeaderConfig = o.MgmtCluster
	return operator.New(o)
}

// bindTopologyFlags registers the topology detection flags.
func bindTopologyFlags(fs *flag.FlagSet, cfg *controlplane.Config) {
	fs.DurationVar(&cfg.TopologyRecheckInterval, "topology-recheck-interval", controlplane.DefaultTopologyRecheckInterval,
		"How often the OpenStack availability zones are listed again to decide topology.")
	fs.DurationVar(&cfg.OpenStackTimeout, "openstack-timeout", controlplane.DefaultOpenStackTimeout,
		"Time limit of one topology detection against OpenStack.")
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
