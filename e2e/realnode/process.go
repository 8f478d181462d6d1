package realnode

import (
	"errors"
	"syscall"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// procStopGrace is how long kubelet, containerd and kube-router get to exit after SIGTERM.
const procStopGrace = 5 * time.Second

// startProc starts bin, kubelet, containerd or kube-router of a node, inside the network
// namespace at netnsPath and, when mountnsPath is set, the mount namespace there, logging to <logDir>/<name>.log, and moves it into the node's runtime
// cgroup before it can fork. env, when not nil, replaces the environment the process inherits.
//
// As in package localcluster, the child has its own process group, and dies with this process
// when a test binary is killed; its containers survive that (the runc shims are daemons), which
// is what Sweep is for.
func startProc(name, bin string, args, env []string, netnsPath, mountnsPath, cgroup, logDir string) (*procs.Process, error) {
	p, err := procs.Start(procs.Options{Name: name, Path: bin, Args: args, Env: env, Netns: netnsPath, Mountns: mountnsPath,
		LogDir: logDir, Group: true})
	if err != nil {
		return nil, err
	}
	// A process that is already gone (a kubelet refusing its flags, say) cannot be moved; it
	// is returned anyway, so the caller reports its exit with its log.
	if err := joinCgroups(cgroup, p.Pid()); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.Kill()
		return nil, err
	}
	return p, nil
}
