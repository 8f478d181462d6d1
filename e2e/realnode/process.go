package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStopGrace is how long kubelet, containerd and kube-router get to exit after SIGTERM.
const procStopGrace = 5 * time.Second

// proc is kubelet, containerd or kube-router of a node, started inside the node's network
// namespace.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // set before done is closed
}

// startProc starts bin inside the network namespace at netnsPath through nsenter (which joins
// the namespace and execs bin, so the pid is bin's), logging to <logDir>/<name>.log, and moves
// it into the node's runtime cgroup before it can fork. env, when not nil, replaces the
// environment the process inherits.
//
// As in package localcluster, the child has its own process group, and Pdeathsig, so that it
// dies with this process when a test binary is killed; its containers survive that (the runc
// shims are daemons), which is what Sweep is for.
func startProc(name, bin string, args, env []string, netnsPath, cgroup, logDir string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + netnsPath, "--", bin}, args...)...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	// A process that is already gone (a kubelet refusing its flags, say) cannot be moved; it
	// is returned anyway, so the caller reports its exit with its log.
	if err := joinCgroups(cgroup, cmd.Process.Pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.kill()
		return nil, err
	}
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an unexpected exit with the end of the log.
func (p *proc) exitError() error {
	return fmt.Errorf("%s exited (%w); last lines of %s:\n%s", p.name, p.err, p.logPath, logTail(p.logPath, 30))
}

// stop sends SIGTERM to the process group, then SIGKILL after the grace period, and waits until
// the process is reaped.
func (p *proc) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(procStopGrace):
	}
	p.kill()
}

// kill sends SIGKILL to the process group and waits until the process is reaped.
func (p *proc) kill() {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
}

// rss returns the resident set size of the process in bytes, 0 when it is gone.
func (p *proc) rss() uint64 {
	if p == nil || p.exited() {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid()) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// logTail returns up to n last lines of a log file.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer func() { _ = f.Close() }()
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

// processStartTicks returns a process's start time in clock ticks since boot (field 22 of
// /proc/<pid>/stat), which together with the pid identifies a process across pid reuse.
func processStartTicks(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesised and may contain spaces; fields after it are
	// counted from its closing parenthesis.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	const startTimeField = 22 - 3 // fields[0] is field 3
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[startTimeField], 10, 64)
}
