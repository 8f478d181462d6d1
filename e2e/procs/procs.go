// Package procs supervises the child processes the harness runs on this host: a local
// cluster's etcd, API server, controller-manager, scheduler and kwok (package localcluster), a
// real node's containerd, kubelet and kube-router (package realnode) and the operator's manager
// processes (package env). A Process is started, logged, watched, signalled and stopped the same
// way for all of them; what differs (a process group, a network namespace, a log file or a
// writer) is an Option.
//
// Every child dies with the test binary: Pdeathsig makes the kernel kill it when this process
// ends without stopping it (a test killed by its timeout, SIGKILL, a panic). Pdeathsig fires
// when the forking OS thread exits; the Go runtime ends a thread only when a goroutine locked to
// it with runtime.LockOSThread exits, and the harness never locks threads.
package procs

import (
	"bytes"
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

// TailLines is how many lines of a log an error quotes.
const TailLines = 30

// Options describe one child process.
type Options struct {
	// Name names the process in errors and, with LogDir, its log file.
	Name string
	// Path is the program and Args its arguments, without the program name.
	Path string
	Args []string
	// Env, when not nil, is the whole environment of the process; nil inherits this one's.
	Env []string
	// Netns, when set, is the path of a network namespace the process runs in. nsenter joins
	// it and execs Path, so the pid (and the parent-death signal) stays the one started here.
	Netns string
	// Mountns, when set, is the path of a mount namespace the process runs in (such as
	// /proc/<pid>/ns/mnt of a process that holds one), joined by nsenter like Netns.
	Mountns string
	// LogDir, when set, receives stdout and stderr in <LogDir>/<Name>.log, appended to, so that
	// a restarted process keeps the log of the one before. Otherwise Output receives them.
	LogDir string
	// Output receives stdout and stderr when LogDir is empty; nil discards them.
	Output io.Writer
	// Group gives the process a process group of its own, and every signal goes to the group,
	// so that what the process forks is signalled with it. Without it the process shares this
	// one's group and gets a terminal's Ctrl-C together with it.
	Group bool
}

// Process is one running child. Wait runs in its own goroutine from the start, so an exit is
// seen when it happens, not only when somebody looks. A nil *Process is one never started:
// Stop, Kill and RSS do nothing with it.
type Process struct {
	opts    Options
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // written before done is closed
}

// Start starts the process described by o.
func Start(o Options) (*Process, error) {
	path, args := o.Path, o.Args
	var enter []string
	if o.Netns != "" {
		enter = append(enter, "--net="+o.Netns)
	}
	if o.Mountns != "" {
		enter = append(enter, "--mount="+o.Mountns)
	}
	if enter != nil {
		path, args = "nsenter", append(append(enter, "--", o.Path), o.Args...)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = o.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.Group, Pdeathsig: syscall.SIGKILL}
	p := &Process{opts: o, cmd: cmd, done: make(chan struct{})}
	var logFile *os.File
	if o.LogDir != "" {
		p.logPath = filepath.Join(o.LogDir, o.Name+".log")
		f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening %s log: %w", o.Name, err)
		}
		logFile = f
		cmd.Stdout, cmd.Stderr = f, f
	} else if o.Output != nil {
		cmd.Stdout, cmd.Stderr = o.Output, o.Output
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", o.Name, err)
	}
	go func() {
		p.err = cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Restart starts the process again with the same options, after it has ended.
func (p *Process) Restart() (*Process, error) {
	if !p.Exited() {
		return nil, fmt.Errorf("%s is still running", p.opts.Name)
	}
	return Start(p.opts)
}

// Name returns the process's name.
func (p *Process) Name() string { return p.opts.Name }

// Pid returns the process id; with Group it is also the process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the log file, "" when the output goes to a writer.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err waits until the process has ended and returns its Wait result: nil for exit status 0,
// an *exec.ExitError for any other status or a signal.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitError describes an exit nobody asked for, quoting the end of the log when there is one,
// so that the reason (a bad flag, a port in use) is in the error a test prints rather than in a
// file nobody opens.
func (p *Process) ExitError() error {
	err := p.Err()
	if p.logPath == "" {
		return fmt.Errorf("%s exited (%w)", p.opts.Name, err)
	}
	return fmt.Errorf("%s exited (%w); last lines of %s:\n%s", p.opts.Name, err, p.logPath, LogTail(p.logPath, TailLines))
}

// Signal sends sig to the process, or to its process group with Group.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.opts.Group {
		return syscall.Kill(-p.Pid(), sig)
	}
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM, then SIGKILL after grace, and returns once the process has been reaped.
// SIGCONT follows SIGTERM, so that a process frozen with SIGSTOP (localcluster's Pause) wakes
// up and handles the SIGTERM instead of sitting out the grace period; to a running process it
// means nothing. Stopping an ended process does nothing.
func (p *Process) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	// An error only means the process is gone already; the wait below settles it either way.
	_ = p.Signal(syscall.SIGTERM)
	_ = p.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.Kill()
}

// Kill sends SIGKILL and returns once the process has been reaped.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// FirstExit returns the ExitError of the first of ps that has ended, nil while all run. Nil
// entries, processes not started yet, are skipped.
func FirstExit(ps ...*Process) error {
	for _, p := range ps {
		if p != nil && p.Exited() {
			return p.ExitError()
		}
	}
	return nil
}

// LogTail returns up to n last lines of a log file.
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	// Logs of a short-lived failure are small; a long-running process only needs its end.
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

// RSS returns the resident set size of the process in bytes, 0 when it is gone.
func (p *Process) RSS() uint64 {
	if p == nil || p.Exited() {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/status")
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

// StartTicks returns a process's start time in clock ticks since boot (field 22 of
// /proc/<pid>/stat), which together with the pid identifies a process across pid reuse.
func StartTicks(pid int) (uint64, error) {
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
