package env

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator/operator"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// setGlobalLogger sets controller-runtime's global logger once per process. controller-runtime
// honours only its first SetLogger, and a second call from a test running in parallel races with
// the first (the race detector fails both tests); each operator's managers get their own logger
// in their options instead.
var setGlobalLogger sync.Once

// LocalImages are the operand images of local runs. Nothing pulls them (kwok only pretends to
// run pods), so they name no registry.
var LocalImages = map[string]string{
	operandimages.EnvDriver:              "cinder-csi-plugin:local",
	operandimages.EnvProvisioner:         "csi-provisioner:local",
	operandimages.EnvAttacher:            "csi-attacher:local",
	operandimages.EnvResizer:             "csi-resizer:local",
	operandimages.EnvSnapshotter:         "csi-snapshotter:local",
	operandimages.EnvNodeDriverRegistrar: "csi-node-driver-registrar:local",
	operandimages.EnvLivenessProbe:       "csi-livenessprobe:local",
	operandimages.EnvKubeRBACProxy:       "kube-rbac-proxy:local",
}

// LookupLocalImage looks up LocalImages like os.LookupEnv.
func LookupLocalImage(name string) (string, bool) {
	v, ok := LocalImages[name]
	return v, ok
}

// OperatorOptions tune an in-process operator.
type OperatorOptions struct {
	// TopologyRecheckInterval and OpenStackTimeout shorten the defaults for tests.
	TopologyRecheckInterval time.Duration
	OpenStackTimeout        time.Duration
	// LeaderElection turns on leader election with OpenShift's timings.
	LeaderElection bool
	// LogOutput, when set, also receives every line the managers log (besides stderr, or the
	// test's log file under RunOperatorForTest), so that tests can assert on the operator's log,
	// for example that no secret value is ever in it. It must be safe for concurrent writes.
	LogOutput io.Writer
	// logFile, set by RunOperatorForTest, takes the managers' log instead of stderr.
	logFile io.Writer
	// Proxy is, in HyperShift mode, the proxy of the operator's environment, which the command
	// reads from HTTP_PROXY, HTTPS_PROXY and NO_PROXY; standalone mode follows the Proxy object.
	Proxy configv1.ProxyStatus
	// ReleaseVersion and RunAsUser are, in HyperShift mode, what the command reads from
	// OPERATOR_IMAGE_VERSION and RUN_AS_USER (control-plane-operator sets both).
	ReleaseVersion string
	RunAsUser      *int64
	// WrapConfig, when set, adjusts the REST configuration a manager ("controlplane", "guest"
	// or "standalone"; "hostedcluster" for the leader election of HyperShift mode) uses for a
	// cluster (ClusterManagement or ClusterGuest; the one cluster of standalone mode is
	// ClusterManagement), for example to impersonate the operator's ServiceAccount so that the
	// managers run under exactly the RBAC of the install manifests. It gets a copy it may
	// change and return.
	WrapConfig func(manager, cluster string, cfg *rest.Config) *rest.Config
}

// Cluster names passed to OperatorOptions.WrapConfig.
const (
	ClusterManagement = "management"
	ClusterGuest      = "guest"
)

// Operator is an operator running in this process, built as the command builds it: in HyperShift
// mode the hostedcluster operator (both managers, one leader election), in standalone mode the
// standalone one.
type Operator struct {
	// Requests record every API request of each manager, by manager name: "controlplane" and
	// "guest" for the reconcilers' requests, "hostedcluster" for the leader election of
	// HyperShift mode (its lease and Events), "standalone" for everything in standalone mode.
	Requests map[string]*RequestLog
	// Reconciles count the finished reconciles of this operator's controllers, by controller
	// name (controller-runtime's metrics add up every operator in the process).
	Reconciles *ReconcileCounter
	cancel     context.CancelFunc
	done       chan error
	running    int
	// exited counts managers that returned from Start.
	exited atomic.Int32
}

// RunOperator starts the operator against the environment in this process, the same managers
// the command builds. Stop (or the test's end) stops it.
func (e *Env) RunOperator(o OperatorOptions) (*Operator, error) {
	ctrlImages, err := operandimages.ControllerImages(LookupLocalImage, e.Mode == ModeHyperShift)
	if err != nil {
		return nil, err
	}
	nodeImages, err := operandimages.NodeImages(LookupLocalImage)
	if err != nil {
		return nil, err
	}
	// One live level for the logger and the managers, so spec.operatorLogLevel changes the
	// in-process operator's verbosity as it does the real one's.
	live := loglevel.NewLive(2)
	zapOpts := []zap.Opts{zap.UseDevMode(true), zap.Level(live.Level())}
	var dest io.Writer = os.Stderr
	if o.logFile != nil {
		dest = o.logFile
	}
	if o.LogOutput != nil {
		dest = io.MultiWriter(dest, o.LogOutput)
	}
	zapOpts = append(zapOpts, zap.WriteTo(dest))
	reconciles := &ReconcileCounter{}
	logger := reconciles.Wrap(zap.New(zapOpts...))
	setGlobalLogger.Do(func() { ctrl.SetLogger(logger) })

	op := &Operator{Requests: map[string]*RequestLog{}, Reconciles: reconciles, done: make(chan error, 3)}
	counted := func(name, cluster string, cfg *rest.Config) *rest.Config {
		log := op.Requests[name]
		if log == nil {
			log = &RequestLog{}
			op.Requests[name] = log
		}
		cfg = log.Wrap(cfg, name)
		if o.WrapConfig != nil {
			cfg = o.WrapConfig(name, cluster, cfg)
		}
		return cfg
	}
	common := func() operator.Common {
		return operator.Common{
			Logger:                       logger,
			LogLevel:                     live,
			LeaderElection:               o.LeaderElection,
			LeaderElectionNamespace:      e.Namespace,
			MetricsBindAddress:           "0",
			HealthProbeBindAddress:       "0",
			SkipControllerNameValidation: true,
		}
	}

	mo := operator.Options{Common: common(), Managers: operator.Standalone, Namespace: e.Namespace}
	if e.Mode == ModeHyperShift {
		// As the hostedcluster command runs them; each reconciler gets its own request log,
		// and the lease is counted apart from both.
		mo.Managers = operator.HostedCluster
		mo.MgmtCluster = counted("controlplane", ClusterManagement, e.MgmtConfig())
		mo.ControlPlaneGuestCluster = counted("controlplane", ClusterGuest, e.GuestConfig())
		mo.GuestCluster = counted("guest", ClusterGuest, e.GuestConfig())
		mo.LeaderConfig = counted("hostedcluster", ClusterManagement, e.MgmtConfig())
		mo.ControlPlane.Proxy = o.Proxy
		mo.ControlPlane.ReleaseVersion, mo.ControlPlane.RunAsUser = o.ReleaseVersion, o.RunAsUser
	} else {
		mo.MgmtCluster = counted("standalone", ClusterManagement, e.MgmtConfig())
	}
	mo.ControlPlane.Images, mo.Guest.Images = ctrlImages, nodeImages
	mo.ControlPlane.TopologyRecheckInterval, mo.ControlPlane.OpenStackTimeout = o.TopologyRecheckInterval, o.OpenStackTimeout
	m, err := operator.New(mo)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	op.cancel = cancel
	op.running++
	go func() {
		err := m.Start(ctx)
		op.exited.Add(1)
		op.done <- err
	}()
	return op, nil
}

// RunOperatorForTest runs the operator for the rest of the test.
//
// The managers log to a file of the test's, not to stderr: parallel tests' operators would
// otherwise bury every failure's own output under thousands of lines. A failed test shows the
// log's last lines.
func (e *Env) RunOperatorForTest(t testing.TB, o OperatorOptions) *Operator {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating the operator's log: %v", err)
	}
	t.Cleanup(func() {
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("The operator's log ended with:\n%s", procs.LogTail(logPath, failureLogLines))
		}
	})
	o.logFile = logFile
	op, err := e.RunOperator(o)
	if err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	t.Cleanup(func() {
		if err := op.Stop(); err != nil {
			t.Errorf("stopping the operator: %v", err)
		}
	})
	return op
}

// failureLogLines is how much of the operator's log a failed test shows: a few reconciles'
// worth, enough to see what the operator last did and why.
const failureLogLines = 300

// Running reports whether every manager is still running. A manager returns from Start before
// Stop only when it crashed or gave up, which no input may cause.
func (op *Operator) Running() bool { return op.exited.Load() == 0 }

// Stop stops the managers and waits for them.
func (op *Operator) Stop() error {
	if op.cancel == nil {
		return nil
	}
	op.cancel()
	op.cancel = nil
	var errs []error
	for range op.running {
		select {
		case err := <-op.done:
			errs = append(errs, err)
		case <-time.After(time.Minute):
			errs = append(errs, errors.New("a manager did not stop within a minute"))
		}
	}
	return errors.Join(errs...)
}

// Request is one recorded API request.
type Request struct {
	Time time.Time
	// Host is the API server's host:port, telling the management and guest clusters apart.
	Host   string
	Method string
	Path   string
	// Query is the raw query (label and field selectors, watch, resourceVersion).
	Query string
	Watch bool
}

// Mutating reports whether the request changes state.
func (r Request) Mutating() bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodDelete
}

// Lease reports whether the request is about a coordination Lease (leader election).
func (r Request) Lease() bool { return strings.Contains(r.Path, "/apis/coordination.k8s.io/") }

// RequestLog records the API requests a client sends.
type RequestLog struct {
	mu       sync.Mutex
	requests []Request
}

// Wrap returns a copy of cfg whose requests are recorded.
func (l *RequestLog) Wrap(cfg *rest.Config, userAgent string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "cinder-csi-operator-" + userAgent
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.requests = append(l.requests, Request{
				Time: time.Now(), Host: req.URL.Host, Method: req.Method, Path: req.URL.Path,
				Query: req.URL.RawQuery, Watch: req.URL.Query().Get("watch") == "true",
			})
			l.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// Since returns the requests sent at or after t.
func (l *RequestLog) Since(t time.Time) []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Request
	for _, r := range l.requests {
		if !r.Time.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
