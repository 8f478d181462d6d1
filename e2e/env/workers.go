package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
)

// Worker is a worker node added to the guest cluster by AddWorker: a real node that is a server
// of its own in the environment's OpenStack, as each of a cluster's machines is.
type Worker struct {
	Node *realnode.Node
	// ServerID is the node's server: its metadata uuid, the driver's node ID.
	ServerID string

	env      *Env
	metadata net.Listener
	// cloudNode is the server's part in the real cloud; nil on the fake.
	cloudNode *realCloudNode
	stopped   bool
}

// AddWorker starts another real worker node in the guest cluster, in the environment's zone,
// labelled as a worker with labels added, and makes it a server of the environment's OpenStack
// with a metadata service of its own: on the real cloud a Nova server whose attachments get block
// devices on the host, on the fake a server in its books. It returns once the Node is Ready. The
// environment's end stops it, when Stop has not.
func (e *Env) AddWorker(ctx context.Context, name string, labels map[string]string) (*Worker, error) {
	r := e.Real
	if r == nil {
		return nil, errors.New("workers are real nodes: the environment has none")
	}
	v := imagetars.DefaultVersions()
	cluster := r.guestCluster()
	// The guest's nodes so far are its first indexes: the one StartNode made for it, then the
	// workers added before.
	index := 1 + len(r.workers)
	node, err := r.run.StartNode(ctx, realnode.NodeOptions{
		Cluster: e.Guest, ClusterNumber: cluster, Index: index, Name: name,
		Kubelet: imagetars.KubeletPath(e.options.RealNodes.BinDir, v), RootDir: realnode.DefaultRootDir,
		SandboxImage: r.Images[imagetars.Pause].Ref, Images: r.Images.Tars(),
		Labels:        mergeLabels(map[string]string{corev1.LabelTopologyZone: e.Zone(), "node-role.kubernetes.io/worker": ""}, labels),
		NetworkPolicy: &realnode.NetworkPolicyOptions{KubeRouter: imagetars.KubeRouterPath(e.options.RealNodes.BinDir, v)},
	})
	if err != nil {
		return nil, err
	}
	w := &Worker{Node: node, env: e}
	r.workers = append(r.workers, w)
	if err := w.becomeServer(ctx); err != nil {
		return w, errors.Join(err, w.Stop())
	}
	return w, nil
}

// becomeServer makes the worker a server of the environment's OpenStack and serves its metadata
// in the node.
func (w *Worker) becomeServer(ctx context.Context) error {
	e := w.env
	name := w.Node.Name()
	if c := e.options.RealCloud; c != nil {
		start := time.Now()
		id, err := c.CreateServer(ctx, e.options.HostedCluster+"-"+name, e.Zone())
		// A server that failed to become ACTIVE still has an ID, and is deleted by Stop.
		w.cloudNode = &realCloudNode{cloud: c, stopRelay: func() error { return nil }, serverID: id}
		if err != nil {
			return fmt.Errorf("creating the server of node %s: %w", name, err)
		}
		w.ServerID = id
		e.options.Logf("Real OpenStack: server %s of node %s ACTIVE in %s", id, name, time.Since(start).Round(100*time.Millisecond))
		if w.cloudNode.follower, err = c.FollowAttachments(context.Background(), id); err != nil {
			return err
		}
	} else {
		w.ServerID = serverID(name)
		if err := e.OpenStack.AddServer(fakeopenstack.ServerInfo{ID: w.ServerID, Name: name, Zone: e.Zone()}); err != nil {
			return err
		}
	}
	md, err := w.Node.Listen("tcp", realnode.MetadataIP+":80")
	if err != nil {
		return fmt.Errorf("metadata listener in node %s: %w", name, err)
	}
	w.metadata = md
	if c := e.options.RealCloud; c != nil {
		go func() { _ = c.ServeMetadata(md, w.ServerID) }()
	} else {
		go func() { _ = e.OpenStack.ServeMetadata(md, w.ServerID) }()
	}
	return nil
}

// Follower is the hypervisor's part for the worker's server on the real cloud; nil on the fake.
func (w *Worker) Follower() *realcloud.Follower {
	if w.cloudNode == nil {
		return nil
	}
	return w.cloudNode.follower
}

// Stop stops the node (which unmounts its volumes and deletes its Node), then removes its server:
// on the real cloud the follower's devices go and Nova deletes the server, detaching what is
// still attached. It is safe to call more than once.
func (w *Worker) Stop() error {
	if w.stopped {
		return nil
	}
	w.stopped = true
	errs := []error{w.Node.Stop()}
	if w.metadata != nil {
		_ = w.metadata.Close()
	}
	switch {
	case w.cloudNode != nil:
		errs = append(errs, w.cloudNode.stop())
	case w.ServerID != "":
		errs = append(errs, w.env.OpenStack.RemoveServer(w.ServerID))
	}
	return errors.Join(errs...)
}
