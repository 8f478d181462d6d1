package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` bind-mounts named network namespaces.
const netnsDir = "/run/netns"

// NetnsPath returns the path of the named network namespace, as `ip netns add` creates it.
func NetnsPath(name string) string { return filepath.Join(netnsDir, name) }

// ListenIn creates a listener inside the network namespace at netnsPath (for example
// NetnsPath("ccsi-…")) and returns it to the caller, which serves it like any other listener. A
// socket keeps the namespace it was created in, so the process as a whole stays in the host's
// namespace while it accepts connections inside a node's.
func ListenIn(netnsPath, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := InNetns(netnsPath, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in %s: %w", network, addr, netnsPath, err)
	}
	return ln, nil
}

// DialIn connects to addr from inside the network namespace at netnsPath. addr must be a
// literal IP address and port: name resolution could run on another thread, outside the
// namespace.
func DialIn(ctx context.Context, netnsPath, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := InNetns(netnsPath, func() error {
		var err error
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s %s in %s: %w", network, addr, netnsPath, err)
	}
	return conn, nil
}

// InNetns runs fn on an OS thread that has joined the network namespace at netnsPath, then
// returns the thread to the host namespace. fn must not start goroutines that create sockets or
// run commands: only the calling thread is in the namespace.
//
// The network namespace is a property of the thread, and the Go scheduler moves goroutines
// between threads, so fn runs on a fresh goroutine locked to its thread for the whole switch.
// If switching back fails, the goroutine ends without unlocking, which makes the runtime end
// the thread instead of returning it, still in the node's namespace, to the pool.
func InNetns(netnsPath string, fn func() error) error {
	target, err := unix.Open(netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
	}
	defer func() { _ = unix.Close(target) }()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("opening the thread's network namespace: %w", err)
			return
		}
		defer func() { _ = unix.Close(orig) }()
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s: %w", netnsPath, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Still locked: the runtime ends this thread when the goroutine returns.
			done <- errors.Join(fnErr, fmt.Errorf("leaving network namespace %s: %w", netnsPath, err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// createNetns creates a named network namespace with lo up. `ip netns add` is used rather than
// unshare from Go because it also makes /run/netns a shared mount point, which is what lets the
// namespace outlive this process and be found by name (and by a later sweep).
func createNetns(name string) error {
	if _, err := os.Stat(NetnsPath(name)); err == nil {
		return fmt.Errorf("network namespace %s already exists", name)
	}
	if err := run("ip", "netns", "add", name); err != nil {
		return err
	}
	return nsRun(NetnsPath(name), "ip", "link", "set", "lo", "up")
}

// deleteNetns removes a named network namespace; a missing one is not an error. Once the last
// process in it has gone, removing the bind mount frees it together with its interfaces,
// addresses and iptables rules.
func deleteNetns(name string) error {
	path := NetnsPath(name)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing network namespace %s: %w", path, err)
	}
	return nil
}

// nsRun runs a command inside a network namespace with nsenter. nsenter --net joins only the
// network namespace; `ip netns exec` would also unshare the mount namespace, and mounts made
// there would never reach kubelet or containerd.
func nsRun(netnsPath string, name string, args ...string) error {
	return run("nsenter", append([]string{"--net=" + netnsPath, "--", name}, args...)...)
}

// run runs a command and returns its combined output in the error when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
