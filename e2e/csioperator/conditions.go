package csioperator

import (
	"context"
	"fmt"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// ConditionTypes are the ClusterCSIDriver condition types csi-operator's controllers write for
// Cinder today (names.CSIOperatorConditions, less the ones of older releases, and on HyperShift
// only its DeploymentVersionController's).
func ConditionTypes(hyperShift bool) []string {
	var types []string
	for _, t := range names.CSIOperatorConditions {
		switch {
		case strings.HasPrefix(t, "OpenStackCinderDriverConditionalStaticResourcesController"):
		case t == "OpenStackCinderDeploymentVersionControllerDegraded" && !hyperShift:
		default:
			types = append(types, t)
		}
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

// WriteConditions writes conds to the ClusterCSIDriver's status as library-go's controllers do:
// each controller (a condition type less its Available, Progressing or Degraded suffix) applies
// its own conditions to the status subresource under a field manager of its own.
func WriteConditions(ctx context.Context, guest client.Client, conds []operatorv1.OperatorCondition) error {
	byController := map[string][]any{}
	var controllers []string
	for _, c := range conds {
		name := c.Type
		for _, suffix := range []string{"Available", "Progressing", "Degraded"} {
			name = strings.TrimSuffix(name, suffix)
		}
		if _, ok := byController[name]; !ok {
			controllers = append(controllers, name)
		}
		cond := map[string]any{
			"type": c.Type, "status": string(c.Status), "reason": c.Reason,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		}
		if c.Message != "" {
			cond["message"] = c.Message
		}
		byController[name] = append(byController[name], cond)
	}
	for _, name := range controllers {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": operatorv1.GroupVersion.String(), "kind": "ClusterCSIDriver",
			"metadata": map[string]any{"name": names.ClusterCSIDriverName},
			"status":   map[string]any{"conditions": byController[name]},
		}}
		if err := guest.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(name), client.ForceOwnership); err != nil {
			return fmt.Errorf("writing csi-operator's %s conditions: %w", name, err)
		}
	}
	return nil
}
