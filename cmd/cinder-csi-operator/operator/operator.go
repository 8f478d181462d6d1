// Package operator assembles the operator's managers from plain options: the command builds the
// options from flags and the environment, tests build them directly and run the very same
// managers in-process against real API servers.
package operator

import (
	"crypto/tls"
	"errors"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane"
	"github.com/cinder-csi-operator/cinder-csi-operator/guest"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metricsauth"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
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
	// LeaderElectionID, when set, replaces the lease name each manager has of its own
	// (names.LeaderElectionControlPlane, names.LeaderElectionGuest).
	LeaderElectionID string
	// LeaderElectionIdentity holds the leases; see clusters.Options. The controlplane and
	// guest managers of one pod may share it: they hold different leases.
	LeaderElectionIdentity string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// MetricsCertDir holds the metrics endpoint's serving certificate (tls.crt, tls.key),
	// served from the first handshake after the files appear or change; until then, and when
	// empty, the endpoint serves a self-signed certificate (see metricsauth.ServingCert).
	MetricsCertDir string
	// TLSProfile, when set, is the cluster's TLS security profile for the metrics endpoint: the
	// manager follows the cluster's profile into it (a watch on the APIServer named cluster
	// standalone, on the HostedControlPlane on HyperShift), and every new connection is served
	// at the profile then in force, without a restart. Nil serves Go's defaults.
	TLSProfile *tlsprofile.Live
	// PprofBindAddress is where /debug/pprof/ listens; empty or "0" disables it.
	PprofBindAddress string
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
	// Mgmt is the management cluster and Namespace the HostedControlPlane namespace, where the
	// manager reads the TLS security profile of its metrics endpoint; without Mgmt the endpoint
	// serves Go's defaults.
	Mgmt      *rest.Config
	Namespace string
}

// HostedCluster are the options of the HyperShift operator in one process: both managers of one
// hosted cluster, under one leader election on the management cluster.
type HostedCluster struct {
	Common
	// Mgmt is the management cluster: the controlplane reconciler's HostedControlPlane
	// namespace, and the lease unless LeaderConfig names another configuration.
	Mgmt *rest.Config
	// Guest is the hosted cluster as the guest reconciler reaches it; ControlPlaneGuest is the
	// same cluster as the controlplane reconciler reaches it, Guest when nil. Two configurations
	// let each reconciler keep its own user agent (and tests their own request logs).
	Guest, ControlPlaneGuest *rest.Config
	ControlPlaneConfig       controlplane.Config
	GuestConfig              guest.Config
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
	if c.LeaderElectionID != "" {
		lockID = c.LeaderElectionID
	}
	// The certificate is chosen at every handshake rather than once at the start, so that a
	// serving-cert Secret that service-ca writes after the pod started is served without a
	// restart (see metricsauth.ServingCert); with GetCertificate set, controller-runtime
	// neither watches CertDir nor makes its own self-signed certificate.
	certs := metricsauth.NewServingCert(c.MetricsCertDir, c.Logger.WithName(name).WithName("metrics"))
	profile := c.TLSProfile
	metrics := clusters.MetricsOptions{CertDir: c.MetricsCertDir, Auth: leader, TLS: func(cfg *tls.Config) {
		cfg.GetCertificate = certs.GetCertificate
		if profile != nil {
			// The profile's per-connection copy of cfg keeps GetCertificate.
			profile.ServerConfig(cfg)
		}
	}}
	return clusters.Options{
		Name:                         name,
		Scheme:                       scheme,
		Logger:                       c.Logger.WithName(name),
		Primary:                      primary,
		LeaderElection:               c.LeaderElection,
		LeaderElectionConfig:         leader,
		LeaderElectionNamespace:      c.LeaderElectionNamespace,
		LeaderElectionID:             lockID,
		LeaderElectionIdentity:       c.LeaderElectionIdentity,
		MetricsBindAddress:           c.MetricsBindAddress,
		HealthProbeBindAddress:       c.HealthProbeBindAddress,
		Metrics:                      metrics,
		PprofBindAddress:             c.PprofBindAddress,
		SkipControllerNameValidation: c.SkipControllerNameValidation,
	}, nil
}

// followProfile makes m follow the cluster's TLS security profile from src, read through c, into
// the metrics endpoint; nothing when the endpoint is off or follows no profile.
func (c Common) followProfile(m *clusters.Manager, cc cache.Cache, src tlsprofile.Source) error {
	if c.TLSProfile == nil || c.MetricsBindAddress == "0" {
		return nil
	}
	return m.Add(&tlsprofile.Follower{Cache: cc, Source: src, Live: c.TLSProfile, Log: c.Logger.WithName("tlsprofile")})
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
	if err := o.followProfile(m, m.GetCache(), tlsprofile.HostedControlPlaneSource(o.Config.Namespace)); err != nil {
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
	if o.Mgmt != nil && o.TLSProfile != nil && o.MetricsBindAddress != "0" {
		// The profile lives with the HostedControlPlane on the management cluster: a cache of
		// that one kind in that one namespace.
		hcps, err := m.AddCluster("tlsprofile", o.Mgmt, cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}})
		if err != nil {
			return nil, err
		}
		if err := o.followProfile(m, hcps.GetCache(), tlsprofile.HostedControlPlaneSource(o.Namespace)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewHostedCluster builds the HyperShift operator of one hosted cluster as one manager: one
// process, one leader election (the controlplane's lease on the management cluster, as
// NewControlPlane holds it), with each reconciler seeing its clusters through the same narrowed
// caches it has in NewControlPlane and NewGuest. Hundreds of hosted clusters each run one, so
// what two processes would cost twice (a lease and its renewals, a Go runtime, the shared
// libraries and the management cluster's client) is paid once.
//
// The guest is watched through two caches, as the two managers watch it. Merged into one, the
// ClusterCSIDriver and cloud-conf would be watched and held once instead of twice: about 2 MiB
// of the process's 47 (see README), for a guest manager that sees the user's configuration too
// and guest requests that no longer tell the two reconcilers apart by user agent.
func NewHostedCluster(o HostedCluster) (*clusters.Manager, error) {
	if o.Mgmt == nil || o.Guest == nil {
		return nil, errors.New("the hosted cluster operator needs the management and the guest cluster")
	}
	cpGuest := o.ControlPlaneGuest
	if cpGuest == nil {
		cpGuest = o.Guest
	}
	o.ControlPlaneConfig.HyperShift, o.GuestConfig.HyperShift = true, true
	o.ControlPlaneConfig.LogLevel, o.GuestConfig.LogLevel = o.LogLevel, o.LogLevel
	opts, err := o.options("hostedcluster", o.Mgmt, names.LeaderElectionControlPlane)
	if err != nil {
		return nil, err
	}
	cpMgmtCache, cpGuestCache := controlplane.CacheOptions(o.ControlPlaneConfig)
	opts.PrimaryCache = cpMgmtCache
	m, err := clusters.New(opts)
	if err != nil {
		return nil, err
	}
	cpGuestCluster, err := m.AddCluster("controlplane-guest", cpGuest, cpGuestCache)
	if err != nil {
		return nil, err
	}
	guestCluster, err := m.AddCluster("guest", o.Guest, guest.CacheOptions(o.GuestConfig))
	if err != nil {
		return nil, err
	}
	if err := controlplane.Setup(m, m, cpGuestCluster, o.ControlPlaneConfig); err != nil {
		return nil, err
	}
	if err := guest.Setup(m, guestCluster, o.GuestConfig); err != nil {
		return nil, err
	}
	// The HostedControlPlane's informer is the controlplane reconciler's own.
	if err := o.followProfile(m, m.GetCache(), tlsprofile.HostedControlPlaneSource(o.ControlPlaneConfig.Namespace)); err != nil {
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
	// The APIServer's informer is the controlplane reconciler's own, selected by name.
	if err := o.followProfile(m, cpGuestCluster.GetCache(), tlsprofile.APIServerSource(names.APIServerName)); err != nil {
		return nil, err
	}
	return m, nil
}
