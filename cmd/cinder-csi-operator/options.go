package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
)

// serviceAccountNamespaceFile is where Kubernetes mounts the pod's namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// managerFlags are the flags every manager command has.
type managerFlags struct {
	kubeconfig              string
	guestKubeconfig         string
	namespace               string
	leaderElect             bool
	leaderElectionNamespace string
	// leaderElectionID overrides the manager's own lease name; no flag sets it (see start).
	leaderElectionID string
	metricsAddr      string
	metricsCertDir   string
	probeAddr        string
	pprofAddr        string
	zap              zap.Options
}

// bind registers the common flags. defaultMetrics and defaultProbe differ per command so that
// the controlplane and guest managers can share a pod. The metrics ports are those
// cluster-storage-operator's NetworkPolicy allow-ingress-to-operator-metrics-range opens to
// monitoring (8443-8445), on pods labelled openshift.storage.network-policy.operator-metrics-range.
func (f *managerFlags) bind(fs *flag.FlagSet, withGuest bool, defaultMetrics, defaultProbe string) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "",
		"Path to the kubeconfig of the cluster where the operator runs (the management cluster in HyperShift mode). Empty means the in-cluster configuration.")
	if withGuest {
		fs.StringVar(&f.guestKubeconfig, "guest-kubeconfig", "",
			"Path to the kubeconfig of the hosted (guest) cluster.")
	}
	fs.StringVar(&f.namespace, "namespace", "",
		"Namespace the operator runs in (the HostedControlPlane namespace in HyperShift mode). Defaults to POD_NAMESPACE, then to the service account's namespace.")
	fs.BoolVar(&f.leaderElect, "leader-elect", true,
		"Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election lease, on the cluster where the operator runs. Defaults to --namespace.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", defaultMetrics,
		`Address /metrics listens on, over HTTPS, for callers allowed to get /metrics (a TokenReview and a SubjectAccessReview on the cluster where the operator runs); "0" disables it.`)
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "",
		"Directory holding the metrics endpoint's serving certificate, tls.crt and tls.key, served from the first connection after they appear or change. Until then, and when empty, a self-signed certificate is served.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", defaultProbe,
		`Address /healthz and /readyz listen on; "0" disables them.`)
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0",
		`Address Go's /debug/pprof/ profiles listen on, to see where memory and CPU go; "0" (the default) disables them. The profiles show the process's internals: bind them to localhost.`)
	f.zap.BindFlags(fs)
}

// parse parses args into fs and resolves the namespace.
func (f *managerFlags) parse(fs *flag.FlagSet, args []string, defaultNamespace string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return f.resolve(defaultNamespace)
}

// resolve fills the namespace (from the pod when no flag names it, else defaultNamespace) and
// the leader election namespace.
func (f *managerFlags) resolve(defaultNamespace string) error {
	if f.namespace == "" {
		f.namespace = detectNamespace(defaultNamespace)
	}
	if f.namespace == "" {
		return errors.New("--namespace is required outside a pod")
	}
	if f.leaderElectionNamespace == "" {
		f.leaderElectionNamespace = f.namespace
	}
	return nil
}

// leaderIdentity is the leader election identity of a process in a pod: its pod's name, from
// POD_NAME (the downward API's metadata.name), prefixed with POD_NAMESPACE when that is set.
// The name is the same for every restart of a container in the pod, so a container the kubelet
// restarts after a crash finds the lease still held by its own identity and takes it back at
// once, instead of waiting out the 137 s lease of its previous run. No two pods share the name
// within a namespace, and the namespace makes it unique beyond, for a lease namespace set with
// --leader-election-namespace. In a split deployment the containers of one pod (controlplane and
// guest) share it, which is safe because each holds its own lease. Outside a pod it is empty: each start then gets a
// new random identity (see clusters.Options).
func leaderIdentity(getenv func(string) string) string {
	name := strings.TrimSpace(getenv("POD_NAME"))
	if name == "" {
		return ""
	}
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns + "/" + name
	}
	return name
}

func detectNamespace(fallback string) string {
	if ns := strings.TrimSpace(os.Getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return fallback
}

// logger builds the operator's logger (JSON unless --zap-devel) and its live level, which
// starts at --zap-log-level (or verbosity 2) and follows spec.operatorLogLevel afterwards.
func (f *managerFlags) logger(stderr io.Writer) *loglevel.Live {
	live := loglevel.FromEnabler(f.zap.Level, 2)
	f.zap.Level = live.Level()
	f.zap.DestWriter = stderr
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	return live
}

// restConfig loads a kubeconfig, or the in-cluster configuration for an empty path.
func restConfig(path, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("loading the in-cluster configuration (pass --kubeconfig outside a pod): %w", err)
		}
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = userAgent
	// Reads come from the caches; these limits only bound bursts of applies at install time.
	cfg.QPS = 20
	cfg.Burst = 40
	return cfg, nil
}

// common returns the options every manager shares, building the logger on the way.
func (f *managerFlags) common(stderr io.Writer) operator.Common {
	live := f.logger(stderr)
	return operator.Common{
		Logger:                  ctrl.Log,
		LogLevel:                live,
		LeaderElection:          f.leaderElect,
		LeaderElectionNamespace: f.leaderElectionNamespace,
		LeaderElectionID:        f.leaderElectionID,
		LeaderElectionIdentity:  leaderIdentity(os.Getenv),
		MetricsBindAddress:      f.metricsAddr,
		HealthProbeBindAddress:  f.probeAddr,
		MetricsCertDir:          f.metricsCertDir,
		TLSProfile:              tlsprofile.NewLive(),
		PprofBindAddress:        f.pprofAddr,
	}
}

func userAgent(component string) string {
	return "cinder-csi-operator-" + component + "/" + version
}
