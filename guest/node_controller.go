package guest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
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
	// watchSnapshots starts the VolumeSnapshotClass watch once its CRD exists: watching a
	// kind the API server does not serve would fail, and the CRD may appear at any time.
	watchSnapshots sync.Once
	now            func() time.Time
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
			return o.GetNamespace() == names.GuestNamespace && o.GetName() == r.Config.nodeCloudConfName()
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

// guestInputs is what the reconciler read, each nil when it does not exist.
type guestInputs struct {
	CloudConf      *corev1.ConfigMap
	DaemonSet      *appsv1.DaemonSet
	StorageClass   *storagev1.StorageClass
	StorageClasses []storagev1.StorageClass
	SnapshotCRD    bool
}

// Reconcile makes the guest objects match the ClusterCSIDriver and the node cloud-conf, then
// writes this manager's conditions and the observed generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	driver := &operatorv1.ClusterCSIDriver{}
	if err := r.Guest.Get(ctx, req.NamespacedName, driver); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := conditions.New(driver.Status.Conditions, metav1.NewTime(r.now()))
	defer func() {
		reterr = errors.Join(reterr, r.writeStatus(ctx, driver, st))
	}()

	var problems []string
	if v, err := loglevel.Verbosity(driver.Spec.OperatorLogLevel); err != nil {
		problems = append(problems, fmt.Sprintf("spec.operatorLogLevel %q is not one of Normal, Debug, Trace, TraceAll.", driver.Spec.OperatorLogLevel))
	} else if r.Config.LogLevel != nil && r.Config.LogLevel.Set(v) {
		ctrl.LoggerFrom(ctx).Info("Changed the operator's verbosity", "verbosity", v)
	}
	verbosity, err := loglevel.Verbosity(driver.Spec.LogLevel)
	if err != nil {
		problems = append(problems, fmt.Sprintf("spec.logLevel %q is not one of Normal, Debug, Trace, TraceAll; the node plugin keeps its current verbosity.", driver.Spec.LogLevel))
	}
	scState := driver.Spec.StorageClassState
	switch scState {
	case "", operatorv1.ManagedStorageClass, operatorv1.UnmanagedStorageClass, operatorv1.RemovedStorageClass:
	default:
		problems = append(problems, fmt.Sprintf("spec.storageClassState %q is not one of Managed, Unmanaged, Removed; the StorageClass is left as it is.", scState))
		scState = operatorv1.UnmanagedStorageClass
	}
	if len(problems) > 0 {
		st.True(names.ConditionGuestConfigDegraded, names.ReasonInvalidConfig, strings.Join(problems, " "))
	} else {
		st.False(names.ConditionGuestConfigDegraded, names.ReasonAsExpected, "")
	}

	in, err := r.readInputs(ctx)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.GuestConditions...)
		st.True(names.ConditionNodeDegraded, names.ReasonReadFailed, "Reading the operator's inputs failed; the operator retries. See the operator log for the API error.")
		return ctrl.Result{}, err
	}
	switch driver.Spec.ManagementState {
	case operatorv1.Unmanaged:
		setUnmanaged(st, in.DaemonSet)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		err := r.remove(ctx)
		setRemoved(st, err)
		return ctrl.Result{}, err
	}

	guest := apply.New(r.Guest, names.FieldOwnerGuest).Adopting(names.LegacyFieldOwners...)
	staticErr := r.applyStatic(ctx, guest)
	st.FoldError(names.ConditionStaticResourcesDegraded, staticErr, names.ReasonApplyFailed,
		"Applying the CSI driver's ServiceAccount, RBAC or CSIDriver failed; the operator retries. See the operator log for the API error.")

	var nodeErr error
	switch {
	case verbosity == 0:
		// An unknown log level: leave the DaemonSet as it is.
		setNodeConditions(st, in.DaemonSet, "", nil)
	case in.CloudConf == nil:
		setNodeConditions(st, in.DaemonSet, fmt.Sprintf("Waiting for ConfigMap %s/%s, which the controlplane manager writes.", names.GuestNamespace, r.Config.nodeCloudConfName()), nil)
	default:
		nodeErr = r.applyNode(ctx, guest, in.CloudConf, verbosity)
		setNodeConditions(st, in.DaemonSet, "", nodeErr)
	}

	scErr := r.reconcileStorageClass(ctx, guest, scState, in)
	st.FoldError(names.ConditionStorageClassDegraded, scErr, names.ReasonApplyFailed,
		"Applying the StorageClass or VolumeSnapshotClass failed; the operator retries. See the operator log for the API error.")
	return ctrl.Result{}, errors.Join(staticErr, nodeErr, scErr)
}

func (r *Reconciler) readInputs(ctx context.Context) (*guestInputs, error) {
	in := &guestInputs{CloudConf: &corev1.ConfigMap{}, DaemonSet: &appsv1.DaemonSet{}, StorageClass: &storagev1.StorageClass{}}
	get := func(key client.ObjectKey, obj client.Object) (bool, error) {
		if err := r.Guest.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("reading %s: %w", key, err)
		}
		return true, nil
	}
	if ok, err := get(client.ObjectKey{Namespace: names.GuestNamespace, Name: r.Config.nodeCloudConfName()}, in.CloudConf); err != nil {
		return nil, err
	} else if !ok {
		in.CloudConf = nil
	}
	if ok, err := get(client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, in.DaemonSet); err != nil {
		return nil, err
	} else if !ok {
		in.DaemonSet = nil
	}
	if ok, err := get(client.ObjectKey{Name: names.StorageClass}, in.StorageClass); err != nil {
		return nil, err
	} else if !ok {
		in.StorageClass = nil
	}
	scs := &storagev1.StorageClassList{}
	if err := r.Guest.List(ctx, scs); err != nil {
		return nil, fmt.Errorf("listing StorageClasses: %w", err)
	}
	in.StorageClasses = scs.Items
	crd := &apiextensionsv1.CustomResourceDefinition{}
	ok, err := get(client.ObjectKey{Name: names.VolumeSnapshotClassCRD}, crd)
	if err != nil {
		return nil, err
	}
	in.SnapshotCRD = ok && clusters.Established(crd)
	return in, nil
}

func (r *Reconciler) applyStatic(ctx context.Context, a *apply.Applier) error {
	objs, err := desiredStaticObjects(r.Decoder, r.Config.HyperShift)
	if err != nil {
		return fmt.Errorf("computing the static objects: %w", err)
	}
	for _, o := range objs {
		if _, err := a.Apply(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) applyNode(ctx context.Context, a *apply.Applier, cloudConf *corev1.ConfigMap, verbosity int) error {
	ds, err := desiredNodeFor(r.Decoder, r.Config, cloudConf, verbosity)
	if err != nil {
		return fmt.Errorf("computing the node DaemonSet: %w", err)
	}
	_, err = a.Apply(ctx, ds)
	return err
}

// desiredNodeFor returns the node DaemonSet for the node cloud-conf as it is in the guest.
func desiredNodeFor(d *manifests.Decoder, cfg Config, cloudConf *corev1.ConfigMap, verbosity int) (*appsv1.DaemonSet, error) {
	return desiredNode(d, nodeInputs{
		Images:        cfg.Images,
		Verbosity:     verbosity,
		Topology:      cloudConf.Data[names.KeyEnableTopology] == "true",
		CloudConfName: cfg.nodeCloudConfName(),
		CloudConfHash: confighash.ConfigMap(cloudConf),
	})
}

// reconcileStorageClass honours spec.storageClassState for standard-csi, and applies the
// VolumeSnapshotClass once its CRD exists.
func (r *Reconciler) reconcileStorageClass(ctx context.Context, a *apply.Applier, state operatorv1.StorageClassStateName, in *guestInputs) error {
	var errs []error
	switch state {
	case operatorv1.UnmanagedStorageClass:
	case operatorv1.RemovedStorageClass:
		if _, err := a.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}}); err != nil {
			errs = append(errs, err)
		}
	default:
		sc, err := desiredStorageClass(r.Decoder, defaultClassValue(in.StorageClass, in.StorageClasses))
		if err == nil {
			_, err = a.Apply(ctx, sc)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if in.SnapshotCRD {
		if err := r.startSnapshotWatch(); err != nil {
			errs = append(errs, err)
		}
		vsc, err := desiredVolumeSnapshotClass(r.Decoder)
		if err == nil {
			_, err = a.Apply(ctx, vsc)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startSnapshotWatch watches VolumeSnapshotClasses, so a deleted one is recreated.
func (r *Reconciler) startSnapshotWatch() error {
	var err error
	r.watchSnapshots.Do(func() {
		err = r.controller.Watch(source.Kind(r.cluster.GetCache(), client.Object(&snapshotv1.VolumeSnapshotClass{}), enqueueDriver))
	})
	return err
}

// remove deletes what this manager created, for managementState Removed.
func (r *Reconciler) remove(ctx context.Context) error {
	a := apply.New(r.Guest, names.FieldOwnerGuest)
	objs := []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}},
	}
	static, err := desiredStaticObjects(r.Decoder, r.Config.HyperShift)
	if err != nil {
		return err
	}
	objs = append(objs, static...)
	var errs []error
	for _, o := range objs {
		if _, err := a.Delete(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeStatus applies this manager's conditions and status.observedGeneration, and records an
// Event for every condition that turned Degraded or recovered.
func (r *Reconciler) writeStatus(ctx context.Context, driver *operatorv1.ClusterCSIDriver, st *conditions.Set) error {
	conds := st.List()
	conditions.RecordTransitions(r.Recorder, driver, conds)
	return conditions.ApplyStatus(ctx, apply.New(r.Guest, names.FieldOwnerGuest), driver.Name, conds, &driver.Generation)
}

func setUnmanaged(st *conditions.Set, ds *appsv1.DaemonSet) {
	const msg = "managementState is Unmanaged: the operator changes nothing."
	setNodeConditions(st, ds, "", nil)
	st.False(names.ConditionNodeProgressing, names.ReasonUnmanaged, msg)
	st.False(names.ConditionNodeDegraded, names.ReasonUnmanaged, msg)
	st.False(names.ConditionStaticResourcesDegraded, names.ReasonUnmanaged, msg)
	st.False(names.ConditionStorageClassDegraded, names.ReasonUnmanaged, msg)
}

func setRemoved(st *conditions.Set, err error) {
	const msg = "managementState is Removed: the CSI node plugin, CSIDriver and StorageClass are removed."
	st.True(names.ConditionNodeAvailable, names.ReasonRemoved, msg)
	st.False(names.ConditionNodeProgressing, names.ReasonRemoved, msg)
	st.FoldError(names.ConditionNodeDegraded, err, names.ReasonApplyFailed, "Removing the guest objects failed; the operator retries.")
	st.False(names.ConditionStaticResourcesDegraded, names.ReasonRemoved, msg)
	st.False(names.ConditionStorageClassDegraded, names.ReasonRemoved, msg)
}
