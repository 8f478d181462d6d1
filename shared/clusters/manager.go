// Package clusters builds the operator's managers: a controller-runtime manager for the cluster
// where its lease and metrics belong, plus a cluster.Cluster with its own narrowed cache for each
// other view a reconciler needs (the guest beside the management cluster). It is the one place where clients, caches, leader
// election, metrics and health endpoints are wired, so the controlplane and guest packages only
// add reconcilers.
package clusters

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metricsauth"
)

// Leader election timings of OpenShift operators (library-go's defaults, also passed to the CSI
// sidecars): about two lease renewals a minute instead of controller-runtime's one every two
// seconds. Hundreds of hosted clusters each run these managers against one management cluster,
// so the renewal rate is the operator's whole write load at rest.
const (
	LeaseDuration = 137 * time.Second
	RenewDeadline = 107 * time.Second
	RetryPeriod   = 26 * time.Second
)

// Options configure one manager.
type Options struct {
	// Name names the manager in logs ("controlplane", "guest", "standalone").
	Name   string
	Scheme *runtime.Scheme
	Logger logr.Logger

	// Primary is the cluster whose objects the manager mainly reconciles; the manager's own
	// client and cache talk to it.
	Primary      *rest.Config
	PrimaryCache cache.Options

	// LeaderElection turns leader election on. The lock lives in LeaderElectionNamespace of
	// the cluster LeaderElectionConfig points at: the cluster where the operator pod runs
	// (the management cluster in HyperShift mode, also for the guest manager). It defaults
	// to Primary.
	LeaderElection          bool
	LeaderElectionConfig    *rest.Config
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaderElectionIdentity is who holds the lease while this manager leads: stable across
	// restarts of the same pod (its name), so that a restarted container takes its own lease
	// back at once instead of waiting LeaseDuration for it. Empty means the host name plus a
	// random suffix, new at every start.
	LeaderElectionIdentity string

	// MetricsBindAddress and HealthProbeBindAddress are where /metrics and /healthz, /readyz
	// listen; "0" disables them. The probes are plain HTTP, for the kubelet; /metrics is
	// HTTPS with authentication and authorization (see Metrics).
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// Metrics secures /metrics.
	Metrics MetricsOptions
	// PprofBindAddress is where Go's /debug/pprof/ profiles listen; empty or "0" disables them.
	PprofBindAddress string

	// SkipControllerNameValidation lets tests run several managers with the same
	// controllers in one process.
	SkipControllerNameValidation bool
}

// MetricsOptions secure the metrics endpoint as OpenShift's operators secure theirs: HTTPS only,
// and a scrape is served only to a caller whose bearer token the API server accepts
// (TokenReview) and who may get the non-resource URL /metrics there (SubjectAccessReview), such
// as Prometheus' ServiceAccount. Anyone else gets 401 or 403.
type MetricsOptions struct {
	// CertDir holds the serving certificate, tls.crt and tls.key (the Secret that OpenShift's
	// service-ca issues for the metrics Service), for controller-runtime's own loading, which
	// happens only when TLS sets no GetCertificate. The operator's commands set one
	// (metricsauth.ServingCert), which serves the files once they appear and a self-signed
	// certificate until then.
	CertDir string
	// TLS sets the minimum version and cipher suites; tlsprofile.Live.ServerConfig makes them
	// follow the cluster's profile. Nil leaves Go's defaults.
	TLS func(*tls.Config)
	// Auth is the cluster whose API server reviews scrapers' tokens and access: the cluster
	// where the operator's pod runs and Prometheus with it. Nil means Primary.
	Auth *rest.Config
}

// Manager is a controller-runtime manager plus the clusters added to it (AddCluster).
type Manager struct {
	manager.Manager
	// clusters are the added clusters, by name, in the order they were added.
	clusters []namedCluster
	// leaderEvents records the leader-election Events; nil without leader election.
	leaderEvents *leaderEvents
}

// New builds a manager from o. Nothing runs until Start, but the probes (see probes), which
// answer from the start of New.
func New(o Options) (_ *Manager, err error) {
	if o.Primary == nil {
		return nil, errors.New("no primary cluster configuration")
	}
	if o.LeaderElection && (o.LeaderElectionID == "" || o.LeaderElectionNamespace == "") {
		return nil, errors.New("leader election needs an ID and a namespace")
	}
	leaderConfig := o.LeaderElectionConfig
	if leaderConfig == nil {
		leaderConfig = o.Primary
	}
	// Reads wait for an API server that is down rather than fail (see awaitAPIServer), so that
	// the informers watch again as soon as it is back.
	log := o.Logger.WithName("apiserver")
	primary := awaitAPIServer(o.Primary, log, false)

	var probe *probes
	if o.HealthProbeBindAddress != "" && o.HealthProbeBindAddress != "0" {
		if probe, err = startProbes(o.HealthProbeBindAddress); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				probe.close()
			}
		}()
	}

	metrics, err := metricsOptions(o)
	if err != nil {
		return nil, err
	}
	opts := manager.Options{
		Scheme:                        o.Scheme,
		Logger:                        o.Logger,
		Cache:                         o.PrimaryCache,
		LeaderElection:                o.LeaderElection,
		LeaderElectionConfig:          leaderConfig,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(LeaseDuration),
		RenewDeadline:                 ptr.To(RenewDeadline),
		RetryPeriod:                   ptr.To(RetryPeriod),
		Metrics:                       metrics,
		// The probes are served by probe, from before the manager is built.
		HealthProbeBindAddress: "0",
		PprofBindAddress:       o.PprofBindAddress,
		Controller:             config.Controller{SkipNameValidation: ptr.To(o.SkipControllerNameValidation)},
	}
	m := &Manager{}
	if o.LeaderElection {
		// Whatever the field's documentation says, controller-runtime still takes the
		// timings, the release on cancel and the lock's name (for its metrics) from the
		// options above; only the lock itself is ours.
		// The lease's reads wait for its API server only while the manager runs, never when
		// the lease is released at shutdown.
		lock, events, err := newLeaderLock(awaitAPIServer(leaderConfig, log.WithValues("client", "leader-election"), true), o.Scheme, o)
		if err != nil {
			return nil, fmt.Errorf("building the %s manager's leader election: %w", o.Name, err)
		}
		opts.LeaderElectionResourceLockInterface, m.leaderEvents = lock, events
	}
	mgr, err := manager.New(primary, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the %s manager: %w", o.Name, err)
	}
	m.Manager = mgr

	if probe != nil {
		if err := mgr.Add(probe); err != nil {
			return nil, fmt.Errorf("adding the %s manager's probes: %w", o.Name, err)
		}
		probe.setReady(m.cachesSynced)
	}
	return m, nil
}

// metricsOptions returns the metrics server's options: HTTPS only, the token and access of every
// scrape reviewed by the API server of o.Metrics.Auth (see package metricsauth).
func metricsOptions(o Options) (metricsserver.Options, error) {
	m := o.Metrics
	auth := m.Auth
	if auth == nil {
		auth = o.Primary
	}
	// The reviews go to the cluster where the pod runs, whatever the manager's primary
	// cluster is (the guest manager's is the hosted cluster).
	reviewer, err := metricsauth.New(auth)
	if err != nil {
		return metricsserver.Options{}, fmt.Errorf("building the %s manager's metrics reviews: %w", o.Name, err)
	}
	return metricsserver.Options{
		BindAddress:   o.MetricsBindAddress,
		SecureServing: true,
		CertDir:       m.CertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			// HTTP/1.1 only: a scrape gains nothing from HTTP/2, which brings its own attack
			// surface (the rapid-reset and CONTINUATION floods) and its own cipher demands.
			c.NextProtos = []string{"http/1.1"}
			if m.TLS != nil {
				m.TLS(c)
			}
		}},
		FilterProvider: reviewer.FilterProvider(),
	}, nil
}

// Start runs the manager until ctx is done and, with leader election, records the
// leader-election Events meanwhile. It returns once the lease is released.
func (m *Manager) Start(ctx context.Context) error {
	if m.leaderEvents != nil {
		defer m.leaderEvents.start()()
	}
	return m.Manager.Start(withManagerContext(ctx))
}

// cachesSynced reports ready once the caches of every cluster have synced, so a rollout of the
// operator is not declared done while it still cannot see one of the two API servers.
func (m *Manager) cachesSynced(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), time.Second)
	defer cancel()
	if !m.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the primary cluster's cache has not synced")
	}
	for _, c := range m.clusters {
		if !c.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("the cache of cluster %s has not synced", c.name)
		}
	}
	return nil
}

// AddCluster adds another cluster.Cluster with its own cache to the manager: a second API server
// (the guest beside the management cluster), or a second view of the same one, so that each
// reconciler sees the clusters through the narrowed caches it declares, all under one leader
// election.
func (m *Manager) AddCluster(name string, cfg *rest.Config, opts cache.Options) (cluster.Cluster, error) {
	c, err := cluster.New(awaitAPIServer(cfg, m.GetLogger().WithName("apiserver"), false), func(co *cluster.Options) {
		co.Scheme = m.GetScheme()
		co.Logger = m.GetLogger().WithName(name)
		co.Cache = opts
	})
	if err != nil {
		return nil, fmt.Errorf("creating cluster %s: %w", name, err)
	}
	if err := m.Add(c); err != nil {
		return nil, fmt.Errorf("adding cluster %s: %w", name, err)
	}
	m.clusters = append(m.clusters, namedCluster{Cluster: c, name: name})
	return c, nil
}

// namedCluster is a cluster added to a Manager, with the name its logs and readiness use.
type namedCluster struct {
	cluster.Cluster
	name string
}
