package realnode

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeRecord is node.json: what a node creates on the host, written before it is created, so
// that Node.Stop and a sweep of a killed run undo the same things.
type nodeRecord struct {
	Name string `json:"name"`
	// Netns and Cgroup are the names of the node's network namespace and cgroups.
	Netns  string `json:"netns"`
	Cgroup string `json:"cgroup"`
	// Dir is the node's directory in the run directory (containerd, CNI, logs, a private
	// kubelet root).
	Dir string `json:"dir,omitempty"`
	// RootDir is the host directory that is kubelet's root directory; KubeletDir is where
	// kubelet sees it: RootDir itself, or a path in the node's own mount namespace.
	RootDir    string `json:"rootDir,omitempty"`
	KubeletDir string `json:"kubeletDir,omitempty"`
	// PodLogsDir is where kubelet writes container logs; /var/log/containers links into it.
	PodLogsDir string `json:"podLogsDir,omitempty"`
	// CNINetwork names the pod network; libcni's result cache files start with it.
	CNINetwork string `json:"cniNetwork,omitempty"`
	// ContainerdSocket and ContainerdState locate the private containerd; the runc shims'
	// socket names derive from them.
	ContainerdSocket string `json:"containerdSocket,omitempty"`
	ContainerdState  string `json:"containerdState,omitempty"`
}

// Host locations kubelet, containerd and libcni write to whatever the node's own directories.
const (
	varLogContainers = "/var/log/containers"
	cniResultsDir    = "/var/lib/cni/results"
	shimSocketDir    = "/run/containerd/s"
	// criNamespace is the containerd namespace of the CRI plugin.
	criNamespace = "k8s.io"
)

// cleanupNode undoes everything rec lists, whatever state the node is in: running (Stop has
// already ended kubelet), half started, or left by a killed run whose shims and containers
// still run. Every step runs even when an earlier one fails, and the errors are joined.
func cleanupNode(rec *nodeRecord, logf func(string, ...any)) error {
	var errs []error
	// The shims' socket files must be found while the shims still listen: afterwards nothing
	// tells them from sockets of another containerd on the host.
	sockets := shimSockets(rec)
	if rec.Cgroup != "" {
		if err := killCgroups(rec.Cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	dirs := []string{rec.Dir}
	if rec.RootDir != "" {
		dirs = append(dirs, rec.RootDir)
	}
	if err := unmountUnder(dirs...); err != nil {
		errs = append(errs, err)
	}
	if rec.Netns != "" {
		if err := deleteNetns(rec.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if rec.Cgroup != "" {
		if err := removeCgroups(rec.Cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing shim socket: %w", err))
		}
	}
	if rec.PodLogsDir != "" {
		errs = append(errs, removeLinksInto(varLogContainers, rec.PodLogsDir))
	}
	for _, m := range cniResults(rec) {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing CNI result cache: %w", err))
		}
	}
	if rec.RootDir != "" && !under(rec.RootDir, rec.Dir) {
		errs = append(errs, emptyRootDir(rec.RootDir))
	}
	if rec.Dir != "" {
		if err := removeDir(rec.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up node %s: %w", rec.Name, err)
	}
	if logf != nil && rec.Name != "" {
		logf("Real node %s: cleaned up", rec.Name)
	}
	return nil
}

// cniResults returns libcni's cached results of the node's pod sandboxes:
// <network>-<sandbox id>-eth0 for the pod network and cni-loopback-<sandbox id>-lo for the
// loopback network containerd adds itself. Sandbox ids come from both those file names and the
// task directories in containerd's state, so a sandbox whose state is gone is still found.
func cniResults(rec *nodeRecord) []string {
	if rec.CNINetwork == "" {
		return nil
	}
	ours, _ := filepath.Glob(filepath.Join(cniResultsDir, rec.CNINetwork+"-*"))
	ids := map[string]bool{}
	for _, id := range taskIDs(rec) {
		ids[id] = true
	}
	for _, m := range ours {
		rest := strings.TrimPrefix(filepath.Base(m), rec.CNINetwork+"-")
		if id, _, ok := strings.Cut(rest, "-"); ok {
			ids[id] = true
		}
	}
	for id := range ids {
		lo, _ := filepath.Glob(filepath.Join(cniResultsDir, "cni-loopback-"+id+"-*"))
		ours = append(ours, lo...)
	}
	return ours
}

// taskIDs returns the ids of the sandboxes and containers in the node's containerd state.
func taskIDs(rec *nodeRecord) []string {
	if rec.ContainerdState == "" {
		return nil
	}
	tasks, _ := os.ReadDir(filepath.Join(rec.ContainerdState, "io.containerd.runtime.v2.task", criNamespace))
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		ids = append(ids, t.Name())
	}
	return ids
}

// emptyRootDir removes what kubelet wrote into a shared root directory (/var/lib/kubelet). The
// device-plugin directory is left to the run, which knows whether it created it: kubelets with
// private roots write there too. The directory itself stays: if it did not exist before the
// run, the run removes it with its other created paths.
func emptyRootDir(dir string) error {
	if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
		return fmt.Errorf("not emptying %s: still mounted inside: %v %w", dir, left, err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == "device-plugins" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLinksInto removes the symbolic links in dir that point into target.
func removeLinksInto(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		dest, err := os.Readlink(p)
		if err != nil || !under(dest, target) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// shimSockets returns the node's runc shim sockets under /run/containerd/s. containerd 1.6
// names each after sha256(<containerd address>/<namespace>/<sandbox or container id>), whatever
// its own state directory, so they are computed from the task directories in the node's state
// directory; sockets bound inside the node's network namespace (listed by the kernel while the
// shims run) are added, which covers a task directory already removed.
func shimSockets(rec *nodeRecord) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if rec.ContainerdSocket != "" {
		for _, id := range taskIDs(rec) {
			sum := sha256.Sum256([]byte(filepath.Join(rec.ContainerdSocket, criNamespace, id)))
			p := filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))
			if _, err := os.Lstat(p); err == nil {
				add(p)
			}
		}
	}
	if rec.Netns != "" {
		if _, err := os.Stat(NetnsPath(rec.Netns)); err == nil {
			paths, _ := unixSocketPaths(NetnsPath(rec.Netns))
			for _, p := range paths {
				if filepath.Dir(p) == shimSocketDir {
					add(p)
				}
			}
		}
	}
	return out
}

// unixSocketPaths lists the paths of unix sockets bound inside a network namespace, from the
// kernel's per-namespace table.
func unixSocketPaths(netnsPath string) ([]string, error) {
	var paths []string
	err := InNetns(netnsPath, func() error {
		f, err := os.Open("/proc/thread-self/net/unix")
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// Num RefCount Protocol Flags Type St Inode Path
			if len(fields) >= 8 && strings.HasPrefix(fields[7], "/") {
				paths = append(paths, fields[7])
			}
		}
		return sc.Err()
	})
	return paths, err
}
