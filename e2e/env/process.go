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
	"syscall"
	"time"
)

// Processes are operator processes started from the built binary, as a platform would run it.
type Processes struct {
	cmds []*exec.Cmd
	// MetricsAddrs are the managers' /metrics addresses, by manager name.
	MetricsAddrs map[string]string
	// HealthAddrs are the managers' /healthz and /readyz addresses, by manager name.
	HealthAddrs map[string]string
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
	p := &Processes{MetricsAddrs: map[string]string{}, HealthAddrs: map[string]string{}}
	environ := os.Environ()
	for k, v := range LocalImages {
		environ = append(environ, k+"="+v)
	}
	type run struct {
		name string
		args []string
	}
	var runs []run
	if e.Mode == ModeHyperShift {
		runs = []run{
			{"controlplane", []string{"controlplane", "--kubeconfig=" + e.Mgmt.KubeconfigPath(), "--guest-kubeconfig=" + e.Guest.KubeconfigPath()}},
			{"guest", []string{"guest", "--kubeconfig=" + e.Mgmt.KubeconfigPath(), "--guest-kubeconfig=" + e.Guest.KubeconfigPath()}},
		}
	} else {
		runs = []run{{"standalone", []string{"standalone", "--kubeconfig=" + e.Mgmt.KubeconfigPath()}}}
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
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = o.Output, o.Output
		// The operator dies with its parent, so an interrupted run leaves nothing behind.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			_ = p.Stop()
			return nil, fmt.Errorf("starting %s: %w", r.name, err)
		}
		p.cmds = append(p.cmds, cmd)
		p.MetricsAddrs[r.name], p.HealthAddrs[r.name] = metrics, health
	}
	return p, nil
}

// Pids returns the processes' IDs, by position (controlplane then guest, or standalone).
func (p *Processes) Pids() []int {
	var pids []int
	for _, c := range p.cmds {
		pids = append(pids, c.Process.Pid)
	}
	return pids
}

// Stop terminates the processes (SIGTERM, then SIGKILL after ten seconds) and waits for them.
func (p *Processes) Stop() error {
	var errs []error
	for _, c := range p.cmds {
		if c.Process == nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			err = <-done
		}
		// An exit status (including "killed") is how a stopped operator ends.
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			errs = append(errs, err)
		}
	}
	p.cmds = nil
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
