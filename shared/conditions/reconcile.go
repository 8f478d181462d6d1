package conditions

import (
	"context"
	"errors"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Unmanaged reports managementState Unmanaged: every given condition False, the operator changes
// nothing.
func (s *Set) Unmanaged(types ...string) {
	const msg = "managementState is Unmanaged: the operator changes nothing."
	for _, t := range types {
		s.False(t, names.ReasonUnmanaged, msg)
	}
}

// Writer is how a manager writes its conditions back to the ClusterCSIDriver.
type Writer struct {
	// Applier writes the status as the manager's field owner.
	Applier *apply.Applier
	// Recorder gets an Event for every Degraded or warning condition that turned True or cleared.
	Recorder events.EventRecorder
	// ObserveGeneration also writes status.observedGeneration (one manager owns it).
	ObserveGeneration bool
	// Remove are condition types of other writers that this one removes whenever the driver
	// carries them (RemoveTypes): csi-operator's, for the manager that owns the observed
	// generation. One manager does it, so that two never race to patch the same list.
	Remove []string
}

// write removes the Remove types the driver carries, records the Events, then writes s's
// conditions (and the observed generation) to the driver. A Set without conditions writes no
// conditions.
func (w Writer) write(ctx context.Context, driver *operatorv1.ClusterCSIDriver, s *Set) error {
	removeErr := RemoveTypes(ctx, w.Applier, driver, w.Remove)
	conds := s.List()
	var observed *int64
	if w.ObserveGeneration {
		observed = &driver.Generation
	}
	if len(conds) == 0 && observed == nil {
		return removeErr
	}
	RecordTransitions(w.Recorder, driver, conds)
	metrics.SetConditions(conds)
	return errors.Join(removeErr, ApplyStatus(ctx, w.Applier, driver.Name, conds, observed))
}

// Body is one manager's reconcile of the ClusterCSIDriver as read: it sets its conditions in st.
type Body func(ctx context.Context, driver *operatorv1.ClusterCSIDriver, st *Set) (reconcile.Result, error)

// Reconcile reads the ClusterCSIDriver name through c, runs body on it with a Set of its
// conditions started at now, and then writes the Set with w, also when body failed (the
// conditions say why). When the driver does not exist there is nothing to do.
func Reconcile(ctx context.Context, c client.Client, name string, now time.Time, w Writer, body Body) (reconcile.Result, error) {
	driver := &operatorv1.ClusterCSIDriver{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, driver); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	st := New(driver.Status.Conditions, metav1.NewTime(now))
	res, err := body(ctx, driver, st)
	return res, errors.Join(err, w.write(ctx, driver, st))
}
