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
// terminating: the rest of a pod's graceful termination, seconds.
const leaseRecheck = 3 * time.Second

// LeaseReclaimer deletes a sidecar's leader lease (names.SidecarLeases) that is still held
// under the name of a controller pod that no longer exists, so that the sidecar of the current
// pod takes it at its next try (OpenShift's retry period, 26 s) instead of when the lease
// expires (137 s after the last renewal).
//
// This operator's sidecars release their leases when they stop; csi-operator's, and any
// sidecar killed before it could, do not. Without this, the first rollout after a switch from
// csi-operator (and every rollout by csi-operator itself) leaves new volumes waiting up to
// two and a half minutes to be provisioned or attached.
//
// A lease is deleted only when the pod named as its holder is gone from the API server: a pod
// object goes only once the kubelet has stopped its containers, so no sidecar of it can still
// act as leader. The deletion is conditional on the lease's UID and resourceVersion, so a lease
// renewed or taken over in between is left alone. It runs on the controller Deployment's events
// (a rollout, a replaced pod), never at rest, and reads pods and leases directly from the API
// server, only then: there is no watch on either. Without the permissions (an operator started
// with csi-operator's RBAC may lack them), it logs that once and the leases expire as before.
type LeaseReclaimer struct {
	// Mgmt reads the controller pods in Namespace (uncached); Guest reads and deletes the
	// leases in the guest namespace (uncached).
	Mgmt, Guest client.Reader
	GuestWriter client.Client
	Namespace   string
	Recorder    recorder.EventRecorder

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

// Reconcile deletes the sidecar leases whose holder pod is gone, and comes back while a holder
// is still terminating.
func (r *LeaseReclaimer) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	waiting := false
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
			waiting = true
			continue
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			return r.failed(ctx, err, "reading pod "+holder)
		}
		err = r.GuestWriter.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			continue
		case err != nil:
			return r.failed(ctx, err, "deleting lease "+name)
		}
		log.V(0).Info("Released a sidecar lease held by a controller pod that is gone", "lease", name, "holder", holder)
		if r.Recorder != nil {
			driver := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}
			r.Recorder.Eventf(driver, nil, corev1.EventTypeNormal, names.ReasonLeaseReleased, "ReleaseLease",
				"Deleted lease %s/%s, held by controller pod %s, which no longer exists: the current controller's sidecar takes it at its next try", names.GuestNamespace, name, holder)
		}
	}
	if waiting {
		return ctrl.Result{RequeueAfter: leaseRecheck}, nil
	}
	return ctrl.Result{}, nil
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
