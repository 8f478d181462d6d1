package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// DefaultRootDir is kubelet's usual root directory. The node that runs the CSI node plugin must
// see its root there: the operator's DaemonSet mounts host paths under it.
const DefaultRootDir = "/var/lib/kubelet"

// Timeouts of a node's start.
const (
	containerdStartTimeout = 30 * time.Second
	defaultReadyTimeout    = 5 * time.Minute
	nodePollInterval       = 250 * time.Millisecond
)

// NodeOptions describe one real node.
type NodeOptions struct {
	// Cluster is the local cluster the node joins; it must have been started with
	// Run.ClusterOptions(ClusterNumber) as its RealNodes.
	Cluster *localcluster.Cluster
	// ClusterNumber is the cluster's number in the address plan (1..MaxClusters); nodes of one
	// cluster share it, different clusters of a run must not.
	ClusterNumber int
	// Index is the node's number within its cluster (0..MaxNodesPerCluster-1); it picks the
	// node IP and pod subnet.
	Index int
	// Name is the Node name; default "<cluster name>-real-<index>". With the cluster number it
	// is also part of the network namespace and cgroup names, so it must be a DNS label; nodes
	// of different clusters may share it.
	Name string
	// Kubelet is the kubelet binary; default KubeletPath().
	Kubelet string
	// RootDir is where kubelet sees its root directory. Empty means the node's private
	// directory in the run directory, seen where it is. Any other path (DefaultRootDir for a
	// node that runs the CSI node plugin) is seen by this node alone: its kubelet and containerd
	// run in a mount namespace of their own in which the private directory is mounted at that
	// path. So several such nodes run side by side, and the host's own directory is never
	// written.
	RootDir string
	// SandboxImage is the pause image reference containerd uses for pod sandboxes. Its tar
	// must be among Images (or imported before the first pod): nothing is ever pulled.
	SandboxImage string
	// Images are image tars (OCI layout) imported before kubelet starts.
	Images []string
	// Labels are added to the Node once it registers, before it is reported started; kubelet's
	// --node-labels refuses most kubernetes.io labels (the role labels among them).
	Labels map[string]string
	// Taints are registered with the Node, so no pod lands before they are in place.
	Taints []corev1.Taint
	// ExtraIPs are added on lo in the node's namespace (for example a fake OpenStack's
	// address); the egress proxy routes them to this node.
	ExtraIPs []net.IP
	// ReadyTimeout bounds the wait for the Node to become Ready; default five minutes on the
	// reference machine (a hang guard: about 20 s unloaded, 2 min 32 s seen beside make test's
	// other phases on a slower machine), stretched on a slower one (package machine).
	ReadyTimeout time.Duration
	// NetworkPolicy, when set, makes the node enforce NetworkPolicy with kube-router's
	// network-policy controller (see NetworkPolicyOptions); StartNode then returns only once
	// its first sync is in place. Without it, policies are stored but nothing enforces them,
	// as on a cluster whose network plugin ignores them.
	NetworkPolicy *NetworkPolicyOptions
}

// Node is a running real node: a network namespace with a private containerd and a kubelet
// registered with a local cluster. Its methods are safe for concurrent use.
type Node struct {
	run     *Run
	cluster *localcluster.Cluster
	client  kubernetes.Interface
	rec     nodeRecord
	// key names the node on the host: c<cluster number>-<name>.
	key     string
	ip      net.IP
	subnet  *net.IPNet
	logDir  string
	started time.Duration

	mu sync.Mutex
	// mounts holds the node's mount namespace; nil when the node has none (see
	// NodeOptions.RootDir).
	mounts     *procs.Process
	containerd *procs.Process
	kubelet    *procs.Process
	kubeRouter *procs.Process // nil unless NodeOptions.NetworkPolicy is set
	forwarders []*Forwarder
	// opts and dirs are what setUp started the node with, for Reboot to start it again.
	opts NodeOptions
	dirs map[string]string

	stopOnce sync.Once
	stopErr  error
}

// StartNode starts a real node and returns once its Node is Ready and labelled. On error
// everything it created is removed again.
func (r *Run) StartNode(ctx context.Context, opts NodeOptions) (_ *Node, err error) {
	begin := time.Now()
	if opts.Cluster == nil {
		return nil, errors.New("NodeOptions.Cluster is required")
	}
	if err := checkPlan(opts.ClusterNumber, opts.Index); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("%s-real-%d", opts.Cluster.Name(), opts.Index)
	}
	if errs := validation.IsDNS1123Label(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("invalid node name %q: %v", opts.Name, errs)
	}
	if opts.SandboxImage == "" {
		return nil, errors.New("NodeOptions.SandboxImage is required: pause images are never pulled")
	}
	if opts.Kubelet == "" {
		if opts.Kubelet, err = KubeletPath(); err != nil {
			return nil, err
		}
	}
	if !isExecutable(opts.Kubelet) {
		return nil, fmt.Errorf("%w: %s is not an executable", ErrKubeletMissing, opts.Kubelet)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = machine.Scale(defaultReadyTimeout)
	}
	if opts.NetworkPolicy != nil {
		if err := checkNetworkPolicy(opts.NetworkPolicy); err != nil {
			return nil, err
		}
	}
	client, err := kubernetes.NewForConfig(opts.Cluster.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("creating client of cluster %s: %w", opts.Cluster.Name(), err)
	}
	n := &Node{
		run:     r,
		cluster: opts.Cluster,
		client:  client,
		ip:      NodeIP(opts.ClusterNumber, opts.Index),
		subnet:  PodSubnet(opts.ClusterNumber, opts.Index),
	}
	// Node names are unique within a cluster; on the host the cluster number tells the nodes of
	// different clusters apart.
	n.key = fmt.Sprintf("c%d-%s", opts.ClusterNumber, opts.Name)
	full := namePrefix + r.id + "-" + n.key
	dir := filepath.Join(r.dir, "nodes", n.key)
	n.rec = nodeRecord{
		Name:             opts.Name,
		Netns:            full,
		Cgroup:           filepath.Join(cgroupParent(), full),
		Dir:              dir,
		RootDir:          filepath.Join(dir, "kubelet"),
		KubeletDir:       opts.RootDir,
		PodLogsDir:       filepath.Join(dir, "pod-logs"),
		CNINetwork:       full,
		ContainerdSocket: filepath.Join(dir, "containerd", "containerd.sock"),
		ContainerdState:  filepath.Join(dir, "containerd", "state"),
	}
	if n.rec.KubeletDir == "" {
		n.rec.KubeletDir = n.rec.RootDir
	}
	n.logDir = filepath.Join(dir, "logs")
	if r.logDir != "" {
		n.logDir = filepath.Join(r.logDir, n.key)
	}

	registered, err := r.addNode(n)
	if err != nil && !registered {
		return nil, err
	}
	defer func() {
		if err != nil {
			if stopErr := n.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	if err := n.setUp(ctx, opts); err != nil {
		return nil, fmt.Errorf("starting real node %s: %w", opts.Name, err)
	}
	n.started = time.Since(begin)
	machine.Started("real node "+opts.Name+" Ready", n.started)
	r.logf("Real node %s: Ready after %s (IP %s, pod subnet %s, namespace %s)", opts.Name,
		n.started.Round(time.Millisecond), n.ip, n.subnet, n.NetnsPath())
	return n, nil
}

// addNode records a new node with the run, after checking its name, address and root
// directory, and prepares the host for it. registered says whether the node was recorded, in
// which case Stop must undo it even when addNode fails. Before that point nothing was created:
// in particular a root directory that fails the check is never touched by cleanup.
func (r *Run) addNode(n *Node) (registered bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, errors.New("the run is closed")
	}
	if _, ok := r.nodes[n.key]; ok {
		return false, fmt.Errorf("the run already has a node %s", n.key)
	}
	for _, other := range r.nodes {
		if other.ip.Equal(n.ip) {
			return false, fmt.Errorf("node %s already has IP %s (same cluster number and index)", other.key, n.ip)
		}
	}
	if err := os.MkdirAll(n.rec.Dir, 0o700); err != nil {
		return false, fmt.Errorf("creating node directory: %w", err)
	}
	if err := writeJSON(filepath.Join(n.rec.Dir, nodeFileName), n.rec); err != nil {
		_ = os.RemoveAll(n.rec.Dir)
		return false, err
	}
	r.nodes[n.key] = n
	return true, r.prepareHostLocked()
}

// setUp creates the namespace, the pod network, containerd and kubelet, starts kube-router when
// the node enforces NetworkPolicy, and waits for Ready.
func (n *Node) setUp(ctx context.Context, opts NodeOptions) error {
	dirs := map[string]string{}
	for _, d := range []string{"containerd", "containerd/root", "containerd/state", "containerd/opt", "runc", "cni/net.d", "cni/ipam", "pod-logs"} {
		dirs[d] = filepath.Join(n.rec.Dir, d)
		if err := os.MkdirAll(dirs[d], 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", dirs[d], err)
		}
	}
	if err := os.MkdirAll(n.logDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", n.logDir, err)
	}
	n.mu.Lock()
	n.opts, n.dirs = opts, dirs
	n.mu.Unlock()
	if err := n.setUpNetwork(opts.ExtraIPs); err != nil {
		return err
	}
	if opts.NetworkPolicy != nil {
		if err := n.enableBridgeNetfilter(); err != nil {
			return err
		}
	}
	if err := createCgroups(n.rec.Cgroup); err != nil {
		return err
	}
	if err := n.startMountNamespace(ctx); err != nil {
		return err
	}
	if err := n.startContainerd(ctx, dirs, opts.SandboxImage); err != nil {
		return err
	}
	if err := n.ImportImages(ctx, opts.Images...); err != nil {
		return err
	}
	if err := n.startKubelet(opts.Kubelet, opts.Taints); err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := n.waitRegistered(readyCtx); err != nil {
		return err
	}
	if len(opts.Labels) > 0 {
		if err := n.label(readyCtx, opts.Labels); err != nil {
			return err
		}
	}
	if opts.NetworkPolicy != nil {
		if err := n.startKubeRouter(readyCtx, *opts.NetworkPolicy); err != nil {
			return err
		}
	}
	return n.WaitReady(readyCtx)
}

// setUpNetwork creates the namespace with its addresses, the service route and the kubernetes
// Service translation, routes the egress proxy's connections for the node's addresses here,
// and starts the forwarder that makes the API server reachable at <node IP>:6443.
func (n *Node) setUpNetwork(extraIPs []net.IP) error {
	if err := createNetns(n.rec.Netns); err != nil {
		return err
	}
	ns := n.NetnsPath()
	for _, ip := range append([]net.IP{n.ip, net.ParseIP(MetadataIP)}, extraIPs...) {
		if err := nsRun(ns, "ip", "addr", "add", ip.String()+"/32", "dev", "lo"); err != nil {
			return err
		}
	}
	// Without a route the kernel refuses a connect to the Service address before the OUTPUT
	// chain could translate it; the route's source is the node IP.
	if err := nsRun(ns, "ip", "route", "add", localcluster.ServiceCIDR, "dev", "lo", "src", n.ip.String()); err != nil {
		return err
	}
	dest := net.JoinHostPort(n.ip.String(), strconv.Itoa(APIServerPort))
	for _, chain := range []string{"OUTPUT", "PREROUTING"} {
		if err := nsRun(ns, "iptables", "-w", "-t", "nat", "-A", chain, "-d", localcluster.KubernetesServiceIP+"/32",
			"-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", dest); err != nil {
			return err
		}
	}
	routes := []*net.IPNet{n.subnet}
	for _, ip := range append([]net.IP{n.ip}, extraIPs...) {
		routes = append(routes, &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)})
	}
	n.run.addRoutes(n.key, ns, routes...)
	apiHost, err := hostAddress(n.cluster)
	if err != nil {
		return err
	}
	return n.forward(n.ip, apiHost)
}

// startContainerd writes the CNI and containerd configurations and starts containerd. The CNI
// configuration comes first, so that the runtime reports its network ready from the start.
func (n *Node) startContainerd(ctx context.Context, dirs map[string]string, sandboxImage string) error {
	cni, err := cniConfig(n.rec.CNINetwork, n.subnet, dirs["cni/ipam"])
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dirs["cni/net.d"], "10-"+bridgeName+".conflist"), cni, 0o644); err != nil {
		return fmt.Errorf("writing CNI configuration: %w", err)
	}
	config := filepath.Join(dirs["containerd"], "config.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(dirs["containerd/root"], n.rec.ContainerdState,
		n.rec.ContainerdSocket, dirs["runc"], dirs["containerd/opt"], dirs["cni/net.d"], sandboxImage)), 0o644); err != nil {
		return fmt.Errorf("writing containerd configuration: %w", err)
	}
	bin, err := lookTool("containerd")
	if err != nil {
		return err
	}
	p, err := startProc("containerd", bin, []string{"--config", config, "--log-level", "warn"}, nil, n.NetnsPath(), n.mountnsPath(),
		n.rec.Cgroup, n.logDir)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.containerd = p
	n.mu.Unlock()
	return n.waitContainerd(ctx)
}

// startKubelet makes the root directory a shared mount of its own (the node's mount namespace
// already has it), writes kubelet's configuration and kubeconfig and starts it.
func (n *Node) startKubelet(bin string, taints []corev1.Taint) error {
	if n.mounts == nil {
		if err := os.MkdirAll(n.rec.RootDir, 0o750); err != nil {
			return fmt.Errorf("creating kubelet root directory: %w", err)
		}
		if err := bindShared(n.rec.RootDir); err != nil {
			return err
		}
	}
	config, err := renderKubeletConfig(n.ip, "/"+n.rec.Cgroup, n.rec.ContainerdSocket, n.rec.PodLogsDir, taints)
	if err != nil {
		return err
	}
	configPath := filepath.Join(n.rec.Dir, "kubelet-config.yaml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return fmt.Errorf("writing kubelet configuration: %w", err)
	}
	kubeconfig, err := n.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(n.rec.Dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing kubelet kubeconfig: %w", err)
	}
	p, err := startProc("kubelet", bin, []string{
		"--config=" + configPath,
		"--kubeconfig=" + kubeconfigPath,
		"--root-dir=" + n.rec.KubeletDir,
		// The certificate directory defaults to /var/lib/kubelet/pki whatever the root.
		"--cert-dir=" + filepath.Join(n.rec.KubeletDir, "pki"),
		"--node-ip=" + n.ip.String(),
		"--hostname-override=" + n.rec.Name,
		"--v=1",
	}, nil, n.NetnsPath(), n.mountnsPath(), n.rec.Cgroup, n.logDir)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
	return nil
}

// hostAddress returns host:port of a cluster's API server on the host.
func hostAddress(c *localcluster.Cluster) (string, error) {
	u, err := url.Parse(c.RESTConfig().Host)
	if err != nil {
		return "", fmt.Errorf("parsing API server address of cluster %s: %w", c.Name(), err)
	}
	return u.Host, nil
}

// forward serves <ip>:6443 inside the node's namespace, forwarding to target on the host.
func (n *Node) forward(ip net.IP, target string) error {
	ln, err := ListenIn(n.NetnsPath(), "tcp", net.JoinHostPort(ip.String(), strconv.Itoa(APIServerPort)))
	if err != nil {
		return err
	}
	f := ForwardTo(ln, target)
	n.mu.Lock()
	n.forwarders = append(n.forwarders, f)
	n.mu.Unlock()
	return nil
}

// waitContainerd waits until containerd answers on its socket.
func (n *Node) waitContainerd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, containerdStartTimeout)
	defer cancel()
	last := errors.New("no socket yet")
	w := procs.Wait{
		What:     "containerd",
		Interval: nodePollInterval,
		Alive:    func() error { return procs.FirstExit(n.containerd) },
		Last:     func() error { return last },
	}
	return procs.Poll(ctx, w, func() (bool, error) {
		if _, err := os.Stat(n.rec.ContainerdSocket); err != nil {
			return false, nil //nolint:nilerr // not created yet: poll again
		}
		out, err := exec.CommandContext(ctx, "ctr", "--address", n.rec.ContainerdSocket, "version").CombinedOutput()
		if err != nil {
			last = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return err == nil, nil
	})
}

// waitRegistered waits until kubelet has created the Node.
func (n *Node) waitRegistered(ctx context.Context) error {
	return n.poll(ctx, "the Node to register", func() (bool, error) {
		_, err := n.client.CoreV1().Nodes().Get(ctx, n.rec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// label merges labels into the Node.
func (n *Node) label(ctx context.Context, labels map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("encoding label patch: %w", err)
	}
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.rec.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s: %w", n.rec.Name, err)
	}
	return nil
}

// WaitReady waits until the Node reports Ready, or kubelet, containerd or kube-router exits.
func (n *Node) WaitReady(ctx context.Context) error {
	return n.poll(ctx, "the Node to become Ready", func() (bool, error) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.rec.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // transient; the context bounds the wait
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// poll runs cond until it is true, fails, a node process exits or ctx ends; a timeout quotes
// the end of the kubelet log.
func (n *Node) poll(ctx context.Context, what string, cond func() (bool, error)) error {
	return procs.Poll(ctx, procs.Wait{
		What:     what,
		Interval: nodePollInterval,
		Alive: func() error {
			n.mu.Lock()
			defer n.mu.Unlock()
			return procs.FirstExit(n.mounts, n.containerd, n.kubelet, n.kubeRouter)
		},
		Log: n.LogPath("kubelet"),
	}, cond)
}

// ImportImages imports image tars (OCI image layout) into the node's containerd, in the
// namespace the CRI plugin uses, so pods with imagePullPolicy IfNotPresent find them.
func (n *Node) ImportImages(ctx context.Context, tars ...string) error {
	for _, tar := range tars {
		out, err := exec.CommandContext(ctx, "ctr", "--address", n.rec.ContainerdSocket, "-n", criNamespace,
			"images", "import", tar).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s into node %s: %w: %s", tar, n.rec.Name, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// AddIP adds an address on lo inside the node's namespace and routes egress proxy connections
// for it here, for a service that ListenIn then serves there.
func (n *Node) AddIP(ip net.IP) error {
	if err := nsRun(n.NetnsPath(), "ip", "addr", "add", ip.String()+"/32", "dev", "lo"); err != nil {
		return err
	}
	n.run.addRoutes(n.key, n.NetnsPath(), &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)})
	return nil
}

// ExposeAPIServer makes another cluster's API server reachable inside this node's namespace
// at APIServerIP(clusterNumber):6443, for example the guest API server for the controller pods
// on a HyperShift management node, and returns its URL. Write a kubeconfig for it with
// Kubeconfig(c, url); the certificate is valid for the address when c was started with
// Run.ClusterOptions(clusterNumber).
func (n *Node) ExposeAPIServer(c *localcluster.Cluster, clusterNumber int) (string, error) {
	ip := APIServerIP(clusterNumber)
	if err := nsRun(n.NetnsPath(), "ip", "addr", "add", ip.String()+"/32", "dev", "lo"); err != nil {
		return "", err
	}
	target, err := hostAddress(c)
	if err != nil {
		return "", err
	}
	if err := n.forward(ip, target); err != nil {
		return "", err
	}
	return APIServerURL(ip), nil
}

// Kubeconfig returns an admin kubeconfig of the node's cluster for processes inside the node's
// namespace (hostNetwork pods, commands run with Command): its server is the node's API
// forwarder, https://<node IP>:6443.
func (n *Node) Kubeconfig() ([]byte, error) { return Kubeconfig(n.cluster, APIServerURL(n.ip)) }

// Listen creates a listener inside the node's network namespace (see ListenIn).
func (n *Node) Listen(network, addr string) (net.Listener, error) {
	return ListenIn(n.NetnsPath(), network, addr)
}

// Command returns a command that runs inside the node's network namespace (through nsenter,
// in the host's mount namespace).
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.NetnsPath(), "--", name}, args...)...)
}

// Name returns the Node name.
func (n *Node) Name() string { return n.rec.Name }

// IP returns the node IP.
func (n *Node) IP() net.IP { return n.ip }

// PodSubnet returns the node's pod subnet.
func (n *Node) PodSubnet() *net.IPNet { return n.subnet }

// NetnsPath returns the path of the node's network namespace.
func (n *Node) NetnsPath() string { return NetnsPath(n.rec.Netns) }

// ContainerdSocket returns the path of the node's containerd socket.
func (n *Node) ContainerdSocket() string { return n.rec.ContainerdSocket }

// RootDir returns the host directory that is kubelet's root directory (seen by kubelet at the
// path NodeOptions.RootDir gave, when that was set).
func (n *Node) RootDir() string { return n.rec.RootDir }

// Dir returns the node's directory in the run directory: containerd's and kubelet's state,
// the pod logs (pod-logs) and, unless RunOptions.LogDir says otherwise, the node's logs.
func (n *Node) Dir() string { return n.rec.Dir }

// mountnsPath returns the node's mount namespace for nsenter, or "" for the host's.
func (n *Node) mountnsPath() string {
	if n.mounts == nil {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/mnt", n.mounts.Pid())
}

// mountsScript runs in the node's new mount namespace: every mount a slave of the host's (so
// /dev stays shared enough for HostToContainer, and nothing made here reaches the host), the
// node's private root directory bound at the path kubelet sees and made shared (the node
// plugin's Bidirectional mounts need that), a file to say so, then nothing but holding the
// namespace.
const mountsScript = `mount --bind "$1" "$2" && mount --make-shared "$2" && : > "$3" && exec sleep infinity`

// startMountNamespace gives a node whose kubelet sees its root directory elsewhere than on the
// host (NodeOptions.RootDir) a mount namespace of its own, held by a process in the node's
// cgroups, which containerd and kubelet then join. The mount point itself must exist on the
// host or be one of the host paths the run records as created.
func (n *Node) startMountNamespace(ctx context.Context) error {
	if n.rec.KubeletDir == n.rec.RootDir {
		return nil
	}
	if err := os.MkdirAll(n.rec.RootDir, 0o750); err != nil {
		return fmt.Errorf("creating kubelet root directory: %w", err)
	}
	if _, err := os.Stat(n.rec.KubeletDir); err != nil {
		n.run.mu.Lock()
		created := slices.Contains(n.run.rec.CreatedPaths, n.rec.KubeletDir)
		n.run.mu.Unlock()
		if !created {
			return fmt.Errorf("kubelet's root directory %s does not exist on the host to mount the node's own over: %w", n.rec.KubeletDir, err)
		}
		if err := os.MkdirAll(n.rec.KubeletDir, 0o755); err != nil {
			return err
		}
	}
	unshare, err := lookTool("unshare")
	if err != nil {
		return err
	}
	ready := filepath.Join(n.rec.Dir, "mounts-ready")
	// A reboot starts the namespace again: the file of the one before says nothing of it.
	if err := os.Remove(ready); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	p, err := startProc("mounts", unshare, []string{"--mount", "--propagation", "slave", "--", "sh", "-c", mountsScript, "sh",
		n.rec.RootDir, n.rec.KubeletDir, ready}, nil, "", "", n.rec.Cgroup, n.logDir)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.mounts = p
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, containerdStartTimeout)
	defer cancel()
	return procs.Poll(ctx, procs.Wait{
		What:     "the node's mount namespace",
		Interval: 50 * time.Millisecond,
		Alive:    func() error { return procs.FirstExit(p) },
		Log:      n.LogPath("mounts"),
	}, func() (bool, error) {
		_, err := os.Stat(ready)
		return err == nil, nil
	})
}

// Cgroup returns the name of the node's cgroup (the same in every hierarchy).
func (n *Node) Cgroup() string { return n.rec.Cgroup }

// LogPath returns the log file of "kubelet", "containerd" or "kube-router".
func (n *Node) LogPath(component string) string { return filepath.Join(n.logDir, component+".log") }

// StartDuration returns how long StartNode took, from the call until the Node was Ready.
func (n *Node) StartDuration() time.Duration { return n.started }

// Memory returns the resident memory of kubelet and containerd in bytes.
func (n *Node) Memory() (kubelet, containerd uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kubelet.RSS(), n.containerd.RSS()
}

// Stop stops kube-router and kubelet, kills every process in the node's cgroups (containers,
// shims, containerd), unmounts everything under its root and node directories, removes its
// namespace, cgroups and the host entries it created, deletes its Node object while the API
// server still answers, and, as the run's last node, undoes the run's host changes. It is safe
// to call more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.mu.Lock()
		kubeRouter, kubelet, containerd, forwarders := n.kubeRouter, n.kubelet, n.containerd, n.forwarders
		n.forwarders = nil
		n.mu.Unlock()
		var errs []error
		// kube-router leaves its rules and ipsets when it exits; they live in the node's
		// namespace and go with it.
		kubeRouter.Stop(procStopGrace)
		kubelet.Stop(procStopGrace)
		// Whatever kubelet leaves running dies with its cgroups; containerd first gets the
		// chance to exit on its own so its state is consistent for the log.
		containerd.Stop(procStopGrace)
		if err := cleanupNode(&n.rec, n.run.logf); err != nil {
			errs = append(errs, err)
		}
		for _, f := range forwarders {
			errs = append(errs, f.Close())
		}
		n.run.removeRoutes(n.key)
		n.deleteNodeObject()
		n.run.mu.Lock()
		if n.run.nodes[n.key] == n {
			delete(n.run.nodes, n.key)
		}
		errs = append(errs, n.run.releaseHostLocked())
		n.run.mu.Unlock()
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// deleteNodeObject deletes the Node, so the cluster does not keep a NotReady node whose pods
// never terminate. The cluster may already be stopped; that is not an error.
func (n *Node) deleteNodeObject() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	zero := int64(0)
	_ = n.client.CoreV1().Nodes().Delete(ctx, n.rec.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}
