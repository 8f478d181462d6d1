// Package operator assembles the operator's managers from plain options: the command builds the
// options from flags and the environment, tests build them directly and run the very same
// managers in-process against real API servers.
package operator

import (
	"errors"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane"
	"github.com/cinder-csi-operator/cinder-csi-operator/guest"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Common are the options every manager has.
type Common struct {
	Logger   logr.Logger
	LogLevel *loglevel.Live
	// LeaderElection elects a leader in LeaderElectionNamespace of the cluster LeaderConfig
	// points at (the cluster where the operator pod runs).
	LeaderElection          bool
	LeaderConfig            *rest.Config
	LeaderElectionNamespace string
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	// SkipControllerNameValidation lets tests run several managers in one process.
	SkipControllerNameValidation bool
}

// ControlPlane are the options of the HyperShift controlplane manager.
type ControlPlane struct {
	Common
	Mgmt, Guest *rest.Config
	Config      controlplane.Config
}

// Guest are the options of the HyperShift guest manager.
type Guest struct {
	Common
	Guest  *rest.Config
	Config guest.Config
}

// Standalone are the options of the standalone operator: both managers against one cluster.
type Standalone struct {
	Common
	Cluster      *rest.Config
	ControlPlane controlplane.Config
	Guest        guest.Config
}

func (c Common) options(name string, primary *rest.Config, lockID string) (clusters.Options, error) {
	scheme, err := clusters.NewScheme()
	if err != nil {
		return clusters.Options{}, err
	}
	leader := c.LeaderConfig
	if leader == nil {
		leader = primary
	}
	return clusters.Options{
		Name:                         name,
		Scheme:                       scheme,
		Logger:                       c.Logger.WithName(name),
		Primary:                      primary,
		LeaderElection:               c.LeaderElection,
		LeaderElectionConfig:         leader,
		LeaderElectionNamespace:      c.LeaderElectionNamespace,
		LeaderElectionID:             lockID,
		MetricsBindAddress:           c.MetricsBindAddress,
		HealthProbeBindAddress:       c.HealthProbeBindAddress,
		SkipControllerNameValidation: c.SkipControllerNameValidation,
	}, nil
}

// NewControlPlane builds the controlplane manager: primary cluster management (the HostedControlPlane
// namespace only), second cluster the guest.
func NewControlPlane(o ControlPlane) (*clusters.Manager, error) {
	if o.Mgmt == nil || o.Guest == nil {
		return nil, errors.New("the controlplane manager needs the management and the guest cluster")
	}
	o.Config.HyperShift = true
	o.Config.LogLevel = o.LogLevel
	opts, err := o.options("controlplane", o.Mgmt, names.LeaderElectionControlPlane)
	if err != nil {
		return nil, err
	}
	opts.Secondary = o.Guest
	opts.PrimaryCache, opts.SecondaryCache = controlplane.CacheOptions(o.Config)
	m, err := clusters.New(opts)
	if err != nil {
		return nil, err
	}
	if err := controlplane.Setup(m, m, m.Secondary, o.Config); err != nil {
		return nil, err
	}
	return m, nil
}

// NewGuest builds the guest manager: primary cluster the guest; its leader lease lives on the
// cluster LeaderConfig points at (the management cluster, where the pod runs).
func NewGuest(o Guest) (*clusters.Manager, error) {
	if o.Guest == nil {
		return nil, errors.New("the guest manager needs the guest cluster")
	}
	o.Config.HyperShift = true
	o.Config.LogLevel = o.LogLevel
	opts, err := o.options("guest", o.Guest, names.LeaderElectionGuest)
	if err != nil {
		return nil, err
	}
	opts.PrimaryCache = guest.CacheOptions(o.Config)
	m, err := clusters.New(opts)
	if err != nil {
		return nil, err
	}
	if err := guest.Setup(m, m, o.Config); err != nil {
		return nil, err
	}
	return m, nil
}

// NewStandalone builds the standalone operator: one manager and one leader election on the one
// cluster, with each reconciler seeing it through the same narrowed caches it has on HyperShift.
func NewStandalone(o Standalone) (*clusters.Manager, error) {
	if o.Cluster == nil {
		return nil, errors.New("the standalone operator needs a cluster")
	}
	o.ControlPlane.HyperShift, o.Guest.HyperShift = false, false
	o.ControlPlane.LogLevel, o.Guest.LogLevel = o.LogLevel, o.LogLevel
	if o.ControlPlane.Namespace == "" {
		o.ControlPlane.Namespace = names.GuestNamespace
	}
	opts, err := o.options("standalone", o.Cluster, names.LeaderElectionControlPlane)
	if err != nil {
		return nil, err
	}
	cpMgmt, cpGuest := controlplane.CacheOptions(o.ControlPlane)
	opts.PrimaryCache = cpMgmt
	m, err := clusters.New(opts)
	if err != nil {
		return nil, err
	}
	cpGuestCluster, err := m.AddCluster("controlplane-guest", o.Cluster, cpGuest)
	if err != nil {
		return nil, err
	}
	nodes, err := m.AddCluster("guest", o.Cluster, guest.CacheOptions(o.Guest))
	if err != nil {
		return nil, err
	}
	if err := controlplane.Setup(m, m, cpGuestCluster, o.ControlPlane); err != nil {
		return nil, err
	}
	if err := guest.Setup(m, nodes, o.Guest); err != nil {
		return nil, err
	}
	return m, nil
}
