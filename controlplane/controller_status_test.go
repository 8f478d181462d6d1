package controlplane

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
)

// statusDeployment returns a Deployment with the given spec replicas, generation and status.
func statusDeployment(replicas *int32, generation int64, st appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: names.ControllerDeployment, Generation: generation},
		Spec:       appsv1.DeploymentSpec{Replicas: replicas},
		Status:     st,
	}
}

func TestSetControllerConditions(t *testing.T) {
	t.Parallel()
	type cond = testutil.CondState
	rolledOut := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	notDegraded := cond{operatorv1.ConditionFalse, names.ReasonAsExpected, ""}
	// applyErr is a refusal by the API server, as the applier returns it.
	applyErr := &apply.ObjectError{Op: apply.OpApply, Cluster: apply.ClusterManagement, GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"),
		Resource: "deployments", Namespace: "clusters-example", Name: "x", Err: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "x", errors.New("no"))}
	applyFailed := func() cond {
		reason, msg := conditions.Classify(applyErr, "Applying the CSI controller objects")
		return cond{operatorv1.ConditionTrue, reason, msg}
	}()

	tests := []testutil.StatusCase[*appsv1.Deployment]{
		{
			Name:       "When there is no Deployment and the configuration is missing, it should say what it waits for",
			WaitingFor: "The CSI controller waits for valid configuration: Secret x has no clouds.yaml key.",
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonWaitingForConfig, "The CSI controller waits for valid configuration: Secret x has no clouds.yaml key."},
				cond{operatorv1.ConditionFalse, names.ReasonWaitingForConfig, "The CSI controller waits for valid configuration: Secret x has no clouds.yaml key."},
				notDegraded,
			),
		},
		{
			Name: "When there is no Deployment yet, it should report it being created",
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonDeploying, "The CSI controller Deployment is being created."},
				cond{operatorv1.ConditionTrue, names.ReasonDeploying, "The CSI controller Deployment is being created."},
				notDegraded,
			),
		},
		{
			Name: "When one of two replicas is updated and available, it should be available and rolling out",
			Live: statusDeployment(ptr.To[int32](2), 2, appsv1.DeploymentStatus{
				ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1,
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "1 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 1 of 2 replicas updated and available."},
				notDegraded,
			),
		},
		{
			Name: "When the Deployment controller has not observed the new generation, it should be rolling out",
			Live: statusDeployment(ptr.To[int32](2), 3, rolledOut),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 2 of 2 replicas updated and available."},
				notDegraded,
			),
		},
		{
			Name: "When old pods still run next to the updated ones, it should be rolling out",
			Live: statusDeployment(ptr.To[int32](2), 2, appsv1.DeploymentStatus{
				ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 3,
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 2 of 2 replicas updated and available."},
				notDegraded,
			),
		},
		{
			Name: "When every replica is updated and available, it should be available and rolled out",
			Live: statusDeployment(ptr.To[int32](2), 2, rolledOut),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI controller is rolled out."},
				notDegraded,
			),
		},
		{
			Name: "When a replica is lost after the Deployment controller called the rollout complete, it should say so in Available and not be rolling out",
			Live: statusDeployment(ptr.To[int32](2), 2, appsv1.DeploymentStatus{
				ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}},
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "1 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI controller is rolled out."},
				notDegraded,
			),
		},
		{
			Name: "When a new template is being rolled out after a complete one, it should be rolling out",
			Live: statusDeployment(ptr.To[int32](2), 3, appsv1.DeploymentStatus{
				ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}},
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 1 of 2 replicas updated and available."},
				notDegraded,
			),
		},
		{
			Name: "When the Deployment has no replica count, it should expect one replica",
			Live: statusDeployment(nil, 1, appsv1.DeploymentStatus{
				ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "1 of 1 CSI controller replicas are available."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI controller is rolled out."},
				notDegraded,
			),
		},
		{
			Name: "When no replica is available, it should not be available and point at the pods",
			Live: statusDeployment(ptr.To[int32](1), 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonNotAvailable, "No CSI controller replica is available yet; check the openstack-cinder-csi-driver-controller pods."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 0 of 1 replicas updated and available."},
				notDegraded,
			),
		},
		{
			Name: "When the rollout exceeded its progress deadline, it should be degraded as stuck",
			Live: statusDeployment(ptr.To[int32](2), 2, appsv1.DeploymentStatus{
				ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2,
				Conditions: []appsv1.DeploymentCondition{{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
					Message: `ReplicaSet "openstack-cinder-csi-driver-controller-7d9f8b6c5d" has timed out progressing.`,
				}},
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 1 of 2 replicas updated and available."},
				cond{operatorv1.ConditionTrue, names.ReasonRolloutStuck, "The CSI controller rollout exceeded its progress deadline; check the openstack-cinder-csi-driver-controller pods and events."},
			),
		},
		{
			Name: "When the Progressing condition is False for another reason, it should not be degraded",
			Live: statusDeployment(ptr.To[int32](2), 2, appsv1.DeploymentStatus{
				ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "SomethingElse"}},
			}),
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI controller is rolled out."},
				notDegraded,
			),
		},
		{
			Name:     "When applying failed, it should be degraded with a stable message that does not quote the error",
			Live:     statusDeployment(ptr.To[int32](2), 2, rolledOut),
			ApplyErr: applyErr,
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "2 of 2 CSI controller replicas are available."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI controller is rolled out."},
				applyFailed,
			),
		},
		{
			Name: "When applying failed and the rollout is stuck, it should report the apply failure",
			Live: statusDeployment(ptr.To[int32](1), 1, appsv1.DeploymentStatus{
				ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}},
			}),
			ApplyErr: applyErr,
			Want: testutil.Want(controllerWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonNotAvailable, "No CSI controller replica is available yet; check the openstack-cinder-csi-driver-controller pods."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI controller is rolling out: 0 of 1 replicas updated and available."},
				applyFailed,
			),
		},
	}
	testutil.RunStatusCases(t, setControllerConditions, tests)
}

func TestSetTopologyCondition(t *testing.T) {
	t.Parallel()
	const typ = names.ConditionTopologyDegraded
	tests := []struct {
		name string
		d    desired.TopologyDecision
		want testutil.CondState
	}{
		{
			name: "When the user overrides topology, it should say so and not be degraded",
			d:    desired.TopologyDecision{Enabled: true, Source: desired.SourceOverride, OverrideFrom: "openshift-config/cinder-csi-config"},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonTopologyOverridden,
				"Topology is enabled (set by enable_topology in openshift-config/cinder-csi-config)."},
		},
		{
			name: "When the installer's cloud provider config overrides topology, it should name that ConfigMap",
			d:    desired.TopologyDecision{Source: desired.SourceOverride, OverrideFrom: "openshift-config/cloud-provider-config"},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonTopologyOverridden,
				"Topology is disabled (set by enable_topology in openshift-config/cloud-provider-config)."},
		},
		{
			name: "When detection enabled topology, it should explain the zone rule",
			d:    desired.TopologyDecision{Enabled: true, Source: desired.SourceDetected, ComputeZones: []string{"az1"}, VolumeZones: []string{"az1"}, RecheckIn: time.Minute},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"Topology is enabled (every compute availability zone has a volume availability zone of the same name)."},
		},
		{
			name: "When detection disabled topology, it should explain the zone rule without naming zones",
			d:    desired.TopologyDecision{Source: desired.SourceDetected, ComputeZones: []string{"az1", "az2"}, VolumeZones: []string{"nova"}},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"Topology is disabled (some compute availability zone has no volume availability zone of the same name)."},
		},
		{
			name: "When detection failed and a last known decision exists, it should be degraded and keep that decision",
			d:    desired.TopologyDecision{Enabled: true, Source: desired.SourceLastKnown, Failure: openstack.ReasonUnreachable, RecheckIn: time.Minute},
			want: testutil.CondState{operatorv1.ConditionTrue, names.ReasonOpenStackUnavailable,
				"Listing the OpenStack availability zones failed: " + openstack.Message(openstack.ReasonUnreachable) +
					". Topology stays enabled (the last known decision); the operator retries."},
		},
		{
			name: "When detection failed before any decision, it should be degraded and keep topology disabled",
			d:    desired.TopologyDecision{Source: desired.SourceDefault, Failure: openstack.ReasonAuthenticationFailed},
			want: testutil.CondState{operatorv1.ConditionTrue, names.ReasonOpenStackUnavailable,
				"Listing the OpenStack availability zones failed: " + openstack.Message(openstack.ReasonAuthenticationFailed) +
					". Topology stays disabled (no decision could be made yet); the operator retries."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := testutil.NewSet(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			setTopologyCondition(s, tt.d)
			g.Expect(testutil.Conditions(s)).To(Equal(map[string]testutil.CondState{typ: tt.want}))
		})
	}

	t.Run("When the recheck time differs, it should produce the same message", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, b := testutil.NewSet(time.Unix(0, 0)), testutil.NewSet(time.Unix(1e9, 0))
		setTopologyCondition(a, desired.TopologyDecision{Source: desired.SourceLastKnown, Failure: openstack.ReasonTimeout, RecheckIn: time.Second})
		setTopologyCondition(b, desired.TopologyDecision{Source: desired.SourceLastKnown, Failure: openstack.ReasonTimeout, RecheckIn: 59 * time.Second})
		g.Expect(testutil.Conditions(a)).To(Equal(testutil.Conditions(b)))
	})
}

// Sources of the driver settings, as chooseConfigSource returns them.
var (
	fromUser      = desired.ConfigSource{Kind: desired.UserConfigSource, Name: names.UserConfigMap, Key: names.KeyUserConfig}
	fromInstaller = desired.ConfigSource{Kind: desired.InstallerConfigSource, Name: "cloud-provider-config", Key: "config",
		Data: map[string]string{"config": "[Global]\npassword = s3cret\n"}}
	fromInstallerWithoutKey = desired.ConfigSource{Kind: desired.InstallerConfigSource, Name: "cloud-provider-config", Key: "config",
		Data: map[string]string{names.KeyEnableTopology: "true"}}
	fromNothingStandalone = desired.ConfigSource{Name: "cloud-provider-config"}
	fromNothing           = desired.ConfigSource{}
)

func TestSetConfigCondition(t *testing.T) {
	t.Parallel()
	const typ = names.ConditionConfigDegraded
	tests := []struct {
		name string
		plan desired.Plan
		want testutil.CondState
	}{
		{
			name: "When cinder-csi-config exists, it should name it",
			plan: desired.Plan{ConfigSource: fromUser},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"Driver settings come from ConfigMap openshift-config/cinder-csi-config."},
		},
		{
			name: "When the installer's cloud provider config is read, it should name it, say what is taken and why",
			plan: desired.Plan{ConfigSource: fromInstaller},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"Driver settings come from the installer's cloud provider config, ConfigMap openshift-config/cloud-provider-config, " +
					"as openshift-config/cinder-csi-config does not exist: [BlockStorage] of key config and enable_topology."},
		},
		{
			name: "When the installer's cloud provider config has no key the Infrastructure names, it should say so",
			plan: desired.Plan{ConfigSource: fromInstallerWithoutKey},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"Driver settings come from the installer's cloud provider config, ConfigMap openshift-config/cloud-provider-config, " +
					"as openshift-config/cinder-csi-config does not exist: enable_topology only, as it has no key config."},
		},
		{
			name: "When standalone without either ConfigMap, it should name both",
			plan: desired.Plan{ConfigSource: fromNothingStandalone},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"Neither ConfigMap openshift-config/cinder-csi-config nor the installer's cloud provider config " +
					"openshift-config/cloud-provider-config exists: the driver runs with its defaults."},
		},
		{
			name: "When on HyperShift without cinder-csi-config, it should name that one only",
			plan: desired.Plan{ConfigSource: fromNothing},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected,
				"No ConfigMap openshift-config/cinder-csi-config exists: the driver runs with its defaults."},
		},
		{
			name: "When the TLS profile falls back, it should say so first, then the source",
			plan: desired.Plan{ConfigSource: fromUser, TLS: tlsprofile.Settings{Problem: "The profile is bad."}},
			want: testutil.CondState{operatorv1.ConditionFalse, names.ReasonTLSProfileFallback,
				"The profile is bad. The metrics endpoints use the Intermediate profile until it is fixed. " +
					"Driver settings come from ConfigMap openshift-config/cinder-csi-config."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := testutil.NewSet(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			setConfigCondition(s, &tt.plan)
			g.Expect(testutil.Conditions(s)).To(Equal(map[string]testutil.CondState{typ: tt.want}))
		})
	}
}

func TestConfigSourceEvent(t *testing.T) {
	t.Parallel()
	recorded := func(source string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{names.ConfigSourceAnnotation: source}}}
	}
	tests := []struct {
		name   string
		live   *corev1.ConfigMap
		source desired.ConfigSource
		// want is the Event's note, "" for no Event.
		want string
	}{
		{
			name:   "When cloud-conf records the same source, it should record no Event",
			live:   recorded("openshift-config/cloud-provider-config, key config"),
			source: fromInstaller,
		},
		{
			name:   "When cloud-conf does not exist yet, it should say where the settings come from",
			source: fromUser,
			want:   "Driver settings come from ConfigMap openshift-config/cinder-csi-config.",
		},
		{
			name:   "When cloud-conf records no source (written by csi-operator), it should say where the settings come from",
			live:   &corev1.ConfigMap{},
			source: fromInstaller,
			want: "Driver settings come from the installer's cloud provider config, ConfigMap openshift-config/cloud-provider-config, " +
				"as openshift-config/cinder-csi-config does not exist: [BlockStorage] of key config and enable_topology.",
		},
		{
			name:   "When cinder-csi-config is deleted, it should say the installer's file is read and what was read before",
			live:   recorded("openshift-config/cinder-csi-config"),
			source: fromInstaller,
			want: "Driver settings come from the installer's cloud provider config, ConfigMap openshift-config/cloud-provider-config, " +
				"as openshift-config/cinder-csi-config does not exist: [BlockStorage] of key config and enable_topology. " +
				"Before, they came from: openshift-config/cinder-csi-config.",
		},
		{
			name:   "When the installer's file loses its key, it should say so",
			live:   recorded("openshift-config/cloud-provider-config, key config"),
			source: fromInstallerWithoutKey,
			want: "Driver settings come from the installer's cloud provider config, ConfigMap openshift-config/cloud-provider-config, " +
				"as openshift-config/cinder-csi-config does not exist: enable_topology only, as it has no key config. " +
				"Before, they came from: openshift-config/cloud-provider-config, key config.",
		},
		{
			name:   "When the installer's file is deleted, it should say the defaults apply",
			live:   recorded("openshift-config/cloud-provider-config, key config"),
			source: fromNothingStandalone,
			want: "Neither ConfigMap openshift-config/cinder-csi-config nor the installer's cloud provider config " +
				"openshift-config/cloud-provider-config exists: the driver runs with its defaults. " +
				"Before, they came from: openshift-config/cloud-provider-config, key config.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			note, ok := configSourceEvent(tt.live, tt.source)
			g.Expect(ok).To(Equal(tt.want != ""))
			g.Expect(note).To(Equal(tt.want))
			g.Expect(note).NotTo(ContainSubstring("s3cret"))
		})
	}

	t.Run("When the sources differ, each should have an Event action of its own, so no change hides in another's series", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		actions := map[string]bool{}
		for _, src := range []desired.ConfigSource{fromUser, fromInstaller, fromInstallerWithoutKey, fromNothing} {
			actions[src.Action()] = true
		}
		g.Expect(actions).To(HaveLen(4))
		g.Expect(fromNothingStandalone.Action()).To(Equal(fromNothing.Action()))
	})
}
func TestTopologyConditionWithOverride(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	// What the plan decides when enable_topology is set and the listing for the per-zone classes
	// failed (TestChooseTopology).
	d := desired.TopologyDecision{Enabled: true, Source: desired.SourceOverride, Failure: openstack.ReasonUnreachable,
		OverrideFrom: "openshift-config/cinder-csi-config"}
	s := testutil.NewSet(newFakeClock().now())
	setTopologyCondition(s, d)
	c := testutil.Conditions(s)[names.ConditionTopologyDegraded]
	g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), "the listing for the per-zone classes failed")
	g.Expect(c.Reason).To(Equal(names.ReasonOpenStackUnavailable))
	g.Expect(c.Message).To(HaveSuffix("Topology stays enabled (set by enable_topology in openshift-config/cinder-csi-config); the operator retries."))

	s = testutil.NewSet(newFakeClock().now())
	setTopologyCondition(s, desired.TopologyDecision{Enabled: true, Source: desired.SourceOverride})
	g.Expect(testutil.Conditions(s)[names.ConditionTopologyDegraded].Reason).To(Equal(names.ReasonTopologyOverridden))
}

func TestSetWarningConditions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := testutil.NewSet(newFakeClock().now())
	setWarningConditions(s, []desired.Warning{
		{Type: names.ConditionAttachLimitWarning, On: true, Reason: names.ReasonAttachLimitNotSet, Message: "No limit."},
		{Type: names.ConditionConfigKeysWarning, Reason: names.ReasonAsExpected, Message: "Known keys."},
	})
	g.Expect(testutil.Conditions(s)).To(Equal(map[string]testutil.CondState{
		names.ConditionAttachLimitWarning: {operatorv1.ConditionTrue, names.ReasonAttachLimitNotSet, "No limit."},
		names.ConditionConfigKeysWarning:  {operatorv1.ConditionFalse, names.ReasonAsExpected, "Known keys."},
	}))
}

// TestConditionCoverage keeps Unmanaged and Removed reporting on every condition this manager
// owns: each is the controller workload's or one of otherConditions, and each of those is owned.
func TestConditionCoverage(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	all := append([]string{controllerWorkload.Available, controllerWorkload.Progressing, controllerWorkload.Degraded}, otherConditions()...)
	g.Expect(all).To(ConsistOf(names.ControlPlaneConditions))

	for _, tt := range []struct {
		name string
		set  func(s *conditions.Set)
		want string
	}{
		{name: "When Unmanaged, it should report every warning False with reason Unmanaged", set: func(s *conditions.Set) { controllerWorkload.Unmanaged(s, otherConditions()...) }, want: names.ReasonUnmanaged},
		{name: "When Removed, it should report every warning False with reason Removed", set: func(s *conditions.Set) {
			controllerWorkload.Removed(s, nil, "the CSI controller and its configuration", "", otherConditions()...)
		}, want: names.ReasonRemoved},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := testutil.NewSet(newFakeClock().now())
			tt.set(s)
			conds := testutil.Conditions(s)
			for _, typ := range desired.WarningTypes {
				g.Expect(conds).To(HaveKey(typ))
				g.Expect(conds[typ].Status).To(Equal(operatorv1.ConditionFalse), typ)
				g.Expect(conds[typ].Reason).To(Equal(tt.want), typ)
			}
		})
	}
}
