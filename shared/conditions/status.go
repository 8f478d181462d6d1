package conditions

import (
	"context"
	"fmt"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// ApplyStatus writes one manager's conditions (and, when observedGeneration is not nil,
// status.observedGeneration) to the ClusterCSIDriver through the status subresource, as the
// applier's field owner. Only these fields are sent: the other manager's conditions, owned by
// another field owner, are left as they are, and nothing is sent when nothing changed. A failed
// write wraps the applier's *apply.ObjectError, which Classify turns into a condition message.
func ApplyStatus(ctx context.Context, a *apply.Applier, driverName string, conds []operatorv1.OperatorCondition, observedGeneration *int64) error {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		cond := map[string]any{
			"type":               c.Type,
			"status":             string(c.Status),
			"reason":             c.Reason,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		}
		// message is omitempty: the cached object never shows an empty one, so sending ""
		// would never compare equal and every reconcile would re-send the status.
		if c.Message != "" {
			cond["message"] = c.Message
		}
		list = append(list, cond)
	}
	status := map[string]any{"conditions": list}
	if observedGeneration != nil {
		status["observedGeneration"] = *observedGeneration
	}
	// Built as unstructured: the typed OperatorStatus would also send readyReplicas (not
	// omitempty), claiming a field neither manager means to own.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": operatorv1.GroupVersion.String(),
		"kind":       "ClusterCSIDriver",
		"metadata":   map[string]any{"name": driverName},
		"status":     status,
	}}
	if _, err := a.ApplyStatus(ctx, u); err != nil {
		return fmt.Errorf("writing ClusterCSIDriver conditions: %w", err)
	}
	return nil
}

// RecordTransitions records an Event on the ClusterCSIDriver for every Degraded or warning
// condition in conds that turned True (a Warning with its reason and message) or stopped being
// True (Normal, reason Recovered), judged against the conditions the driver carried before this
// reconcile. So `oc get events` shows when a warning rose and cleared, as it does for Degraded.
//
// The Event's action is the condition type: the events recorder folds Events of one object,
// reason and action into a series that keeps the first note, so two conditions clearing together
// under one action would show as one.
func RecordTransitions(rec events.EventRecorder, driver *operatorv1.ClusterCSIDriver, conds []operatorv1.OperatorCondition) {
	if rec == nil {
		return
	}
	for _, c := range conds {
		cleared := "%s is no longer degraded."
		switch {
		case strings.HasSuffix(c.Type, "Degraded"):
		case strings.HasSuffix(c.Type, WarningSuffix):
			cleared = "%s no longer applies."
		default:
			continue
		}
		was := Find(driver.Status.Conditions, c.Type)
		wasTrue := was != nil && was.Status == operatorv1.ConditionTrue
		switch {
		case c.Status == operatorv1.ConditionTrue && !wasTrue:
			rec.Eventf(driver, nil, corev1.EventTypeWarning, c.Reason, c.Type, "%s: %s", c.Type, c.Message)
		case c.Status != operatorv1.ConditionTrue && wasTrue:
			rec.Eventf(driver, nil, corev1.EventTypeNormal, "Recovered", c.Type, cleared, c.Type)
		}
	}
}
