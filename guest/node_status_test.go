package guest

import (
	"errors"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

// statusDaemonSet returns a node DaemonSet with the given generation and status.
func statusDaemonSet(generation int64, st appsv1.DaemonSetStatus) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: names.NodeDaemonSet, Namespace: names.GuestNamespace, Generation: generation},
		Status:     st,
	}
}

// recorded returns ds with generation recorded as seen rolled out.
func recorded(ds *appsv1.DaemonSet, generation string) *appsv1.DaemonSet {
	ds.Annotations = map[string]string{names.StableGenerationAnnotation: generation}
	return ds
}

func TestStableGeneration(t *testing.T) {
	t.Parallel()
	complete := appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		want string
	}{
		{"When there is no DaemonSet, it should record nothing", nil, ""},
		{"When every node runs the current generation, available, it should record that generation", statusDaemonSet(4, complete), "4"},
		{"When the generation is recorded already, it should record nothing", recorded(statusDaemonSet(4, complete), "4"), ""},
		{"When an older generation is recorded and the current one is complete, it should record the current one", recorded(statusDaemonSet(4, complete), "3"), "4"},
		{"When the DaemonSet controller has not observed the generation, it should record nothing", statusDaemonSet(5, complete), ""},
		{"When a node does not run the current generation yet, it should record nothing",
			statusDaemonSet(4, appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}), ""},
		{"When a node's pod is not available, it should record nothing",
			statusDaemonSet(4, appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stableGeneration(tc.ds); got != tc.want {
				t.Errorf("stableGeneration = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSetNodeConditions(t *testing.T) {
	t.Parallel()
	type cond = testutil.CondState
	notDegraded := cond{operatorv1.ConditionFalse, names.ReasonAsExpected, ""}
	// applyErr is a refusal by the API server, as the applier returns it.
	applyErr := &apply.ObjectError{Op: apply.OpApply, Cluster: apply.ClusterGuest, GVK: appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Resource: "daemonsets", Namespace: "openshift-cluster-csi-drivers", Name: "x", Err: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "x", errors.New("no"))}
	applyFailed := func() cond {
		reason, msg := conditions.Classify(applyErr, "Applying the CSI node DaemonSet")
		return cond{operatorv1.ConditionTrue, reason, msg}
	}()
	rolledOut := appsv1.DaemonSetStatus{
		ObservedGeneration: 4, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3,
		NumberReady: 3, NumberAvailable: 3,
	}

	tests := []testutil.StatusCase[*appsv1.DaemonSet]{
		{
			Name:       "When there is no DaemonSet and cloud-conf is missing, it should say what it waits for",
			WaitingFor: "Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes.",
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonWaitingForConfig, "Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes."},
				cond{operatorv1.ConditionFalse, names.ReasonWaitingForConfig, "Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes."},
				notDegraded,
			),
		},
		{
			Name: "When there is no DaemonSet yet, it should report it being created",
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				cond{operatorv1.ConditionTrue, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				notDegraded,
			),
		},
		{
			Name: "When some nodes run an old template, it should be available and rolling out",
			Live: statusDaemonSet(4, appsv1.DaemonSetStatus{
				ObservedGeneration: 4, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3,
			}),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 1 of 3 nodes updated."},
				notDegraded,
			),
		},
		{
			Name: "When the DaemonSet controller has not observed the new generation, it should be rolling out",
			Live: statusDaemonSet(5, rolledOut),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 3 of 3 nodes updated."},
				notDegraded,
			),
		},
		{
			Name: "When every node runs the current template, it should be available and rolled out",
			Live: statusDaemonSet(4, rolledOut),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				notDegraded,
			),
		},
		{
			Name: "When a node's pod is missing at a generation recorded as rolled out (a node rebooting), it should say so in Available and not be rolling out",
			Live: recorded(statusDaemonSet(4, appsv1.DaemonSetStatus{
				ObservedGeneration: 4, DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberReady: 2, NumberAvailable: 2, NumberUnavailable: 1,
			}), "4"),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 2 of 3 nodes."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				notDegraded,
			),
		},
		{
			Name: "When a newer generation than the recorded one rolls out, it should be rolling out",
			Live: recorded(statusDaemonSet(5, appsv1.DaemonSetStatus{
				ObservedGeneration: 5, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3,
			}), "4"),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 1 of 3 nodes updated."},
				notDegraded,
			),
		},
		{
			Name: "When pods are scheduled but none is available, it should not be available and point at the pods",
			Live: statusDaemonSet(1, appsv1.DaemonSetStatus{
				ObservedGeneration: 1, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2,
			}),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonNotAvailable, "The CSI node plugin is not available on any node yet; check the openstack-cinder-csi-driver-node pods."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 2 of 2 nodes updated."},
				notDegraded,
			),
		},
		{
			Name: "When the cluster has no nodes yet, it should be available with nothing to roll out",
			Live: statusDaemonSet(1, appsv1.DaemonSetStatus{ObservedGeneration: 1}),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The cluster has no nodes for the CSI node plugin yet."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				notDegraded,
			),
		},
		{
			Name: "When a new DaemonSet has not been observed yet, it should not claim availability on zero nodes",
			Live: statusDaemonSet(1, appsv1.DaemonSetStatus{}),
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonNotAvailable, "The CSI node plugin is not available on any node yet; check the openstack-cinder-csi-driver-node pods."},
				cond{operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 0 of 0 nodes updated."},
				notDegraded,
			),
		},
		{
			Name:     "When applying failed, it should be degraded with a stable message that does not quote the error",
			Live:     statusDaemonSet(4, rolledOut),
			ApplyErr: applyErr,
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				cond{operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				applyFailed,
			),
		},
		{
			Name:     "When applying failed before the DaemonSet existed, it should still report it being created",
			ApplyErr: applyErr,
			Want: testutil.Want(nodeWorkload,
				cond{operatorv1.ConditionFalse, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				cond{operatorv1.ConditionTrue, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				applyFailed,
			),
		},
	}
	testutil.RunStatusCases(t, setNodeConditions, tests)
}
