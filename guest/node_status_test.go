package guest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
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

func TestSetNodeConditions(t *testing.T) {
	t.Parallel()
	const (
		avail = names.ConditionNodeAvailable
		prog  = names.ConditionNodeProgressing
		degr  = names.ConditionNodeDegraded
	)
	notDegraded := testutil.CondState{operatorv1.ConditionFalse, names.ReasonAsExpected, ""}
	// applyErr is a refusal by the API server, as the applier returns it.
	applyErr := &apply.ObjectError{Op: apply.OpApply, Cluster: apply.ClusterGuest, GVK: appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Resource: "daemonsets", Namespace: "openshift-cluster-csi-drivers", Name: "x", Err: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "x", errors.New("no"))}
	applyFailed := func() testutil.CondState {
		reason, msg := conditions.Classify(applyErr, "Applying the CSI node DaemonSet")
		return testutil.CondState{operatorv1.ConditionTrue, reason, msg}
	}()
	rolledOut := appsv1.DaemonSetStatus{
		ObservedGeneration: 4, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3,
		NumberReady: 3, NumberAvailable: 3,
	}

	tests := []struct {
		name       string
		ds         *appsv1.DaemonSet
		waitingFor string
		applyErr   error
		want       map[string]testutil.CondState
	}{
		{
			name:       "When there is no DaemonSet and cloud-conf is missing, it should say what it waits for",
			waitingFor: "Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes.",
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionFalse, names.ReasonWaitingForConfig, "Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes."},
				prog:  {operatorv1.ConditionFalse, names.ReasonWaitingForConfig, "Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes."},
				degr:  notDegraded,
			},
		},
		{
			name: "When there is no DaemonSet yet, it should report it being created",
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionFalse, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				prog:  {operatorv1.ConditionTrue, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				degr:  notDegraded,
			},
		},
		{
			name: "When some nodes run an old template, it should be available and rolling out",
			ds: statusDaemonSet(4, appsv1.DaemonSetStatus{
				ObservedGeneration: 4, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3,
			}),
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				prog:  {operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 1 of 3 nodes updated."},
				degr:  notDegraded,
			},
		},
		{
			name: "When the DaemonSet controller has not observed the new generation, it should be rolling out",
			ds:   statusDaemonSet(5, rolledOut),
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				prog:  {operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 3 of 3 nodes updated."},
				degr:  notDegraded,
			},
		},
		{
			name: "When every node runs the current template, it should be available and rolled out",
			ds:   statusDaemonSet(4, rolledOut),
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				prog:  {operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				degr:  notDegraded,
			},
		},
		{
			name: "When pods are scheduled but none is available, it should not be available and point at the pods",
			ds: statusDaemonSet(1, appsv1.DaemonSetStatus{
				ObservedGeneration: 1, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2,
			}),
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionFalse, names.ReasonNotAvailable,
					"The CSI node plugin is not available on any node yet; check the openstack-cinder-csi-driver-node pods."},
				prog: {operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 2 of 2 nodes updated."},
				degr: notDegraded,
			},
		},
		{
			name: "When the cluster has no nodes yet, it should be available with nothing to roll out",
			ds:   statusDaemonSet(1, appsv1.DaemonSetStatus{ObservedGeneration: 1}),
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionTrue, names.ReasonAsExpected, "The cluster has no nodes for the CSI node plugin yet."},
				prog:  {operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				degr:  notDegraded,
			},
		},
		{
			name: "When a new DaemonSet has not been observed yet, it should not claim availability on zero nodes",
			ds:   statusDaemonSet(1, appsv1.DaemonSetStatus{}),
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionFalse, names.ReasonNotAvailable,
					"The CSI node plugin is not available on any node yet; check the openstack-cinder-csi-driver-node pods."},
				prog: {operatorv1.ConditionTrue, names.ReasonRollingOut, "The CSI node plugin is rolling out: 0 of 0 nodes updated."},
				degr: notDegraded,
			},
		},
		{
			name:     "When applying failed, it should be degraded with a stable message that does not quote the error",
			ds:       statusDaemonSet(4, rolledOut),
			applyErr: applyErr,
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionTrue, names.ReasonAsExpected, "The CSI node plugin is available on 3 of 3 nodes."},
				prog:  {operatorv1.ConditionFalse, names.ReasonAsExpected, "The CSI node plugin is rolled out."},
				degr:  applyFailed,
			},
		},
		{
			name:     "When applying failed before the DaemonSet existed, it should still report it being created",
			applyErr: applyErr,
			want: map[string]testutil.CondState{
				avail: {operatorv1.ConditionFalse, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				prog:  {operatorv1.ConditionTrue, names.ReasonDeploying, "The CSI node DaemonSet is being created."},
				degr:  applyFailed,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := conditions.New(nil, metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)))
			setNodeConditions(s, tt.ds, tt.waitingFor, tt.applyErr)
			g.Expect(testutil.Conditions(s)).To(Equal(tt.want))
		})
	}

	t.Run("When the same state is seen at another time with another error text, it should produce the same messages", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ds := statusDaemonSet(2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 5, UpdatedNumberScheduled: 2, NumberAvailable: 4})
		first := conditions.New(nil, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		second := conditions.New(nil, metav1.NewTime(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)))
		setNodeConditions(first, ds, "", fmt.Errorf("timeout at %s", time.Now()))
		setNodeConditions(second, ds.DeepCopy(), "", fmt.Errorf("timeout at %s", time.Now().Add(time.Minute)))
		g.Expect(testutil.Conditions(second)).To(Equal(testutil.Conditions(first)))
	})
}
