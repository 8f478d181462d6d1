package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// leaseRecheck is how soon the leases are looked at again while the pod holding one is still
// terminating, or after a lease changed between its read and its deletion: the rest of a pod's
// graceful termination, seconds.
const leaseRecheck = 3 * time.Second

// leaseLapse is how long after its renewTime a sidecar's lease may be deleted once its holder
// pod is gone. client-go's leader elector (which the sidecars run, with OpenShift's timings)
// waits RetryPeriod after a successful renewal before it tries again, and only gives up leading
// RenewDeadline after that try began: a leader cut off from the API server keeps acting until
// renewTime+26 s+107 s, not renewTime+107 s. Deleting earlier would let the new pod's sidecar
// lead beside it. The 4 s left before the 137 s lease duration is the same margin for clock
// skew and request latency that client-go's own candidates keep.
const leaseLapse = clusters.RetryPeriod + clusters.RenewDeadline

// LeaseReclaimer deletes a sidecar's leader lease (names.SidecarLeases) that is still held
// under the name of a controller pod that no longer exists, once the lease has lapsed, so that
// the sidecar of the current pod takes it at its next try (OpenShift's retry period, 26 s)
// instead of when the lease expires in that sidecar's eyes.
//
// This operator's sidecars release their leases when they stop; csi-operator's, and any
// sidecar killed before it could, do not. A waiting sidecar counts the 137 s lease duration
// from when it first read the last renewal, not from the renewal itself, and on a rollout
// (maxSurge 0) the new pod starts only after the old one was told to stop, so without this the
// first rollout after a switch from csi-operator (and every rollout by csi-operator itself)
// leaves new volumes waiting up to about three minutes to be provisioned or attached.
// Deleting at renewTime+leaseLapse (133 s) saves the 4 s between leaseLapse and the lease
// duration plus the time from the last renewal to the new sidecar's first read: the rest of
// the old leader's retry period and the new pod's start, typically half a minute.
//
// A lease is deleted only when both the pod named as its holder is gone from the API server
// and its renewTime is leaseLapse old. A gone pod object alone proves nothing: a pod deleted
// with --grace-period=0 --force, or collected with its lost node, can still be running, and
// such a leader, partitioned or not, must not be fenced out while it still thinks it leads.
// When the pod is gone but the lease is fresher, the reclaimer comes back when it lapses. The
// deletion is conditional on the lease's UID and resourceVersion, so a lease renewed or taken
// over in between is left alone and looked at again. It runs on the controller Deployment's
// events (a rollout, a replaced pod) and on those timers, never at rest, and reads pods and
// leases directly from the API server, only then: there is no watch on either. Without the
// permissions (an operator started with csi-operator's RBAC may lack them), it logs that once
// and the leases expire as before.
type LeaseReclaimer struct {
	// Mgmt reads the controller pods in Namespace (uncached); Guest reads and deletes the
	// leases in the guest namespace (uncached).
	Mgmt, Guest client.Reader
	GuestWriter client.Client
	Namespace   string
	Recorder    recorder.EventRecorder
	// Clock tells when a lease lapsed; nil is the real clock. Tests set a fake one.
	Clock clock.PassiveClock

	forbiddenLogged bool
}

// SetupWithManager reconciles on the controller Deployment's events in the management cache.
func (r *LeaseReclaimer) SetupWithManager(mgr ctrl.Manager, mgmt cluster.Cluster) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sidecar-leases").
		WatchesRawSource(clusters.Watch(mgmt.GetCache(), &appsv1.Deployment{},
			clusters.InNamespace(r.Namespace), clusters.Named(names.ControllerDeployment),
			predicate.Funcs{DeleteFunc: func(_ event.DeleteEvent) bool { return false }})).
		Complete(r)
}

// Reconcile deletes the sidecar leases whose holder pod is gone and which have lapsed, and
// comes back while a holder is still terminating or a lease of a gone holder has yet to lapse.
func (r *LeaseReclaimer) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var clk clock.PassiveClock = clock.RealClock{}
	if r.Clock != nil {
		clk = r.Clock
	}
	// again is the soonest any lease needs another look; zero means none does.
	var again time.Duration
	later := func(d time.Duration) {
		if again == 0 || d < again {
			again = d
		}
	}
	for _, name := range names.SidecarLeases {
		lease := &coordinationv1.Lease{}
		err := r.Guest.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: name}, lease)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return r.failed(ctx, err, "reading lease "+name)
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if !strings.HasPrefix(holder, names.ControllerDeployment+"-") {
			continue
		}
		pod := &metav1.PartialObjectMetadata{}
		pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
		err = r.Mgmt.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: holder}, pod)
		switch {
		case err == nil && pod.DeletionTimestamp != nil:
			later(leaseRecheck)
			continue
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			return r.failed(ctx, err, "reading pod "+holder)
		}
		// client-go always writes renewTime; a lease without one has no lapse to measure, so
		// it is left to expire in the waiting sidecar's eyes.
		if lease.Spec.RenewTime == nil {
			continue
		}
		if left := lease.Spec.RenewTime.Add(leaseLapse).Sub(clk.Now()); left > 0 {
			log.V(4).Info("Waiting for the lease of a gone controller pod to lapse", "lease", name, "holder", holder, "left", left.String())
			later(left)
			continue
		}
		err = r.GuestWriter.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// Renewed or taken over since the read: the next look sees by whom, and whether
			// a gone pod's containers are still running and renewing it.
			later(leaseRecheck)
			continue
		case err != nil:
			return r.failed(ctx, err, "deleting lease "+name)
		}
		log.V(0).Info("Released a lapsed sidecar lease held by a controller pod that is gone", "lease", name, "holder", holder)
		if r.Recorder != nil {
			driver := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}
			r.Recorder.Eventf(driver, nil, corev1.EventTypeNormal, names.ReasonLeaseReleased, "ReleaseLease",
				"Deleted lease %s/%s, held by controller pod %s, which no longer exists and last renewed it over %s ago: the current controller's sidecar takes it at its next try", names.GuestNamespace, name, holder, leaseLapse)
		}
	}
	return ctrl.Result{RequeueAfter: again}, nil
}

// failed returns err for a retry, except a lack of permission, which is logged once and ends
// the attempt: the leases then expire on their own, as without this reconciler.
func (r *LeaseReclaimer) failed(ctx context.Context, err error, what string) (ctrl.Result, error) {
	if apierrors.IsForbidden(err) {
		if !r.forbiddenLogged {
			ctrl.LoggerFrom(ctx).Info("Not releasing the leases of gone controller pods: not permitted; they expire on their own", "step", what, "error", err.Error())
			r.forbiddenLogged = true
		}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, fmt.Errorf("%s: %w", what, err)
}

// runningControllerPods names the controller pods in the namespace that may still run: those not
// being deleted, and those whose graceful termination has not run out (after it the kubelet kills
// them, and the API server no longer accepts their token). Under managementState Removed in
// standalone mode it decides how long the controller's ServiceAccount stays (holdServiceAccount).
// When the pods cannot be listed (no permission, an API error), it names none, logging it once:
// the removal then goes on at once, as it did before, and the leases expire on their own.
func (r *Reconciler) runningControllerPods(ctx context.Context) []string {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	err := r.MgmtAPI.List(ctx, pods, client.InNamespace(r.Config.Namespace),
		client.MatchingLabels{names.ControllerPodLabel: names.ControllerDeployment})
	if err != nil {
		if !r.podsUnreadLogged {
			ctrl.LoggerFrom(ctx).Info("Not waiting for the controller's pods before deleting its ServiceAccount: they cannot be listed; their leader leases expire on their own",
				"error", err.Error())
			r.podsUnreadLogged = true
		}
		return nil
	}
	now := r.now()
	var running []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil || p.DeletionTimestamp.After(now) {
			running = append(running, p.Name)
		}
	}
	return running
}
