package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// What start takes from library-go's controller command (openshift/library-go,
// pkg/controller/controllercmd and pkg/config/configdefaults), which csi-operator runs.
const (
	// startMetricsAddr is library-go's default serving address (0.0.0.0:8443), where
	// csi-operator serves /metrics and cluster-storage-operator's Deployment exposes port metrics.
	startMetricsAddr = ":8443"
	// startServingCertDir is where library-go looks for its serving certificate when the
	// configuration names none, and where cluster-storage-operator mounts the Secret
	// openstack-cinder-csi-driver-operator-serving-cert that service-ca issues.
	startServingCertDir = "/var/run/secrets/serving-cert"
	// startProbeAddr serves /healthz and /readyz, which cluster-storage-operator's Deployment
	// does not probe; library-go serves them on its one HTTPS port instead.
	startProbeAddr = ":8081"
	// terminatePollInterval is how often --terminate-on-files are read, as library-go's file
	// observer does.
	terminatePollInterval = 10 * time.Second
)

// startOptions is what start decides from csi-operator's command line and configuration file.
type startOptions struct {
	flags managerFlags
	// hyperShift is csi-operator's rule: a --guest-kubeconfig means a hosted cluster.
	hyperShift       bool
	terminateOnFiles []string
	// ignored names the set configuration settings that have no meaning here, and why; start
	// logs them.
	ignored []string
}

// stringList is a flag that may be given many times, each value kept whole (pflag's
// StringArray, which library-go uses for --terminate-on-files).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// runStart runs the operator from the command line and environment cluster-storage-operator
// gives csi-operator (`start -v=N --config=... --terminate-on-files=...`, plus
// `--guest-kubeconfig=...` on HyperShift), so that replacing csi-operator is an image swap:
// standalone without --guest-kubeconfig, both managers of a hosted cluster (hostedcluster) with
// it.
func runStart(args []string, stderr io.Writer) error {
	s, err := parseStart(args, os.ReadFile, stderr)
	if err != nil {
		return err
	}
	// start has no topology flags: controlplane.Setup gives the zero durations their defaults.
	o := operator.Options{Managers: operator.Standalone}
	if s.hyperShift {
		o.Managers = operator.HostedCluster
	}
	m, err := newManagers(&s.flags, o, stderr)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("start")
	for _, why := range s.ignored {
		log.Info("Ignoring a setting of --config", "setting", why)
	}
	ctx := exitOnChange(ctrl.SetupSignalHandler(), s.terminateOnFiles, terminatePollInterval, log)
	return serve(ctx, m)
}

// parseStart parses csi-operator's command line: library-go's controller command flags, the
// logging flags component-base adds to every command, and csi-operator's --guest-kubeconfig. Any
// other flag, and any argument, is refused. readFile reads the --config file.
func parseStart(args []string, readFile func(string) ([]byte, error), stderr io.Writer) (startOptions, error) {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile, listen, vmodule string
		terminate                   stringList
		verbosity                   int
		flushFrequency              time.Duration
		s                           startOptions
	)
	f := &s.flags
	fs.StringVar(&configFile, "config", "",
		"A GenericOperatorConfig (operator.openshift.io/v1alpha1): servingInfo.bindAddress, certFile and keyFile and leaderElection.disable, namespace and name are used; other set fields are logged and ignored.")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "",
		"Path to the kubeconfig of the cluster where the operator runs (the management cluster on HyperShift). Empty means the in-cluster configuration.")
	fs.StringVar(&f.namespace, "namespace", "",
		"Namespace the operator runs in. Defaults to POD_NAMESPACE, then to the service account's namespace; standalone, then to "+names.GuestNamespace+".")
	fs.StringVar(&f.guestKubeconfig, "guest-kubeconfig", "",
		"Path to the hosted cluster's kubeconfig: runs both managers of a hosted cluster, as hostedcluster does. Without it, the standalone operator runs.")
	fs.StringVar(&listen, "listen", "",
		"Address /metrics listens on, over HTTPS (default "+startMetricsAddr+", or the configuration's servingInfo.bindAddress).")
	fs.Var(&terminate, "terminate-on-files", "A file whose change (content, or presence) makes the operator exit, to be restarted; may be repeated.")
	fs.IntVar(&verbosity, "v", 2, "The operator's verbosity at start, 0 to 127; spec.operatorLogLevel sets it afterwards.")
	fs.StringVar(&vmodule, "vmodule", "", "Accepted and ignored: per-file verbosity of klog's text format; the operator logs through zap.")
	fs.DurationVar(&flushFrequency, "log-flush-frequency", 5*time.Second, "Accepted and ignored: the operator's log is not buffered.")
	if err := fs.Parse(normalizeFlagNames(args)); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if verbosity < 0 || verbosity > 127 {
		return s, fmt.Errorf("-v=%d is not a verbosity from 0 to 127", verbosity)
	}
	f.zap.Level = zapcore.Level(-verbosity)
	f.leaderElect = true
	// csi-operator's lease (library-go names it <component>-lock): while an image swap rolls
	// out, the old and the new operator pod wait for each other instead of both reconciling.
	f.leaderElectionID = names.CSIOperatorLeaderElection
	f.metricsAddr, f.metricsCertDir, f.probeAddr, f.pprofAddr = startMetricsAddr, startServingCertDir, startProbeAddr, "0"
	if configFile != "" {
		data, err := readFile(configFile)
		if err != nil {
			return s, fmt.Errorf("reading --config: %w", err)
		}
		var cfg operatorv1alpha1.GenericOperatorConfig
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return s, fmt.Errorf("parsing --config %s as a GenericOperatorConfig: %w", configFile, err)
		}
		if s.ignored, err = applyGenericConfig(cfg, f); err != nil {
			return s, fmt.Errorf("--config %s: %w", configFile, err)
		}
	}
	if listen != "" {
		f.metricsAddr = listen
	}
	s.hyperShift = f.guestKubeconfig != ""
	s.terminateOnFiles = terminate
	defaultNamespace := names.GuestNamespace
	if s.hyperShift {
		defaultNamespace = ""
	}
	return s, f.resolve(defaultNamespace)
}

// applyGenericConfig applies the settings of library-go's configuration file that mean
// something here to f, and returns the others that are set, each with why it is ignored.
// cluster-storage-operator's file is empty (kind and apiVersion only).
func applyGenericConfig(cfg operatorv1alpha1.GenericOperatorConfig, f *managerFlags) ([]string, error) {
	si := cfg.ServingInfo
	if si.BindAddress != "" {
		f.metricsAddr = si.BindAddress
	}
	if si.CertFile != "" || si.KeyFile != "" {
		dir := filepath.Dir(si.CertFile)
		if filepath.Base(si.CertFile) != "tls.crt" || si.KeyFile != filepath.Join(dir, "tls.key") {
			return nil, errors.New("servingInfo.certFile and keyFile must be tls.crt and tls.key of one directory, as service-ca's Secret holds them")
		}
		f.metricsCertDir = dir
	}
	le := cfg.LeaderElection
	f.leaderElect = !le.Disable
	if le.Namespace != "" {
		f.leaderElectionNamespace = le.Namespace
	}
	if le.Name != "" {
		f.leaderElectionID = le.Name
	}
	var ignored []string
	note := func(set bool, what string) {
		if set {
			ignored = append(ignored, what)
		}
	}
	const profile = "the metrics endpoint follows the cluster's TLS security profile"
	note(si.BindNetwork != "" && si.BindNetwork != "tcp", "servingInfo.bindNetwork: the address alone decides")
	note(si.MinTLSVersion != "", "servingInfo.minTLSVersion: "+profile)
	note(len(si.CipherSuites) > 0, "servingInfo.cipherSuites: "+profile)
	note(si.ClientCA != "", "servingInfo.clientCA: scrapers authenticate with a bearer token")
	note(len(si.NamedCertificates) > 0, "servingInfo.namedCertificates: one serving certificate, from certFile and keyFile")
	note(cfg.ServingInfo.MaxRequestsInFlight != 0 || cfg.ServingInfo.RequestTimeoutSeconds != 0,
		"servingInfo.maxRequestsInFlight and requestTimeoutSeconds: only /metrics is served")
	note(le.LeaseDuration.Duration != 0 || le.RenewDeadline.Duration != 0 || le.RetryPeriod.Duration != 0,
		"leaderElection timings: the operator uses OpenShift's (137 s, 107 s, 26 s), library-go's defaults")
	note(cfg.Authentication.Disabled || cfg.Authorization.Disabled,
		"authentication.disabled and authorization.disabled: /metrics always reviews the scraper's token and access")
	return ignored, nil
}

// normalizeFlagNames writes "_" in flag names as "-", as component-base's command runner does
// for csi-operator (cliflag.WordSepNormalizeFunc), up to the "--" that ends the flags.
func normalizeFlagNames(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		name = strings.ReplaceAll(name, "_", "-")
		if hasValue {
			name += "=" + value
		}
		out[i] = name
	}
	return out
}
