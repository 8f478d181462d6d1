package env

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/tlscheck"
)

// operatorStopGrace is how long Stop gives a manager to exit after SIGTERM before it is killed.
const operatorStopGrace = 10 * time.Second

// MetricsScraper is the ServiceAccount, in the operator's namespace on the cluster where it runs,
// whose token scrapes the operator processes' metrics: like Prometheus, it may get /metrics and
// nothing else.
const MetricsScraper = "metrics-scraper"

// Processes are operator processes started from the built binary, as a platform would run it.
type Processes struct {
	mu    sync.Mutex
	procs []*operatorProcess
	// exited receives the first process that ends on its own, before Stop.
	exited chan error
	// MetricsAddrs are the processes' /metrics addresses, by process name (its subcommand:
	// hostedcluster, controlplane, guest or standalone). They serve HTTPS, to callers allowed
	// to get /metrics on the cluster where the operator runs: see Scrape and MetricsToken.
	MetricsAddrs map[string]string
	// MetricsToken is a token of ServiceAccount MetricsScraper, which may get /metrics.
	MetricsToken string
	// HealthAddrs are the processes' /healthz and /readyz addresses, by process name.
	HealthAddrs map[string]string
}

// operatorProcess is one running manager.
type operatorProcess struct {
	*procs.Process
	// stopping is set before the process is ended on purpose, so that its exit is not reported
	// on Exited.
	stopping atomic.Bool
}

// ProcessOptions tune operator processes.
type ProcessOptions struct {
	// Binary is the path of cinder-csi-operator.
	Binary string
	// Output receives the processes' logs.
	Output io.Writer
	// TopologyRecheckInterval, when set, is passed as --topology-recheck-interval.
	TopologyRecheckInterval time.Duration
	// PodName, when set, is passed as POD_NAME (with POD_NAMESPACE the environment's namespace)
	// to every process, as the downward API passes it to the containers of one operator pod.
	// Without it each start gets a new leader election identity.
	PodName string
	// Split runs, in HyperShift mode, the controlplane and guest managers as two processes
	// (each with its own lease), as a split deployment does, instead of the one hostedcluster
	// process of the install manifests.
	Split bool
}

// StartOperatorProcesses runs the operator binary against the environment: in HyperShift mode
// the hostedcluster process (both managers, one lease), or with Split the controlplane and guest
// processes; the standalone one otherwise. It passes the kubeconfigs' paths, namespace and images
// exactly as a deployment would. Processes are named by their subcommand.
func (e *Env) StartOperatorProcesses(o ProcessOptions) (*Processes, error) {
	if o.Output == nil {
		o.Output = io.Discard
	}
	p := &Processes{MetricsAddrs: map[string]string{}, HealthAddrs: map[string]string{}, exited: make(chan error, 1)}
	environ := os.Environ()
	operandImages := LocalImages
	mgmtKubeconfig, guestKubeconfig := e.Mgmt.KubeconfigPath(), e.Guest.KubeconfigPath()
	if e.Real != nil {
		// On real nodes the operator runs in the management node's network namespace, as its
		// pod would, so that it reaches the fake OpenStack at the address clouds.yaml names,
		// and the operands are the images imported into the nodes.
		operandImages = e.Real.Images.Env()
		mgmtKubeconfig, guestKubeconfig = e.Real.MgmtKubeconfig, e.Real.GuestKubeconfig
	}
	for k, v := range operandImages {
		environ = append(environ, k+"="+v)
	}
	cs, err := kubernetes.NewForConfig(e.MgmtConfig())
	if err != nil {
		return nil, err
	}
	if p.MetricsToken, err = tlscheck.ServiceAccountToken(context.Background(), cs, e.Namespace, MetricsScraper, true); err != nil {
		return nil, fmt.Errorf("making the token that scrapes the operator's metrics: %w", err)
	}
	if o.PodName != "" {
		environ = append(environ, "POD_NAME="+o.PodName, "POD_NAMESPACE="+e.Namespace)
	}
	type run struct {
		name string
		args []string
	}
	var runs []run
	switch {
	case e.Mode == ModeHyperShift && !o.Split:
		runs = []run{{"hostedcluster", []string{"hostedcluster", "--kubeconfig=" + mgmtKubeconfig, "--guest-kubeconfig=" + guestKubeconfig}}}
	case e.Mode == ModeHyperShift:
		runs = []run{
			{"controlplane", []string{"controlplane", "--kubeconfig=" + mgmtKubeconfig, "--guest-kubeconfig=" + guestKubeconfig}},
			{"guest", []string{"guest", "--kubeconfig=" + mgmtKubeconfig, "--guest-kubeconfig=" + guestKubeconfig}},
		}
	default:
		runs = []run{{"standalone", []string{"standalone", "--kubeconfig=" + mgmtKubeconfig}}}
	}
	for _, r := range runs {
		metrics, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		health, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		args := append(slices.Clone(r.args), "--namespace="+e.Namespace,
			"--metrics-bind-address="+metrics, "--health-probe-bind-address="+health)
		if o.TopologyRecheckInterval > 0 && r.name != "guest" {
			args = append(args, "--topology-recheck-interval="+o.TopologyRecheckInterval.String())
		}
		// The operator stays in this process's group, as a container's process gets a
		// terminal's Ctrl-C with run-local; it dies with its parent either way.
		po := procs.Options{Name: r.name, Path: o.Binary, Args: args, Env: environ, Output: o.Output}
		if e.Real != nil {
			po.Netns = e.Real.MgmtNode.NetnsPath()
		}
		started, err := procs.Start(po)
		if err != nil {
			_ = p.Stop()
			return nil, err
		}
		p.procs = append(p.procs, p.watch(started))
		p.MetricsAddrs[r.name], p.HealthAddrs[r.name] = metrics, health
	}
	return p, nil
}

// Scrape reads the metrics of the manager name over HTTPS with MetricsToken, as Prometheus
// would, and returns the body of a 200 answer; any other status is an error.
func (p *Processes) Scrape(ctx context.Context, name string) ([]byte, error) {
	addr, ok := p.MetricsAddrs[name]
	if !ok {
		return nil, fmt.Errorf("no %s manager process", name)
	}
	status, body, err := tlscheck.Scrape(ctx, addr, "/metrics", p.MetricsToken, tlscheck.Options{})
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("/metrics of the %s manager answered %d: %s", name, status, body)
	}
	return body, nil
}

// ProcessID names a running operator process.
type ProcessID struct {
	Name string
	Pid  int
}

// Pids returns the running processes' ids, in start order, for a user who wants to look at
// them (their memory, for one).
func (p *Processes) Pids() []ProcessID {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProcessID, 0, len(p.procs))
	for _, op := range p.procs {
		out = append(out, ProcessID{Name: op.Name(), Pid: op.Pid()})
	}
	return out
}

// watch reports on Exited when the manager process started ends before anybody ends it.
func (p *Processes) watch(started *procs.Process) *operatorProcess {
	op := &operatorProcess{Process: started}
	go func() {
		<-op.Done()
		if op.stopping.Load() {
			return
		}
		select {
		case p.exited <- fmt.Errorf("the %s manager exited on its own: %w", op.Name(), op.Err()):
		default: // Another process's exit was reported first.
		}
	}()
	return op
}

// Exited receives an error naming the manager when one of the processes ends before Stop: an
// operator that cannot start (a bad flag, an unreadable kubeconfig) exits at once, and a caller
// waiting for the driver to become available should say so rather than time out.
func (p *Processes) Exited() <-chan error { return p.exited }

// process returns the running process of the manager name.
func (p *Processes) process(name string) (*operatorProcess, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, op := range p.procs {
		if op.Name() == name {
			return op, nil
		}
	}
	return nil, fmt.Errorf("no %s manager process", name)
}

// Kill kills the manager name with SIGKILL, as a crash or an out-of-memory kill ends it: no
// shutdown code runs and the leader lease is left held. It returns once the process is gone.
func (p *Processes) Kill(name string) error {
	return p.signal(name, syscall.SIGKILL)
}

// Terminate sends the manager name SIGTERM, as the kubelet stops a container, and waits up to
// a minute for it to end.
func (p *Processes) Terminate(name string) error {
	return p.signal(name, syscall.SIGTERM)
}

func (p *Processes) signal(name string, sig syscall.Signal) error {
	op, err := p.process(name)
	if err != nil {
		return err
	}
	op.stopping.Store(true)
	if err := op.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling the %s manager: %w", name, err)
	}
	select {
	case <-op.Done():
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the %s manager did not end within a minute of %s", name, sig)
	}
}

// Restart starts the manager name again, after Kill or Terminate, with the same arguments
// and environment: a container the kubelet restarts in the same pod.
func (p *Processes) Restart(name string) error {
	old, err := p.process(name)
	if err != nil {
		return err
	}
	if !old.Exited() {
		return fmt.Errorf("the %s manager is still running", name)
	}
	started, err := old.Restart()
	if err != nil {
		return err
	}
	op := p.watch(started)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.procs[slices.Index(p.procs, old)] = op
	return nil
}

// Stop terminates the processes (SIGTERM, then SIGKILL after ten seconds) and waits for them.
func (p *Processes) Stop() error {
	p.mu.Lock()
	running := p.procs
	p.procs = nil
	p.mu.Unlock()
	for _, op := range running {
		op.stopping.Store(true)
	}
	var errs []error
	for _, op := range running {
		op.Stop(operatorStopGrace)
		// An exit status (including "killed") is how a stopped operator ends.
		var exit *exec.ExitError
		if err := op.Err(); err != nil && !errors.As(err, &exit) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// FreeAddr returns a loopback address whose port was free at the time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return addr, l.Close()
}

// Ended reports whether the manager name has ended, on its own or after Kill or Terminate, and
// not been started again since.
func (p *Processes) Ended(name string) (bool, error) {
	op, err := p.process(name)
	if err != nil {
		return false, err
	}
	return op.Exited(), nil
}

// BuildOperatorForTest builds the operator's binary into the test's temporary directory and
// returns its path.
func BuildOperatorForTest(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cinder-csi-operator")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/cinder-csi-operator/cinder-csi-operator/cmd/cinder-csi-operator")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the operator: %v\n%s", err, b)
	}
	return bin
}
