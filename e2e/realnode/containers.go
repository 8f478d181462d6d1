package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// KillContainer sends SIGKILL to the process of a container the node runs, as the kernel's
// out-of-memory killer or a crash ends it: no shutdown code runs, and the kubelet restarts the
// container in the same pod. containerID is the pod status's containerID
// ("containerd://<id>") or the bare id.
func (n *Node) KillContainer(ctx context.Context, containerID string) error {
	id := strings.TrimPrefix(containerID, "containerd://")
	if id == "" {
		return fmt.Errorf("no container id")
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.rec.ContainerdSocket, "-n", criNamespace,
		"tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("killing container %s on node %s: %w: %s", id, n.Name(), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// PodNetns returns the path of the network namespace of a pod running on the node, through a
// process in the pod's cgroup, so that a test can open connections exactly as the pod would
// (DialIn), subject to the pod's NetworkPolicies, without any client in the pod's image.
func (n *Node) PodNetns(podUID types.UID) (string, error) {
	dirs, err := cgroupDirs(n.Cgroup())
	if err != nil {
		return "", err
	}
	for _, d := range dirs {
		if !strings.Contains(d, "/pod"+string(podUID)) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(data)); len(f) > 0 {
			return "/proc/" + f[0] + "/ns/net", nil
		}
	}
	return "", fmt.Errorf("no process of pod %s found in node %s's cgroups", podUID, n.Name())
}
