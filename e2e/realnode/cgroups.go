package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// The cgroups of a node. Every process of a node (kubelet, containerd, the runc shims and every
// container) lives under one cgroup named after the node, in every cgroup v1 hierarchy, so that
// stopping the node, or sweeping a killed run, finds them all by name:
//
//	/<node cgroup>/runtime   kubelet and containerd, and the shims containerd forks
//	/<node cgroup>/kubepods  kubelet's pods (kubelet's cgroupRoot is /<node cgroup>)
const runtimeCgroup = "runtime"

// cgroupKillTimeout bounds waiting for killed processes to leave their cgroups.
const cgroupKillTimeout = 20 * time.Second

// cgroupRoots returns the mount points of the cgroup hierarchies (v1 ones and, when mounted, the
// v2 one), so that cleanup covers whatever kubelet and runc used.
func cgroupRoots() (v1 []string, v2 []string, err error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, nil, err
	}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			v1 = append(v1, m.MountPoint)
		case "cgroup2":
			v2 = append(v2, m.MountPoint)
		}
	}
	return v1, v2, nil
}

// CgroupParentEnv names a cgroup under which every node's cgroups are made instead of at the top
// of each hierarchy, so that a limit set on it (make test-slow's one CPU) holds the nodes, their
// containers and everything the run starts alike. Its directories are made where missing and
// left in place: they belong to whoever set the variable.
const CgroupParentEnv = "REALNODE_CGROUP_PARENT"

// cgroupParent returns the cgroup of CgroupParentEnv, relative to each hierarchy's root ("" when
// unset or not a plain relative path).
func cgroupParent() string {
	p := filepath.Clean(os.Getenv(CgroupParentEnv))
	if p == "." || filepath.IsAbs(p) || strings.HasPrefix(p, "..") {
		return ""
	}
	return p
}

// createCgroups creates /<name> and /<name>/runtime in every v1 hierarchy, with the cgroups
// above them where missing (name may be a path under CgroupParentEnv's cgroup). A new cpuset
// cgroup has no CPUs or memory nodes, and no process can join it until they are set, so they are
// copied from the parent.
func createCgroups(name string) error {
	v1, _, err := cgroupRoots()
	if err != nil {
		return err
	}
	if len(v1) == 0 {
		return errors.New("no cgroup v1 hierarchy is mounted")
	}
	var levels []string
	for p := name; p != "." && p != "/"; p = filepath.Dir(p) {
		levels = append([]string{p}, levels...)
	}
	levels = append(levels, filepath.Join(name, runtimeCgroup))
	for _, root := range v1 {
		for _, level := range levels {
			dir := filepath.Join(root, level)
			err := os.Mkdir(dir, 0o755)
			if errors.Is(err, fs.ErrExist) {
				continue // an existing cgroup keeps its settings: a parent's limit among them
			}
			if err != nil {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "cpuset.cpus")); err == nil {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
					if err != nil {
						return fmt.Errorf("reading %s of %s: %w", f, filepath.Dir(dir), err)
					}
					if err := os.WriteFile(filepath.Join(dir, f), bytes.TrimSpace(v), 0o644); err != nil {
						return fmt.Errorf("setting %s of %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// joinCgroups moves pid into /<name>/runtime in every v1 hierarchy. Called right after the
// process starts, before it forks anything, so its children start there too.
func joinCgroups(name string, pid int) error {
	v1, _, err := cgroupRoots()
	if err != nil {
		return err
	}
	for _, root := range v1 {
		f := filepath.Join(root, name, runtimeCgroup, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving pid %d into %s: %w", pid, f, err)
		}
	}
	return nil
}

// cgroupDirs returns every cgroup directory at or below /<name> in every hierarchy, deepest
// first.
func cgroupDirs(name string) ([]string, error) {
	v1, v2, err := cgroupRoots()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, root := range append(v1, v2...) {
		top := filepath.Join(root, name)
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	slices.SortFunc(dirs, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	return dirs, nil
}

// cgroupPids returns the processes in any cgroup at or below /<name>.
func cgroupPids(name string) ([]int, error) {
	dirs, err := cgroupDirs(name)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var pids []int
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue // removed meanwhile
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// killCgroups kills every process in the node's cgroups and waits until they are gone. The
// freezer stops them first, so that none can fork a child between being listed and killed; a
// frozen process receives SIGKILL when it is thawed.
func killCgroups(name string) error {
	v1, _, err := cgroupRoots()
	if err != nil {
		return err
	}
	var freezer string
	for _, root := range v1 {
		if _, err := os.Stat(filepath.Join(root, name, "freezer.state")); err == nil {
			freezer = filepath.Join(root, name, "freezer.state")
		}
	}
	deadline := time.Now().Add(cgroupKillTimeout)
	killed := map[int]bool{}
	for {
		if freezer != "" {
			freeze(freezer)
		}
		pids, err := cgroupPids(name)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed[pid] = true
		}
		if freezer != "" {
			_ = os.WriteFile(freezer, []byte("THAWED"), 0o644)
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s survive SIGKILL", pids, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A process leaves its cgroups when it starts exiting; waiting until it has finished
	// (a zombie holds no mounts or namespaces) keeps later steps from racing its exit.
	for pid := range killed {
		for !exitedOrZombie(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d of cgroup %s does not finish exiting", pid, name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// exitedOrZombie reports whether a process is gone or has finished exiting. A killed
// container's parent is a shim that was killed too, so its zombie waits for pid 1.
func exitedOrZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	state, ok := procs.StatState(string(data))
	return !ok || state == 'Z' || state == 'X'
}

// freeze asks the freezer to stop the cgroup and waits briefly until it has; a cgroup that does
// not freeze in time is killed anyway, only with a small window for forks.
func freeze(stateFile string) {
	if err := os.WriteFile(stateFile, []byte("FROZEN"), 0o644); err != nil {
		return
	}
	for range 100 {
		if s, err := os.ReadFile(stateFile); err != nil || strings.TrimSpace(string(s)) == "FROZEN" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeCgroups removes every cgroup at or below /<name>, deepest first. The kernel refuses
// while a process is in one, so it runs after killCgroups.
func removeCgroups(name string) error {
	dirs, err := cgroupDirs(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		var err error
		for range 50 {
			// A killed process leaves its cgroup shortly after it is reported gone.
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupNamesWithPrefix returns the cgroup names starting with prefix at the top of any
// hierarchy and under CgroupParentEnv's cgroup (then as paths under it); a sweep uses it to find
// cgroups of runs that left no record.
func cgroupNamesWithPrefix(prefix string) ([]string, error) {
	v1, v2, err := cgroupRoots()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, root := range append(v1, v2...) {
		for _, parent := range slices.Compact([]string{"", cgroupParent()}) {
			entries, _ := os.ReadDir(filepath.Join(root, parent))
			for _, e := range entries {
				name := filepath.Join(parent, e.Name())
				if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
	}
	return names, nil
}
