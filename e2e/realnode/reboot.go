package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reboot does to the node what a reboot does to a machine, and returns once the Node is Ready
// again, as reported by the kubelet that started after it. Everything that runs ends: kube-router,
// kubelet and containerd get SIGTERM and their grace, then every process left in the node's
// cgroups (containers, their shims, the holder of the node's mount namespace) is killed. So every
// mount goes with it, as at power-off: the node's mount namespace with everything mounted in it,
// or, for a node without one, whatever is mounted under its directories on the host; and
// containerd's state, which on a machine lives on the tmpfs /run. What a machine's disk keeps
// stays: the images in containerd's root, kubelet's root directory, the node's network
// namespace (its addresses are its machine's), and the Node object in the cluster. Then the node
// boots: a new mount namespace, containerd, kubelet and kube-router start as StartNode started
// them, and kubelet starts the pods bound to the node again. Attached volumes stay attached: a
// reboot does not detach a server's volumes.
func (n *Node) Reboot(ctx context.Context) error {
	begin := time.Now()
	n.mu.Lock()
	opts, dirs := n.opts, n.dirs
	kubeRouter, kubelet, containerd, hadMounts := n.kubeRouter, n.kubelet, n.containerd, n.mounts != nil
	n.mu.Unlock()
	if dirs == nil {
		return fmt.Errorf("real node %s was not started by StartNode", n.rec.Name)
	}
	kubeRouter.Stop(procStopGrace)
	kubelet.Stop(procStopGrace)
	containerd.Stop(procStopGrace)
	if err := n.powerOff(hadMounts); err != nil {
		return fmt.Errorf("rebooting real node %s: %w", n.rec.Name, err)
	}
	down := time.Since(begin)
	boot := time.Now()
	if err := n.boot(ctx, opts, dirs); err != nil {
		return fmt.Errorf("rebooting real node %s: %w", n.rec.Name, err)
	}
	n.run.logf("Real node %s: rebooted, down for %s, Ready again %s after its boot began", n.rec.Name,
		down.Round(time.Millisecond), time.Since(boot).Round(time.Millisecond))
	return nil
}

// powerOff ends what the node's processes left running and takes away what a machine loses at
// power-off: its mounts and containerd's runtime state. The shims' sockets are found while the
// shims still listen (see cleanupNode) and removed once they are gone.
func (n *Node) powerOff(hadMounts bool) error {
	sockets := shimSockets(&n.rec)
	var errs []error
	if err := killCgroups(n.rec.Cgroup); err != nil {
		errs = append(errs, err)
	}
	n.mu.Lock()
	n.mounts, n.containerd, n.kubelet, n.kubeRouter = nil, nil, nil, nil
	n.mu.Unlock()
	if !hadMounts {
		// Without a mount namespace of its own the node mounted on the host, under its
		// directories (its kubelet root among them).
		if err := unmountUnder(n.rec.Dir, n.rec.RootDir); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range sockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing shim socket: %w", err))
		}
	}
	if err := os.RemoveAll(n.rec.ContainerdState); err != nil {
		errs = append(errs, fmt.Errorf("emptying containerd's state: %w", err))
	}
	if err := os.MkdirAll(n.rec.ContainerdState, 0o700); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// boot starts the node's processes again, as setUp started them, with the network, cgroups,
// images and Node that outlived the reboot, and waits until kubelet has reported the Node Ready.
func (n *Node) boot(ctx context.Context, opts NodeOptions, dirs map[string]string) error {
	if err := n.startMountNamespace(ctx); err != nil {
		return err
	}
	if err := n.startContainerd(ctx, dirs, opts.SandboxImage); err != nil {
		return err
	}
	started := time.Now()
	if err := n.startKubelet(opts.Kubelet, opts.Taints); err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if opts.NetworkPolicy != nil {
		if err := n.startKubeRouter(readyCtx, *opts.NetworkPolicy); err != nil {
			return err
		}
	}
	return n.waitReadySince(readyCtx, started)
}

// waitReadySince waits until the Node is Ready by a heartbeat of a kubelet that started at or
// after since: until the node controller notices a reboot, the Node still shows the Ready of the
// kubelet before it.
func (n *Node) waitReadySince(ctx context.Context, since time.Time) error {
	// Heartbeats have whole seconds.
	since = since.Truncate(time.Second)
	return n.poll(ctx, "the rebooted Node to be reported Ready", func() (bool, error) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.rec.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // transient; the context bounds the wait
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since), nil
			}
		}
		return false, nil
	})
}
