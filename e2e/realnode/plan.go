package realnode

import (
	"fmt"
	"net"
)

// The address plan. Every address below exists only inside network namespaces a run creates;
// the host's network is never changed. A run hosts up to MaxClusters clusters, numbered from 1
// (for example 1 for a HyperShift management cluster and 2 for its guest), each with up to
// MaxNodesPerCluster real nodes, numbered from 0.
//
//	10.200.<c>.2            the fake OpenStack of cluster c (by convention; see the fake's package)
//	10.200.<c>.3            cluster c's API server, for namespaces of other clusters (Node.ExposeAPIServer)
//	10.200.<c>.<10+n>       node n of cluster c, on lo in its namespace; its API forwarder listens on :6443
//	10.201.<16c+n>.0/24     the pod subnet of node n of cluster c; .1 is the node's bridge
//	169.254.169.254         the metadata service address, on lo in every node namespace
//	10.96.0.1:443           the kubernetes Service, translated to <node IP>:6443 in every node namespace
const (
	// MaxClusters is the highest cluster number of the address plan.
	MaxClusters = 15
	// MaxNodesPerCluster is how many nodes a cluster can have in the address plan.
	MaxNodesPerCluster = 16
	// APIServerPort is where each node namespace's forwarder to its cluster's API server listens.
	APIServerPort = 6443
	// MetadataIP is the OpenStack metadata service's address, present on lo in every node.
	MetadataIP = "169.254.169.254"
	// KubeletPort is the kubelet's serving port, on the node IP.
	KubeletPort = 10250
)

// ClusterIP returns 10.200.<cluster>.<host>, an address of cluster's part of the plan.
func ClusterIP(cluster, host int) net.IP {
	return net.IPv4(10, 200, byte(cluster), byte(host)).To4()
}

// NodeIP returns the address of node index of cluster.
func NodeIP(cluster, index int) net.IP { return ClusterIP(cluster, 10+index) }

// APIServerIP returns the address at which Node.ExposeAPIServer makes cluster's API server
// reachable inside other namespaces, such as the guest API server inside a management node.
func APIServerIP(cluster int) net.IP { return ClusterIP(cluster, 3) }

// FakeOpenStackIP returns the address conventionally used by the fake OpenStack of cluster.
func FakeOpenStackIP(cluster int) net.IP { return ClusterIP(cluster, 2) }

// PodSubnet returns the pod subnet of node index of cluster.
func PodSubnet(cluster, index int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, 201, byte(cluster*MaxNodesPerCluster+index), 0).To4(), Mask: net.CIDRMask(24, 32)}
}

// checkPlan validates a cluster and node number against the plan.
func checkPlan(cluster, index int) error {
	if cluster < 1 || cluster > MaxClusters {
		return fmt.Errorf("cluster number %d is outside 1..%d", cluster, MaxClusters)
	}
	if index < 0 || index >= MaxNodesPerCluster {
		return fmt.Errorf("node number %d is outside 0..%d", index, MaxNodesPerCluster-1)
	}
	return nil
}

// servingIPs returns the addresses clients of cluster may reach its API server at inside node
// namespaces: every node's forwarder address and the cross-cluster address.
func servingIPs(cluster int) []net.IP {
	ips := []net.IP{APIServerIP(cluster)}
	for n := range MaxNodesPerCluster {
		ips = append(ips, NodeIP(cluster, n))
	}
	return ips
}
