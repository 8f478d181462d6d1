package realnode

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
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
