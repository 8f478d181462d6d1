package controlplane

import (
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// controllerWorkload is the CSI controller Deployment's conditions.
var controllerWorkload = conditions.Workload{
	Available:   names.ConditionControllerAvailable,
	Progressing: names.ConditionControllerProgressing,
	Degraded:    names.ConditionControllerDegraded,
	Creating:    "The CSI controller Deployment is being created.",
	Applying:    "Applying the CSI controller objects",
}

// setControllerConditions sets the controller's Available and Progressing conditions from the
// live Deployment's rollout state, and its Degraded condition from applyErr or a stuck rollout.
// waitingFor explains a missing Deployment (the configuration it is waiting for).
func setControllerConditions(s *conditions.Set, dep *appsv1.Deployment, waitingFor string, applyErr error) {
	controllerWorkload.Set(s, controllerRollout(dep), waitingFor, applyErr)
}

// controllerRollout reads the Deployment's replica counts and the Deployment controller's
// verdict; nil when there is no Deployment.
func controllerRollout(dep *appsv1.Deployment) *conditions.Rollout {
	if dep == nil {
		return nil
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	st := dep.Status
	var r conditions.Rollout
	if st.AvailableReplicas > 0 {
		r.Available = conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonAsExpected,
			Message: fmt.Sprintf("%d of %d CSI controller replicas are available.", min(st.AvailableReplicas, want), want)}
	} else {
		r.Available = conditions.Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonNotAvailable,
			Message: "No CSI controller replica is available yet; check the openstack-cinder-csi-driver-controller pods."}
	}
	if rollingOut(dep, want) {
		r.Progressing = conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonRollingOut,
			Message: fmt.Sprintf("The CSI controller is rolling out: %d of %d replicas updated and available.", min(st.UpdatedReplicas, st.AvailableReplicas), want)}
	} else {
		r.Progressing = conditions.Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonAsExpected, Message: "The CSI controller is rolled out."}
	}
	if rolloutStuck(dep) {
		r.Stuck = "The CSI controller rollout exceeded its progress deadline; check the openstack-cinder-csi-driver-controller pods and events."
	}
	return &r
}

// rollingOut reports whether the Deployment is rolling out a template not yet seen complete.
// Once the Deployment controller has called the latest rollout complete (see desired.RolledOut), replicas
// missing afterwards were lost to a node drained or rebooted or a pod killed: what Available says,
// never Progressing, which cluster-storage-operator folds into ClusterOperator storage. The
// Deployment controller keeps that verdict until the next rollout, so it survives a restart of
// this operator.
func rollingOut(dep *appsv1.Deployment, want int32) bool {
	if desired.RolledOut(dep) {
		return false
	}
	st := dep.Status
	return st.ObservedGeneration < dep.Generation ||
		st.UpdatedReplicas < want ||
		st.AvailableReplicas < want ||
		st.Replicas > st.UpdatedReplicas
}

// rolloutStuck reports the Deployment controller's verdict that the rollout stopped progressing.
func rolloutStuck(dep *appsv1.Deployment) bool {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// setConfigCondition reports valid configuration: where the driver settings come from and, when
// the cluster's TLS security profile cannot be served, what is served instead. Neither is
// Degraded: the fallback profile is as safe as the platform's own default, and the cluster's
// other components report the profile themselves.
func setConfigCondition(s *conditions.Set, p *desired.Plan) {
	source := p.ConfigSource.Describe()
	if p.TLS.Problem != "" {
		s.False(names.ConditionConfigDegraded, names.ReasonTLSProfileFallback,
			p.TLS.Problem+" The metrics endpoints use the Intermediate profile until it is fixed. "+source)
		return
	}
	s.False(names.ConditionConfigDegraded, names.ReasonAsExpected, source)
}

// configSourceEvent returns the note of the Event that says where the driver settings now come
// from, when that is not what the live controller copy of cloud-conf records; ok is false when
// it is. A cloud-conf without the record (a fresh install, or one csi-operator wrote) counts as
// a change: a cluster switching from csi-operator learns so where its settings come from.
func configSourceEvent(live *corev1.ConfigMap, src desired.ConfigSource) (note string, ok bool) {
	var was string
	if live != nil {
		was = live.Annotations[names.ConfigSourceAnnotation]
	}
	switch was {
	case src.Record():
		return "", false
	case "":
		return src.Describe(), true
	}
	return fmt.Sprintf("%s Before, they came from: %s.", src.Describe(), was), true
}

// setTopologyCondition reports the topology decision: Degraded when OpenStack could not be asked
// (with what stays in force), not Degraded otherwise.
func setTopologyCondition(s *conditions.Set, d desired.TopologyDecision) {
	if d.Failure == "" {
		reason := names.ReasonAsExpected
		if d.Source == desired.SourceOverride {
			reason = names.ReasonTopologyOverridden
		}
		s.False(names.ConditionTopologyDegraded, reason,
			fmt.Sprintf("Topology is %s (%s).", onOff(d.Enabled), describeSource(d)))
		return
	}
	// The failure message is a sentence without its full stop: end it here, or the message runs
	// on into the next sentence.
	s.True(names.ConditionTopologyDegraded, names.ReasonOpenStackUnavailable,
		fmt.Sprintf("Listing the OpenStack availability zones failed: %s. Topology stays %s (%s); the operator retries.",
			d.FailureSentence(), onOff(d.Enabled), describeSource(d)))
}

func describeSource(d desired.TopologyDecision) string {
	switch d.Source {
	case desired.SourceOverride:
		return "set by enable_topology in " + d.OverrideFrom
	case desired.SourceDetected:
		if d.Enabled {
			return "every compute availability zone has a volume availability zone of the same name"
		}
		return "some compute availability zone has no volume availability zone of the same name"
	case desired.SourceLastKnown:
		return "the last known decision"
	case desired.SourcePending:
		return "the availability zones are still being listed; the decision follows"
	default:
		return "no decision could be made yet"
	}
}

func onOff(b bool) string {
	if b {
		return "enabled"
	}
	return "disabled"
}

// setWarningConditions writes the warning verdicts.
func setWarningConditions(s *conditions.Set, ws []desired.Warning) {
	for _, w := range ws {
		if w.On {
			s.True(w.Type, w.Reason, w.Message)
		} else {
			s.False(w.Type, w.Reason, w.Message)
		}
	}
}
