package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// ErrKubeRouterMissing is wrapped when NetworkPolicyOptions.KubeRouter is not an executable.
var ErrKubeRouterMissing = errors.New("kube-router binary missing")

// NetworkPolicyOptions switch NetworkPolicy enforcement on for a node (NodeOptions.NetworkPolicy).
//
// Enforcement is kube-router's network-policy controller and nothing else of kube-router: no
// routing, no service proxy, no CNI configuration (the node keeps its bridge network and its
// kubernetes Service translation). It runs as a host process inside the node's network
// namespace, next to kubelet and containerd, with the node's admin kubeconfig, and turns the
// policies of the pods on its node into iptables rules and ipsets of that namespace only:
//
//   - pods' traffic to other pods on the node's bridge passes the FORWARD chain, because the
//     node's namespace has net.bridge.bridge-nf-call-iptables on;
//   - pods' traffic to the API server through the kubernetes Service (10.96.0.1:443) is
//     translated in PREROUTING to <node IP>:6443 and reaches the forwarder through INPUT, where
//     the pods' egress policies see that address and port, as they see the endpoint address
//     behind a Service on a cluster;
//   - kubelet's probes come from an address of the node itself, which kube-router always lets
//     through to the node's pods.
type NetworkPolicyOptions struct {
	// KubeRouter is the kube-router binary: `make operand-binaries` builds it, and
	// images.KubeRouterPath returns its path. Required.
	KubeRouter string
	// SyncPeriod is how often kube-router rewrites every rule even when nothing changed (its
	// --iptables-sync-period), which repairs rules changed behind its back. Changes of policies,
	// pods and namespaces are applied as they come, whatever the period. Default one minute.
	SyncPeriod time.Duration
	// SyncTimeout bounds the wait for kube-router's first full sync; default one minute.
	SyncTimeout time.Duration
}

// Defaults of NetworkPolicyOptions.
const (
	defaultPolicySyncPeriod  = time.Minute
	defaultPolicySyncTimeout = time.Minute
)

// kubeRouterName names kube-router's process, log file and kubeconfig.
const kubeRouterName = "kube-router"

// bridgeNFCallIPTables makes bridged IPv4 traffic pass the iptables chains. The setting is per
// network namespace: the path reads and writes the value of the namespace of the thread that
// opens it.
const bridgeNFCallIPTables = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// policyTools are the executables kube-router's network-policy controller runs, with the Debian
// package providing each.
var policyTools = []struct{ name, pkg string }{
	{"iptables", "iptables"},
	{"iptables-save", "iptables"},
	{"iptables-restore", "iptables"},
	{"ipset", "ipset"},
}

// kubeRouterChains are the chains kube-router hooks into INPUT, FORWARD and OUTPUT. Each ends,
// once a full sync has been applied, with the rule that accepts the traffic the pods' policies
// allowed (marked 0x20000).
var kubeRouterChains = []string{"KUBE-ROUTER-INPUT", "KUBE-ROUTER-FORWARD", "KUBE-ROUTER-OUTPUT"}

// checkNetworkPolicy validates the options and the host tools before the node creates anything.
func checkNetworkPolicy(o *NetworkPolicyOptions) error {
	if o.KubeRouter == "" {
		return fmt.Errorf("%w: NetworkPolicyOptions.KubeRouter is empty (build it with `make operand-binaries`)", ErrKubeRouterMissing)
	}
	if !isExecutable(o.KubeRouter) {
		return fmt.Errorf("%w: %s is not an executable (build it with `make operand-binaries`)", ErrKubeRouterMissing, o.KubeRouter)
	}
	var missing, pkgs []string
	for _, t := range policyTools {
		if _, err := lookTool(t.name); err != nil {
			missing = append(missing, t.name)
			pkgs = append(pkgs, t.pkg)
		}
	}
	if len(missing) > 0 {
		slices.Sort(pkgs)
		return fmt.Errorf("%w: NetworkPolicy enforcement needs %s; install them with: e2e/hack/host-packages.sh %s",
			ErrHostUnsupported, strings.Join(missing, ", "), strings.Join(slices.Compact(pkgs), " "))
	}
	if _, err := os.Stat(bridgeNFCallIPTables); err != nil {
		return fmt.Errorf("%w: the kernel lacks br_netfilter (%w): pod-to-pod traffic on a node's bridge would bypass NetworkPolicy",
			ErrHostUnsupported, err)
	}
	return nil
}

// enableBridgeNetfilter makes the traffic between pods on the node's bridge pass the node
// namespace's iptables chains, where kube-router filters it. New namespaces usually start with
// the setting on; it is set anyway, and read back, rather than relied on.
func (n *Node) enableBridgeNetfilter() error {
	return InNetns(n.NetnsPath(), func() error {
		if err := os.WriteFile(bridgeNFCallIPTables, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("enabling br_netfilter for iptables: %w", err)
		}
		v, err := os.ReadFile(bridgeNFCallIPTables)
		if err != nil {
			return fmt.Errorf("reading %s: %w", bridgeNFCallIPTables, err)
		}
		if strings.TrimSpace(string(v)) != "1" {
			return fmt.Errorf("%s is %q in the node's namespace after writing 1", bridgeNFCallIPTables, strings.TrimSpace(string(v)))
		}
		return nil
	})
}

// kubeRouterArgs are kube-router's flags for the network-policy controller alone.
//
// The service range is the local clusters' (traffic to it is left to the Service translation
// before any policy applies). The health endpoint is off: it would listen on every address of
// the node with Go's default HTTP handlers, profiling among them, and says nothing about the
// sync (the policy controller reports alive when a sync begins, not when its rules are in
// place). Metrics are off. The node's IP comes from the Node's InternalIP address, which
// kubelet's --node-ip sets; the node's pods are the pods whose hostIP it is. Node.spec.podCIDR
// is not needed: only kube-router's routing controller reads it, and the local clusters run
// kube-controller-manager without nodeipam.
func kubeRouterArgs(node, kubeconfig string, syncPeriod time.Duration) []string {
	return []string{
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-ipv4=true",
		"--enable-ipv6=false",
		"--hostname-override=" + node,
		"--kubeconfig=" + kubeconfig,
		"--service-cluster-ip-range=" + localcluster.ServiceCIDR,
		"--iptables-sync-period=" + syncPeriod.String(),
		"--health-port=0",
		"--metrics-port=0",
		"--enable-pprof=false",
		// Level 1 logs every sync and its duration.
		"--v=1",
	}
}

// kubeRouterEnv is kube-router's environment: the inherited one with the sbin directories on
// PATH (kube-router looks iptables and ipset up there, and a non-login root shell may lack
// them), and NODE_NAME set, which kube-router tries before the host name and
// --hostname-override: the host's own name could be the name of another Node.
func kubeRouterEnv(node string) []string {
	var env []string
	path := ""
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			path = strings.TrimPrefix(kv, "PATH=")
		case strings.HasPrefix(kv, "NODE_NAME="):
		default:
			env = append(env, kv)
		}
	}
	dirs := filepath.SplitList(path)
	for _, d := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"} {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return append(env, "PATH="+strings.Join(dirs, string(filepath.ListSeparator)), "NODE_NAME="+node)
}

// startKubeRouter starts kube-router's network-policy controller for the registered node and
// waits until its first full sync is in place, so that no pod of the node is ever
// unfiltered once StartNode returns.
func (n *Node) startKubeRouter(ctx context.Context, o NetworkPolicyOptions) error {
	if o.SyncPeriod == 0 {
		o.SyncPeriod = defaultPolicySyncPeriod
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = defaultPolicySyncTimeout
	}
	// kube-router reads the node's address once, at start, and exits without one.
	if err := n.poll(ctx, "the Node's InternalIP address", func() (bool, error) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.rec.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // transient; the context bounds the wait
		}
		return slices.Contains(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.ip.String()}), nil
	}); err != nil {
		return err
	}
	kubeconfig, err := n.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(n.rec.Dir, kubeRouterName+".kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing kube-router kubeconfig: %w", err)
	}
	begin := time.Now()
	p, err := startProc(kubeRouterName, o.KubeRouter, kubeRouterArgs(n.rec.Name, kubeconfigPath, o.SyncPeriod),
		kubeRouterEnv(n.rec.Name), n.NetnsPath(), "", n.rec.Cgroup, n.logDir)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.kubeRouter = p
	n.mu.Unlock()
	syncCtx, cancel := context.WithTimeout(ctx, o.SyncTimeout)
	defer cancel()
	if err := n.waitPolicySync(syncCtx, p); err != nil {
		return err
	}
	n.run.logf("Real node %s: kube-router's first NetworkPolicy sync in place after %s", n.rec.Name,
		time.Since(begin).Round(time.Millisecond))
	return nil
}

// waitPolicySync waits until kube-router has applied its first full sync. The signal is in the
// rules themselves: kube-router creates its chains before syncing, but writes the rules that
// accept policy-allowed traffic at the end of each chain only with the restore of a full sync,
// which applies every rule of the node's pods at once.
func (n *Node) waitPolicySync(ctx context.Context, p *procs.Process) error {
	save, err := lookTool("iptables-save")
	if err != nil {
		return err
	}
	last := errors.New("no sync yet")
	w := procs.Wait{
		What:     "kube-router's first sync",
		Interval: nodePollInterval,
		Alive:    func() error { return procs.FirstExit(p) },
		Last:     func() error { return last },
		Log:      p.LogPath(),
	}
	return procs.Poll(ctx, w, func() (bool, error) {
		out, err := n.Command(ctx, save, "-t", "filter").Output()
		if err != nil {
			last = fmt.Errorf("running iptables-save in the node's namespace: %w", err)
		}
		return err == nil && policySynced(string(out)), nil
	})
}

// policySynced reports whether iptables-save output of the filter table shows a full sync of
// kube-router: each of its top chains ends in the accept rule of policy-allowed traffic.
func policySynced(save string) bool {
	found := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "-A" || !slices.Contains(kubeRouterChains, f[1]) {
			continue
		}
		if i := slices.Index(f, "--mark"); i >= 0 && i+1 < len(f) && f[i+1] == "0x20000/0x20000" &&
			slices.Contains(f, "ACCEPT") && f[len(f)-1] == "ACCEPT" {
			found[f[1]] = true
		}
	}
	return len(found) == len(kubeRouterChains)
}
