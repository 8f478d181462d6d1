package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
)

// ErrHostUnsupported is wrapped by Check's error: the host lacks something real nodes need. Tests
// skip on it outside CI.
var ErrHostUnsupported = errors.New("this host cannot run real nodes")

// ErrKubeletMissing is wrapped when no kubelet binary is found.
var ErrKubeletMissing = errors.New("kubelet binary missing")

// hostTools are the executables real nodes run, with the Debian package providing each.
var hostTools = []struct{ name, pkg string }{
	{"ip", "iproute2"},
	{"nsenter", "util-linux"},
	{"iptables", "iptables"},
	{"losetup", "mount"},
	{"containerd", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"mkfs.xfs", "xfsprogs"},
	{"xfs_growfs", "xfsprogs"},
}

// cniPlugins are the CNI plugins the pod network uses (Debian: containernetworking-plugins).
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// cgroupControllers are the cgroup v1 hierarchies kubelet and the node cleanup need.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "freezer", "devices"}

// Check reports, in one error wrapping ErrHostUnsupported, everything this host lacks for real
// nodes: Linux, root, the host tools (with the Debian packages that provide them, installable
// with e2e/hack/host-packages.sh), the CNI plugins, usable loop devices, the cgroup v1
// hierarchies, and no kubelet running that a real-node run did not start. The kubelet binary
// and the root directory are checked per node by StartNode.
func Check() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: real nodes need Linux, this is %s", ErrHostUnsupported, runtime.GOOS)
	}
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "not running as root (network namespaces, mounts and cgroups need it)")
	}
	var pkgs []string
	for _, t := range hostTools {
		if _, err := lookTool(t.name); err != nil {
			problems = append(problems, fmt.Sprintf("%s not found (Debian package %s)", t.name, t.pkg))
			pkgs = append(pkgs, t.pkg)
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			problems = append(problems, fmt.Sprintf("CNI plugin %s not found in %s (Debian package containernetworking-plugins)", p, cniBinDir))
			pkgs = append(pkgs, "containernetworking-plugins")
		}
	}
	if f, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0); err != nil {
		problems = append(problems, fmt.Sprintf("loop devices unusable: %v", err))
	} else {
		_ = f.Close()
	}
	problems = append(problems, checkCgroups()...)
	if pids := foreignKubelets(); len(pids) > 0 {
		problems = append(problems, fmt.Sprintf("a kubelet not started by a real-node run is running (pid %v); it would share /var/lib/kubelet", pids))
	}
	if len(problems) == 0 {
		return nil
	}
	msg := strings.Join(problems, "; ")
	if len(pkgs) > 0 {
		slices.Sort(pkgs)
		msg += "; install the packages with: e2e/hack/host-packages.sh " + strings.Join(slices.Compact(pkgs), " ")
	}
	return fmt.Errorf("%w: %s", ErrHostUnsupported, msg)
}

// lookTool finds a host tool on PATH or in the sbin directories, which a non-login root shell
// may lack on PATH.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// checkCgroups reports missing cgroup v1 hierarchies. kubelet runs with failCgroupV1 false and
// the cgroupfs driver, as the verified setup did; a cgroup v2-only host is not supported yet.
func checkCgroups() []string {
	v1, _, err := cgroupRoots()
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, c := range cgroupControllers {
		found := false
		for _, root := range v1 {
			if slices.Contains(strings.Split(filepath.Base(root), ","), c) {
				found = true
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("cgroup v1 hierarchy %s not mounted under /sys/fs/cgroup", c))
		}
	}
	return problems
}

// foreignKubelets returns the pids of kubelet processes outside every real-node cgroup.
func foreignKubelets() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || exitedOrZombie(pid) {
			continue // an exiting kubelet (of a killed run, say) has left its cgroups already
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if !strings.Contains(string(cg), "/"+namePrefix) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// KubeletPath returns the kubelet binary to use when NodeOptions.Kubelet is empty: kubelet in
// $KUBE_BIN_DIR, else in the newest <module root>/bin/kube-v* directory (where `make
// operand-binaries` builds it next to kube-apiserver). The error wraps ErrKubeletMissing.
func KubeletPath() (string, error) {
	if dir := os.Getenv(localcluster.KubeBinDirEnv); dir != "" {
		p := filepath.Join(dir, "kubelet")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s (from $%s): %w", ErrKubeletMissing, p, localcluster.KubeBinDirEnv, err)
		}
		return p, nil
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrKubeletMissing, err)
	}
	matches, _ := filepath.Glob(filepath.Join(root, "bin", "kube-v*", "kubelet"))
	if len(matches) == 0 {
		return "", fmt.Errorf("%w: no %s; build it with `make operand-binaries`",
			ErrKubeletMissing, filepath.Join(root, "bin", "kube-<version>", "kubelet"))
	}
	// Lexical order is enough to pick among patch versions of one minor; a version bump
	// replaces the directory.
	slices.Sort(matches)
	return matches[len(matches)-1], nil
}

// isExecutable reports whether path is an executable regular file.
func isExecutable(path string) bool {
	return unix.Access(path, unix.X_OK) == nil
}
