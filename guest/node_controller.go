package guest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// Reconciler keeps the guest-side Cinder CSI objects in shape for the one ClusterCSIDriver.
type Reconciler struct {
	// Guest talks to the guest cluster (in standalone mode, the one cluster).
	Guest    client.Client
	Config   Config
	Decoder  *manifests.Decoder
	Recorder recorder.EventRecorder

	cluster    cluster.Cluster
	controller controller.Controller
	// snapshotClasses is the VolumeSnapshotClass watch, started once its CRD is served.
	snapshotClasses clusters.LateWatch
	now             func() time.Time
}

var driverRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: names.ClusterCSIDriverName}}

// enqueueDriver maps every event to the one ClusterCSIDriver.
var enqueueDriver = handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{driverRequest}
})

// SetupWithManager watches the ClusterCSIDriver, the node cloud-conf and every owned object.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, guest cluster.Cluster) error {
	if r.now == nil {
		r.now = time.Now
	}
	r.cluster = guest
	watch := func(obj client.Object, preds ...predicate.Predicate) source.Source {
		return source.Kind(guest.GetCache(), obj, enqueueDriver, preds...)
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("guest").
		WatchesRawSource(watch(&operatorv1.ClusterCSIDriver{},
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesRawSource(watch(&corev1.ConfigMap{}, predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == names.GuestNamespace && o.GetName() == names.NodeCloudConf(r.Config.HyperShift)
		}))).
		WatchesRawSource(watch(&appsv1.DaemonSet{})).
		WatchesRawSource(watch(&corev1.ServiceAccount{})).
		WatchesRawSource(watch(&rbacv1.ClusterRole{})).
		WatchesRawSource(watch(&rbacv1.ClusterRoleBinding{})).
		WatchesRawSource(watch(&rbacv1.Role{})).
		WatchesRawSource(watch(&rbacv1.RoleBinding{})).
		WatchesRawSource(watch(&storagev1.CSIDriver{})).
		WatchesRawSource(watch(&storagev1.StorageClass{})).
		WatchesRawSource(watch(&apiextensionsv1.CustomResourceDefinition{})).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// Reconcile makes the guest objects match the ClusterCSIDriver and the node cloud-conf, then
// writes this manager's conditions and the observed generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	driver, st, err := conditions.Begin(ctx, r.Guest, req.Name, r.now())
	if driver == nil {
		return ctrl.Result{}, err
	}
	defer func() {
		status := apply.New(r.Guest, names.FieldOwnerGuest).On(r.errCluster())
		reterr = errors.Join(reterr, conditions.Write(ctx, r.Recorder, status, driver, st, &driver.Generation))
	}()
	if v, err := loglevel.Verbosity(driver.Spec.OperatorLogLevel); err == nil && r.Config.LogLevel != nil && r.Config.LogLevel.Set(v) {
		log.Info("Changed the operator's verbosity", "verbosity", v)
	}

	s, err := r.readState(ctx, driver)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.GuestConditions...)
		st.Fold(names.ConditionNodeDegraded, err, "Reading the operator's inputs")
		return ctrl.Result{}, err
	}
	p, err := Desired(r.Decoder, r.Config, *s)
	if err != nil {
		return ctrl.Result{}, err
	}
	appliers := plan.Appliers{plan.Guest: apply.New(r.Guest, names.FieldOwnerGuest).Adopting(names.LegacyFieldOwners...).On(r.errCluster())}

	switch p.ManagementState {
	case operatorv1.Unmanaged:
		setNodeConditions(st, s.DaemonSet, "", nil)
		st.Unmanaged(names.ConditionNodeProgressing, names.ConditionNodeDegraded,
			names.ConditionStaticResourcesDegraded, names.ConditionStorageClassDegraded)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		err := appliers.Delete(ctx, log, p.Delete)
		st.Removed(names.ConditionNodeAvailable, names.ConditionNodeProgressing, names.ConditionNodeDegraded,
			err, "the CSI node plugin, CSIDriver, StorageClass and VolumeSnapshotClass",
			names.ConditionStaticResourcesDegraded, names.ConditionStorageClassDegraded)
		return ctrl.Result{}, err
	}

	if len(p.Problems) > 0 {
		st.True(names.ConditionGuestConfigDegraded, names.ReasonInvalidConfig, strings.Join(p.Problems, " "))
	} else {
		st.False(names.ConditionGuestConfigDegraded, names.ReasonAsExpected, "")
	}

	failed := appliers.Apply(ctx, log, p.Apply)
	if p.SnapshotClass && failed[groupClasses] == nil {
		if err := r.snapshotClasses.Start(r.watchSnapshotClasses); err != nil {
			failed[groupClasses] = err
		}
	}
	if err := appliers.Delete(ctx, log, p.Delete); err != nil {
		failed[groupClasses] = errors.Join(failed[groupClasses], err)
	}

	st.Fold(names.ConditionStaticResourcesDegraded, failed[groupStatic], "Applying the CSI driver's ServiceAccount, RBAC and CSIDriver")
	setNodeConditions(st, s.DaemonSet, p.NodeWaiting, failed[groupNode])
	st.Fold(names.ConditionStorageClassDegraded, failed[groupClasses], "Applying the StorageClass and VolumeSnapshotClass")
	return ctrl.Result{}, errors.Join(failed[groupStatic], failed[groupNode], failed[groupClasses])
}

// readState reads what the guest manager decides from; a missing object is not an error.
func (r *Reconciler) readState(ctx context.Context, driver *operatorv1.ClusterCSIDriver) (*State, error) {
	s := &State{Driver: driver}
	var (
		cloudConf corev1.ConfigMap
		ds        appsv1.DaemonSet
		sc        storagev1.StorageClass
		crd       apiextensionsv1.CustomResourceDefinition
		scs       storagev1.StorageClassList
	)
	get := func(key client.ObjectKey, obj client.Object, found func()) error {
		ok, err := apply.GetOptional(ctx, r.Guest, r.errCluster(), key, obj)
		if ok {
			found()
		}
		return err
	}
	err := errors.Join(
		get(client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeCloudConf(r.Config.HyperShift)}, &cloudConf, func() { s.CloudConf = &cloudConf }),
		get(client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, &ds, func() { s.DaemonSet = &ds }),
		get(client.ObjectKey{Name: names.StorageClass}, &sc, func() { s.StorageClass = &sc }),
		get(client.ObjectKey{Name: names.VolumeSnapshotClassCRD}, &crd, func() { s.SnapshotCRD = clusters.Established(&crd) }),
	)
	if err != nil {
		return nil, err
	}
	if err := apply.List(ctx, r.Guest, r.errCluster(), &scs); err != nil {
		return nil, err
	}
	s.StorageClasses = scs.Items
	return s, nil
}

// cluster names the guest in errors on HyperShift; a standalone install has one cluster.
func (r *Reconciler) errCluster() apply.Cluster {
	return apply.ClusterFor(r.Config.HyperShift, apply.ClusterGuest)
}

// watchSnapshotClasses watches VolumeSnapshotClasses, so a deleted one is recreated.
func (r *Reconciler) watchSnapshotClasses() error {
	err := r.controller.Watch(source.Kind(r.cluster.GetCache(), client.Object(&snapshotv1.VolumeSnapshotClass{}), enqueueDriver))
	if err != nil {
		return fmt.Errorf("watching VolumeSnapshotClasses: %w", err)
	}
	return nil
}
