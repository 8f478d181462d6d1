package apply

// Cluster names the cluster whose API server a request goes to: a plan step's, and an error's.
// On HyperShift the guest's administrator can act on the guest cluster only, so a condition
// message must say which one failed. In a standalone install a plan step still names
// ClusterManagement or ClusterGuest, which pick the client (both of the one cluster) it goes
// through; only errors name ClusterUnnamed.
type Cluster string

const (
	// ClusterUnnamed is the one cluster of a standalone install, where telling "management"
	// from "guest" would only confuse.
	ClusterUnnamed Cluster = ""
	// ClusterManagement is the HyperShift management cluster (the hosted control plane
	// namespace).
	ClusterManagement Cluster = "management"
	// ClusterGuest is the HyperShift guest (hosted) cluster.
	ClusterGuest Cluster = "guest"
)

// ClusterFor returns c on HyperShift and ClusterUnnamed in a standalone install, where the
// management and guest clients talk to the same cluster.
func ClusterFor(hyperShift bool, c Cluster) Cluster {
	if hyperShift {
		return c
	}
	return ClusterUnnamed
}
