// Package desired is the guest manager's plan: one pure function, Compute, from what the manager
// read (Input) to everything it applies, creates, recreates, retires and deletes in the guest
// (Plan), with the problems and the findings the zone warning reports. The reconciler executes
// the plan, `cinder-csi-operator render` prints it, and the golden fixtures under testdata/
// snapshot it.
//
// The linter keeps the package pure by construction (rule plan-is-pure in .golangci.yml): it
// imports no Kubernetes or OpenStack client, neither context nor os, no logger, and reads no
// clock. The package reads no cluster: what the plan needs comes in its Input, the node copy of
// cloud-conf (the controlplane manager's decisions, shared/nodeconf) and the live classes among
// it. Nothing in an Input is changed by planning.
//
// Read in this order: plan.go (Input, Compute, the groups each Degraded condition reports on,
// what Removed deletes), node.go (the node DaemonSet, its static objects, standard-csi and its
// VolumeSnapshotClass) and classes.go (the per-zone StorageClasses and the backup
// VolumeSnapshotClass the node copy asks for), each object from its YAML in manifests/operands
// and one adapter.
package desired
