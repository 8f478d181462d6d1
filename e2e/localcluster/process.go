package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before it is killed. The API
// server's graceful shutdown waits for watches to drain; nothing here needs that to finish.
const stopGrace = 5 * time.Second

// logTailLines is how many lines of a component's log an error quotes.
const logTailLines = 30

// errPortConflict marks a start that failed because a chosen port was taken between choosing it
// and the component binding it; Start retries with new ports then.
var errPortConflict = errors.New("port already in use")

// process is one running component. Its exit status is known once done is closed.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // written before done is closed
}

// startProcess starts bin with args, sending stdout and stderr to <logDir>/<name>.log.
//
// The child gets its own process group, so Stop can signal it together with anything it forks,
// and Pdeathsig, so the kernel kills it when this process dies without running Stop (a test
// binary killed by a timeout or SIGKILL). Pdeathsig fires when the forking OS thread exits; the
// Go runtime only ends threads of goroutines that exit while locked with runtime.LockOSThread,
// and this package never locks threads.
func startProcess(name, bin string, args, extraEnv []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an unexpected exit, quoting the end of the log so that the reason (a bad
// flag, a port in use) is in the error a test prints rather than in a file nobody opens.
func (p *process) exitError() error {
	tail := p.logTail(logTailLines)
	err := fmt.Errorf("%s exited early (%w); last lines of %s:\n%s", p.name, p.err, p.logPath, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortConflict, err)
	}
	return err
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and waits until the
// process has been reaped. Calling it on an exited process is a no-op.
func (p *process) stop() {
	if p.exited() {
		return
	}
	// ESRCH only means the group is already gone; the wait below settles it either way.
	// SIGCONT follows SIGTERM so that a component frozen with SIGSTOP (Cluster.Pause) wakes up
	// and handles the SIGTERM instead of sitting out the grace period.
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	_ = syscall.Kill(-p.pid(), syscall.SIGCONT)
	select {
	case <-p.done:
		return
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
}

// logTail returns up to n last lines of the component's log.
func (p *process) logTail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	// Logs of a short-lived failure are small; a long-running one only needs its end.
	const maxRead = 64 << 10
	if info, err := f.Stat(); err == nil && info.Size() > maxRead {
		_, _ = f.Seek(-maxRead, io.SeekEnd)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
