package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
)

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// bridgeName is the pod bridge inside each node namespace; namespaces keep interface names
// apart, so every node uses the same one.
const bridgeName = "ccsi0"

// Kubeconfig returns an admin kubeconfig of cluster c whose server is server, for a client
// inside a node namespace: for example "https://<NodeIP>:6443" inside the node itself, or
// "https://<APIServerIP(guest)>:6443" for pods of a management node that talk to the guest API
// server through Node.ExposeAPIServer (HyperShift's service-network-admin-kubeconfig). The
// API server's certificate is valid for those addresses when the cluster was started with
// Run.ClusterOptions.
func Kubeconfig(c *localcluster.Cluster, server string) ([]byte, error) {
	rc := c.RESTConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name()] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts[c.Name()] = &clientcmdapi.Context{Cluster: c.Name(), AuthInfo: "admin"}
	cfg.CurrentContext = c.Name()
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig of cluster %s: %w", c.Name(), err)
	}
	return data, nil
}

// APIServerURL returns "https://<ip>:6443", the forwarder address of ip.
func APIServerURL(ip net.IP) string {
	return "https://" + net.JoinHostPort(ip.String(), strconv.Itoa(APIServerPort))
}

// containerdConfig renders the private containerd's configuration (config version 2, which
// containerd 1.6 reads).
//
//   - restrict_oom_score_adj: this VM drops CAP_SYS_RESOURCE from every process, and without it
//     every pod sandbox fails when runc writes the pause container's negative oom_score_adj.
//   - netns_mounts_under_state_dir: pod network namespaces go under the node's state directory
//     instead of /run/netns, next to the run's own named namespaces.
//   - runc's Root and the opt plugin's path keep runc state and containerd's opt directory out
//     of the host's /run/containerd and /opt/containerd.
//   - SystemdCgroup false: the host has no systemd; kubelet uses the cgroupfs driver too.
func containerdConfig(root, state, socket, runcRoot, optDir, cniConfDir, sandboxImage string) string {
	q := strconv.Quote
	return `version = 2
root = ` + q(root) + `
state = ` + q(state) + `
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = ` + q(socket) + `

[plugins."io.containerd.internal.v1.opt"]
  path = ` + q(optDir) + `

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ` + q(sandboxImage) + `
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = ` + q(runcRoot) + `
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ` + q(cniBinDir) + `
    conf_dir = ` + q(cniConfDir) + `
`
}

// cniConfig renders the node's pod network: a bridge in the node namespace with the subnet's
// first address as the pods' gateway, host-local IPAM keeping its allocations in ipamDir, and
// portmap for hostPort. No masquerading: pod traffic never leaves the namespace.
func cniConfig(network string, subnet *net.IPNet, ipamDir string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       network,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": subnet.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": ipamDir,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding CNI configuration: %w", err)
	}
	return data, nil
}

// kubeletConfig is the part of KubeletConfiguration (kubelet.config.k8s.io/v1beta1) the nodes
// set; the field names are the API's.
type kubeletConfig struct {
	APIVersion               string            `json:"apiVersion"`
	Kind                     string            `json:"kind"`
	FailCgroupV1             bool              `json:"failCgroupV1"`
	CgroupDriver             string            `json:"cgroupDriver"`
	CgroupRoot               string            `json:"cgroupRoot"`
	FailSwapOn               bool              `json:"failSwapOn"`
	ContainerRuntimeEndpoint string            `json:"containerRuntimeEndpoint"`
	PodLogsDir               string            `json:"podLogsDir"`
	Address                  string            `json:"address"`
	Port                     int               `json:"port"`
	ReadOnlyPort             int               `json:"readOnlyPort"`
	HealthzBindAddress       string            `json:"healthzBindAddress"`
	HealthzPort              int               `json:"healthzPort"`
	Authentication           any               `json:"authentication"`
	Authorization            any               `json:"authorization"`
	RegisterWithTaints       []corev1.Taint    `json:"registerWithTaints,omitempty"`
	EvictionHard             map[string]string `json:"evictionHard"`
	ImageGCHighThreshold     int               `json:"imageGCHighThresholdPercent"`
	ImageGCLowThreshold      int               `json:"imageGCLowThresholdPercent"`
	ResolvConf               string            `json:"resolvConf"`
	ClusterDomain            string            `json:"clusterDomain"`
	ProtectKernelDefaults    bool              `json:"protectKernelDefaults"`
	SerializeImagePulls      bool              `json:"serializeImagePulls"`
	ShutdownGracePeriod      string            `json:"shutdownGracePeriod"`
}

// renderKubeletConfig renders the KubeletConfiguration of a node.
//
// The kubelet serves only inside the node namespace, reached by the API server through the
// run's egress proxy, so it accepts anonymous requests and authorises everything: the API
// server then needs no client certificate for logs, exec and port-forward. Eviction and image
// garbage collection are effectively off: imported images cannot be pulled again, and a busy
// shared disk must not evict test pods.
func renderKubeletConfig(nodeIP net.IP, cgroupRoot, containerdSocket, podLogsDir string, taints []corev1.Taint) ([]byte, error) {
	cfg := kubeletConfig{
		APIVersion:               "kubelet.config.k8s.io/v1beta1",
		Kind:                     "KubeletConfiguration",
		FailCgroupV1:             false,
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               cgroupRoot,
		FailSwapOn:               false,
		ContainerRuntimeEndpoint: "unix://" + containerdSocket,
		PodLogsDir:               podLogsDir,
		Address:                  nodeIP.String(),
		Port:                     KubeletPort,
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              10248,
		Authentication: map[string]any{
			"anonymous": map[string]bool{"enabled": true},
			"webhook":   map[string]bool{"enabled": false},
		},
		Authorization:         map[string]string{"mode": "AlwaysAllow"},
		RegisterWithTaints:    taints,
		EvictionHard:          map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
		ImageGCHighThreshold:  100,
		ImageGCLowThreshold:   99,
		ResolvConf:            "/etc/resolv.conf",
		ClusterDomain:         "cluster.local",
		ProtectKernelDefaults: false,
		SerializeImagePulls:   false,
		ShutdownGracePeriod:   "0s",
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubelet configuration: %w", err)
	}
	return data, nil
}
