package desired

import (
	"time"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// This file holds the plan's vocabulary that the reconciler shares: the pod-template hash
// annotations and the topology decision with its sources. The plan (plan.go) decides them; the
// reconciler and its conditions only read them.

// Hash input names, one pod-template annotation each; cloud-conf's is nodeconf.HashInput.
const (
	hashCredentials = "secret-openstack-cloud-credentials"
	hashProxy       = "proxy-cluster"
	hashTrustedCA   = "configmap-trusted-ca-bundle"
	// hashAdditionalTrustBundle is the HostedControlPlane's additional trust bundle.
	hashAdditionalTrustBundle = "configmap-additional-trust-bundle"
)

// proxyHash hashes the cluster-wide proxy, "" when there is none.
func proxyHash(p configv1.ProxyStatus) string {
	if p == (configv1.ProxyStatus{}) {
		return ""
	}
	return confighash.Data(map[string]string{"http": p.HTTPProxy, "https": p.HTTPSProxy, "no": p.NoProxy}, nil)
}

// Topology decision sources, reported in logs and conditions.
const (
	// SourceOverride means enable_topology of the driver settings decides.
	SourceOverride = "override"
	// SourceDetected means the latest listing of the zones decided.
	SourceDetected = "detected"
	// SourceLastKnown means the latest listing failed, and the decision in force stays.
	SourceLastKnown = "last-known"
	// SourceDefault means no decision was ever made, and topology is off.
	SourceDefault = "default"
	// SourcePending means the first listing is still running, and topology is off until it ends.
	SourcePending = "pending"
)

// TopologyDecision is what the driver gets as --with-topology, and why.
type TopologyDecision struct {
	Enabled bool
	// Source is one of the Source constants.
	Source string
	// OverrideFrom names the ConfigMap whose enable_topology overrides (SourceOverride).
	OverrideFrom string
	// Failure is the classified reason the last detection failed, empty when it succeeded or
	// was not needed; FailureMessage is its user-facing sentence (openstack.Describe), which
	// names the proxy when the proxy failed.
	Failure        openstack.Reason
	FailureMessage string
	// Zones are the zones the decision was made from, for logs.
	ComputeZones, VolumeZones []string
	// RecheckIn is when the zones should be listed again; zero when no detection is needed.
	RecheckIn time.Duration
}

// FailureSentence is the user-facing sentence of the failure: the one detection described, else
// the reason's own.
func (d TopologyDecision) FailureSentence() string {
	if d.FailureMessage != "" {
		return d.FailureMessage
	}
	return openstack.Message(d.Failure)
}
