package env

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Processes are operator processes started from the built binary, as a platform would run it.
type Processes struct {
	procs []*operatorProcess
	// exited receives the first process that ends on its own, before Stop.
	exited chan error
	// MetricsAddrs are the managers' /metrics addresses, by manager name.
	MetricsAddrs map[string]string
	// HealthAddrs are the managers' /healthz and /readyz addresses, by manager name.
	HealthAddrs map[string]string
}

// operatorProcess is one running manager. Its Wait runs in its own goroutine from the start, so
// an exit is seen when it happens, not only when Stop looks.
type operatorProcess struct {
	name string
	cmd  *exec.Cmd
	// done is closed once the process has ended; err is then its Wait result.
	done     chan struct{}
	err      error
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
}

// StartOperatorProcesses runs the operator binary against the environment: the controlplane and
// guest managers in HyperShift mode, the standalone one otherwise. Both write their kubeconfigs'
// paths, namespace and images exactly as a deployment would pass them.
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
	type run struct {
		name string
		args []string
	}
	var runs []run
	if e.Mode == ModeHyperShift {
		runs = []run{
			{"controlplane", []string{"controlplane", "--kubeconfig=" + mgmtKubeconfig, "--guest-kubeconfig=" + guestKubeconfig}},
			{"guest", []string{"guest", "--kubeconfig=" + mgmtKubeconfig, "--guest-kubeconfig=" + guestKubeconfig}},
		}
	} else {
		runs = []run{{"standalone", []string{"standalone", "--kubeconfig=" + mgmtKubeconfig}}}
	}
	for _, r := range runs {
		metrics, err := freeAddr()
		if err != nil {
			return nil, err
		}
		health, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := append(slices.Clone(r.args), "--namespace="+e.Namespace,
			"--metrics-bind-address="+metrics, "--health-probe-bind-address="+health)
		if o.TopologyRecheckInterval > 0 && r.name != "guest" {
			args = append(args, "--topology-recheck-interval="+o.TopologyRecheckInterval.String())
		}
		cmd := exec.Command(o.Binary, args...)
		if e.Real != nil {
			// nsenter enters only the network namespace and then execs the operator, so the
			// process (and its parent-death signal) stays the one started here.
			cmd = exec.Command("nsenter", append([]string{"--net=" + e.Real.MgmtNode.NetnsPath(), "--", o.Binary}, args...)...)
		}
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = o.Output, o.Output
		// The operator dies with its parent, so an interrupted run leaves nothing behind.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			_ = p.Stop()
			return nil, fmt.Errorf("starting %s: %w", r.name, err)
		}
		op := &operatorProcess{name: r.name, cmd: cmd, done: make(chan struct{})}
		go func() {
			op.err = cmd.Wait()
			close(op.done)
			if op.stopping.Load() {
				return
			}
			select {
			case p.exited <- fmt.Errorf("the %s manager exited on its own: %w", op.name, op.err):
			default: // Another process's exit was reported first.
			}
		}()
		p.procs = append(p.procs, op)
		p.MetricsAddrs[r.name], p.HealthAddrs[r.name] = metrics, health
	}
	return p, nil
}

// Exited receives an error naming the manager when one of the processes ends before Stop: an
// operator that cannot start (a bad flag, an unreadable kubeconfig) exits at once, and a caller
// waiting for the driver to become available should say so rather than time out.
func (p *Processes) Exited() <-chan error { return p.exited }

// Stop terminates the processes (SIGTERM, then SIGKILL after ten seconds) and waits for them.
func (p *Processes) Stop() error {
	for _, op := range p.procs {
		op.stopping.Store(true)
	}
	var errs []error
	for _, op := range p.procs {
		_ = op.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-op.done:
		case <-time.After(10 * time.Second):
			_ = op.cmd.Process.Kill()
			<-op.done
		}
		// An exit status (including "killed") is how a stopped operator ends.
		var exit *exec.ExitError
		if op.err != nil && !errors.As(op.err, &exit) {
			errs = append(errs, op.err)
		}
	}
	p.procs = nil
	return errors.Join(errs...)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return addr, l.Close()
}
