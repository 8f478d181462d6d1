// Package operator assembles the operator's managers from plain options: the command builds the
// options from flags and the environment, tests build them directly and run the very same
// managers in-process against real API servers.
package operator

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

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

// Mode names which reconcilers one process runs (its subcommand), and so which clusters it
// needs.
type Mode string

const (
	// ControlPlane runs the management side of one hosted cluster alone: the CSI controller
	// beside the hosted control plane, and what it writes into the guest.
	ControlPlane Mode = "controlplane"
	// Guest runs the guest side of one hosted cluster alone: the node plugin and the guest's
	// driver objects.
	Guest Mode = "guest"
	// HostedCluster runs both sides of one hosted cluster under one leader election.
	HostedCluster Mode = "hostedcluster"
	// Standalone runs both sides against one OpenShift cluster.
	Standalone Mode = "standalone"
)

// HyperShift reports whether the managers serve a hosted cluster.
func (k Mode) HyperShift() bool { return k != Standalone }

// RunsControlPlane reports whether the controlplane reconciler runs.
func (k Mode) RunsControlPlane() bool { return k != Guest }

// RunsGuest reports whether the guest reconciler runs.
func (k Mode) RunsGuest() bool { return k != ControlPlane }

// Options are the options of every Mode. The clusters are *rest.Configs named
// ...Cluster; ControlPlane and Guest configure the two reconcilers.
type Options struct {
	Common
	// Managers is the Mode: which reconcilers run.
	Managers Mode
	// Namespace is where the operator runs: the HostedControlPlane namespace on HyperShift,
	// the driver's namespace standalone (names.GuestNamespace when empty).
	Namespace string
	// MgmtCluster is the cluster where the operator's pod runs: the management cluster on
	// HyperShift, the one cluster standalone. The lease lives there unless LeaderConfig names
	// another configuration. The Guest managers alone may go without it; their metrics endpoint
	// then serves Go's TLS defaults.
	MgmtCluster *rest.Config
	// GuestCluster is the hosted cluster as the guest reconciler reaches it, and
	// ControlPlaneGuestCluster the same cluster as the controlplane reconciler reaches it
	// (GuestCluster when nil). Two configurations let each reconciler keep its own user agent,
	// and tests their own request logs. Standalone uses MgmtCluster for both.
	GuestCluster, ControlPlaneGuestCluster *rest.Config
	ControlPlane                           controlplane.Config
	Guest                                  guest.Config
}

// New builds the manager that runs o.Managers: one controller-runtime manager, one leader
// election and one metrics endpoint, with each reconciler seeing its clusters through the
// narrowed caches it declares (controlplane.CacheOptions, guest.CacheOptions), also where two
// reconcilers see the same API server.
//
// The manager's own cluster is the one its lease and metrics reviews belong with: the
// management cluster, except for the Guest managers alone, whose own cluster is the guest (the
// lease then still lives on LeaderConfig, the management cluster, as every hosted-control-plane
// component's does). Hundreds of hosted clusters each run one HostedCluster manager, so what two
// processes would cost twice (a lease and its renewals, a Go runtime, the management cluster's
// client) is paid once.
//
// The guest is watched through two caches, as the two managers watch it. Merged into one, the
// ClusterCSIDriver and cloud-conf would be watched and held once instead of twice: about 2 MiB
// of the process's 47 (see README), for a guest manager that sees the user's configuration too
// and guest requests that no longer tell the two reconcilers apart by user agent.
func New(o Options) (*clusters.Manager, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	primary, lockID := o.MgmtCluster, names.LeaderElectionControlPlane
	if o.Managers == Guest {
		primary, lockID = o.GuestCluster, names.LeaderElectionGuest
	}
	opts, err := o.options(string(o.Managers), primary, lockID)
	if err != nil {
		return nil, err
	}
	var cpGuestCache cache.Options
	if o.Managers.RunsControlPlane() {
		opts.PrimaryCache, cpGuestCache = controlplane.CacheOptions(o.ControlPlane)
	} else {
		opts.PrimaryCache = guest.CacheOptions(o.Guest)
	}
	m, err := clusters.New(opts)
	if err != nil {
		return nil, err
	}
	var cpGuest cluster.Cluster
	if o.Managers.RunsControlPlane() {
		if cpGuest, err = m.AddCluster("controlplane-guest", o.ControlPlaneGuestCluster, cpGuestCache); err != nil {
			return nil, err
		}
		if err := controlplane.Setup(m, m, cpGuest, o.ControlPlane); err != nil {
			return nil, err
		}
	}
	if o.Managers.RunsGuest() {
		var nodes cluster.Cluster = m
		if o.Managers != Guest {
			if nodes, err = m.AddCluster("guest", o.GuestCluster, guest.CacheOptions(o.Guest)); err != nil {
				return nil, err
			}
		}
		if err := guest.Setup(m, nodes, o.Guest); err != nil {
			return nil, err
		}
	}
	if err := o.followProfile(m, cpGuest); err != nil {
		return nil, err
	}
	return m, nil
}

// complete checks that o has the clusters its Managers need, fills the ones that default to
// another, and passes the mode, namespace and log level on to the reconcilers' configurations.
func (o *Options) complete() error {
	switch o.Managers {
	case ControlPlane, HostedCluster:
		if o.MgmtCluster == nil || (o.GuestCluster == nil && o.ControlPlaneGuestCluster == nil) {
			return fmt.Errorf("%s needs the management and the guest cluster", o.Managers)
		}
		if o.ControlPlaneGuestCluster == nil {
			o.ControlPlaneGuestCluster = o.GuestCluster
		}
		if o.GuestCluster == nil {
			o.GuestCluster = o.ControlPlaneGuestCluster
		}
	case Guest:
		if o.GuestCluster == nil {
			return errors.New("guest needs the guest cluster")
		}
	case Standalone:
		if o.MgmtCluster == nil {
			return errors.New("standalone needs a cluster")
		}
		o.GuestCluster, o.ControlPlaneGuestCluster = o.MgmtCluster, o.MgmtCluster
		if o.Namespace == "" {
			o.Namespace = names.GuestNamespace
		}
	default:
		return fmt.Errorf("unknown managers %q", o.Managers)
	}
	hyperShift := o.Managers.HyperShift()
	o.ControlPlane.HyperShift, o.Guest.HyperShift = hyperShift, hyperShift
	o.ControlPlane.LogLevel, o.Guest.LogLevel = o.LogLevel, o.LogLevel
	o.ControlPlane.Namespace = o.Namespace
	return nil
}

// options are the manager's options from c: its name, own cluster and lease name.
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

// followProfile makes the metrics endpoint follow the cluster's TLS security profile, read from
// an informer a reconciler already has where one runs; nothing when the endpoint is off or follows
// no profile. cpGuest is the controlplane reconciler's view of the guest.
func (o Options) followProfile(m *clusters.Manager, cpGuest cluster.Cluster) error {
	if o.TLSProfile == nil || o.MetricsBindAddress == "0" {
		return nil
	}
	var cc cache.Cache
	src := tlsprofile.HostedControlPlaneSource(o.Namespace)
	switch {
	case !o.Managers.HyperShift():
		// The APIServer's informer is the controlplane reconciler's own, selected by name.
		cc, src = cpGuest.GetCache(), tlsprofile.APIServerSource(names.APIServerName)
	case o.Managers.RunsControlPlane():
		// The HostedControlPlane's informer is the controlplane reconciler's own.
		cc = m.GetCache()
	case o.MgmtCluster != nil:
		// The guest manager alone: the profile lives with the HostedControlPlane on the
		// management cluster, read through a cache of that one kind in that one namespace.
		hcps, err := m.AddCluster("tlsprofile", o.MgmtCluster, cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}})
		if err != nil {
			return err
		}
		cc = hcps.GetCache()
	default:
		return nil
	}
	return m.Add(&tlsprofile.Follower{Cache: cc, Source: src, Live: o.TLSProfile, Log: o.Logger.WithName("tlsprofile")})
}
