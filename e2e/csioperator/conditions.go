package csioperator

import (
	"context"
	"fmt"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// ConditionTypes are the ClusterCSIDriver condition types csi-operator's controllers write for
// Cinder (library-go's CSI controller set, its ConfigSync and VolumeSnapshotClass controllers, and
// on HyperShift its DeploymentVersionController). Some carry no OpenStackCinder prefix: library-go
// names them after the controller alone.
func ConditionTypes(hyperShift bool) []string {
	types := []string{
		"OpenStackCinderDriverControllerServiceControllerAvailable",
		"OpenStackCinderDriverControllerServiceControllerProgressing",
		"OpenStackCinderDriverControllerServiceControllerDegraded",
		"OpenStackCinderDriverNodeServiceControllerAvailable",
		"OpenStackCinderDriverNodeServiceControllerProgressing",
		"OpenStackCinderDriverNodeServiceControllerDegraded",
		"OpenStackCinderDriverControlPlaneStaticResourcesControllerDegraded",
		"OpenStackCinderDriverGuestStaticResourcesControllerDegraded",
		"ConfigObservationDegraded",
		"ManagementStateDegraded",
		"StorageClassControllerDegraded",
		"VolumeSnapshotClassControllerDegraded",
		ConfigSyncDegraded,
	}
	if hyperShift {
		types = append(types, "OpenStackCinderDeploymentVersionControllerDegraded")
	}
	return types
}

// ConfigSyncDegraded is the one condition Conditions has True: csi-operator's
// best-known failure, OpenStack unreachable while it detects the topology.
const ConfigSyncDegraded = "ConfigSyncDegraded"

// Conditions are csi-operator's conditions of a running driver whose configuration sync fails:
// both workloads Available and not Progressing, everything else not Degraded but ConfigSync,
// with library-go's reasons.
func Conditions(hyperShift bool, now metav1.Time) []operatorv1.OperatorCondition {
	var out []operatorv1.OperatorCondition
	for _, t := range ConditionTypes(hyperShift) {
		c := operatorv1.OperatorCondition{Type: t, LastTransitionTime: now}
		switch {
		case t == ConfigSyncDegraded:
			c.Status, c.Reason = operatorv1.ConditionTrue, "SyncError"
			c.Message = "failed to get availability zones: Get \"https://cloud.example.com:13000/v3/\": net/http: TLS handshake timeout"
		case strings.HasSuffix(t, "ControllerServiceControllerAvailable"):
			c.Status, c.Reason, c.Message = operatorv1.ConditionTrue, "AsExpected", "Deployment is available"
		case strings.HasSuffix(t, "Available"):
			c.Status, c.Reason, c.Message = operatorv1.ConditionTrue, "AsExpected", "DaemonSet is available"
		case strings.HasSuffix(t, "Progressing"):
			c.Status, c.Reason = operatorv1.ConditionFalse, "AsExpected"
		default:
			c.Status = operatorv1.ConditionFalse
		}
		out = append(out, c)
	}
	return out
}

// WriteConditions writes conds to the ClusterCSIDriver's status as library-go does: an update of
// the status subresource under csi-operator's field manager, replacing the conditions of the
// same types and keeping the others.
func WriteConditions(ctx context.Context, guest client.Client, conds []operatorv1.OperatorCondition) error {
	d := &operatorv1.ClusterCSIDriver{}
	if err := guest.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err != nil {
		return err
	}
	for _, c := range conds {
		replaced := false
		for i := range d.Status.Conditions {
			if d.Status.Conditions[i].Type == c.Type {
				d.Status.Conditions[i], replaced = c, true
			}
		}
		if !replaced {
			d.Status.Conditions = append(d.Status.Conditions, c)
		}
	}
	if err := guest.Status().Update(ctx, d, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("writing csi-operator's conditions: %w", err)
	}
	return nil
}
