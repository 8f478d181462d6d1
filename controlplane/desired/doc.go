// Package desired is the controlplane manager's plan: one pure function, Compute, from what the
// manager read (Input) to everything it applies and deletes in both clusters (Plan), with the
// problems, the topology decision and the warnings the reconciler reports. The reconciler
// executes the plan, `cinder-csi-operator render` prints it, and the golden fixtures under
// testdata/ snapshot it.
//
// The linter keeps the package pure by construction (rule plan-is-pure in .golangci.yml): it
// imports no Kubernetes or OpenStack client, neither context nor os, no logger, and reads no
// clock. The package reads no cluster and no cloud. What the plan needs of the world comes in its
// Input: the objects as the caches hold them, and what the last zone listing said (Detection),
// which the reconciler asks its listings for before it plans (Resolve, Resolution.Listing).
// Nothing in an Input is changed by planning.
//
// Read in this order: input.go (what the plan is computed from), plan.go (Compute and the order
// of the objects), resolve.go, configsource.go and features.go (the input validated into the
// settings, or the problems ConfigDegraded names), decisions.go (the topology decision and the
// pod-template hashes), controller.go, hosted.go and monitoring.go (each object from its YAML in
// manifests/operands and one adapter), and warnings.go (the informational conditions).
package desired
