// Package realnode turns this host into real Kubernetes nodes of the local clusters (package
// e2e/localcluster): a real kubelet with a private containerd and runc, inside a network
// namespace the run creates, so that the operator's real driver pods run, mount and serve as on
// a cluster. The host's own network is never changed: every node address exists only inside
// the node's namespace, and the process crosses between the host and a namespace only through
// sockets it creates there (ListenIn, DialIn).
//
// A Run (NewRun) takes a host-wide lock, sweeps what killed runs left, and owns the nodes and the
// host changes they share; a process has one Run, and its clusters, numbered in the address
// plan, may be of several environments at once. Clusters that real nodes join are started with Run.ClusterOptions;
// Run.StartNode then starts a node per cluster:
//
//   - a network namespace ccsi-<run id>-c<cluster>-<node> with the node IP, the metadata address
//     and any extra addresses on lo, a bridge CNI network for pods, and a DNAT of the kubernetes
//     Service (10.96.0.1:443) to a forwarder to the API server at <node IP>:6443 (no kube-proxy);
//   - containerd (CRI, overlayfs, its own root, state and socket) and kubelet, started with
//     `nsenter --net`, in cgroups named after the node;
//   - kubelet's root directory, always the node's own directory, bind-mounted on itself and
//     rshared, and /dev made shared, so that the CSI node plugin's mounts propagate. A node whose
//     kubelet must see its root at a fixed path (NodeOptions.RootDir: the node plugin's host paths
//     are under /var/lib/kubelet) gets a mount namespace of its own, a slave of the host's, where
//     its directory is mounted at that path; containerd and kubelet join it (`nsenter --mount`).
//     Several such nodes run at once, and the mounts of their pods never reach the host;
//   - with NodeOptions.NetworkPolicy, kube-router's network-policy controller beside kubelet,
//     enforcing NetworkPolicy with iptables rules and ipsets of the node's namespace.
//
// The API servers reach kubelets (logs, exec, port-forward) through their "cluster" egress
// selection: an HTTP CONNECT proxy on a unix socket that dials inside the right namespace.
//
// Everything a run creates is recorded before it is created, under BaseDir/<run id>, so that
// Node.Stop, Run.Close and Sweep (for runs whose process was killed) undo the same list.
package realnode
