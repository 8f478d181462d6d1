package guest

import (
	"context"
	"errors"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// Reconciler keeps the guest-side Cinder CSI objects in shape for the one ClusterCSIDriver.
type Reconciler struct {
	// Guest talks to the guest cluster (in standalone mode, the one cluster).
	Guest client.Client
	// GuestAPI reads from the guest's API server, not the cache: objects just deleted to be
	// recreated.
	GuestAPI client.Client
	Config   Config
	Decoder  *manifests.Decoder
	Recorder recorder.EventRecorder

	cache      cache.Cache
	controller controller.Controller
	// snapshotClasses is the VolumeSnapshotClass watch, started once its CRD is served.
	snapshotClasses clusters.LateWatch
	// fallback remembers the cluster-scoped kinds this manager may not patch (under
	// cluster-storage-operator's RBAC) and so writes with create and update.
	fallback *apply.UpdateFallback
	// accessReviews remembers, standalone, whether the operator may create
	// SubjectAccessReviews, asked again after an interval while not (see desired.Input.NoAccessReviews).
	accessReviews access.Question
	// nodes is the node watch, started when the zone warning first needs the nodes (a guest
	// without topology never lists them), once the operator may list and watch them.
	nodes access.Gate
	// claims is the claim watch, run only while a per-zone class is to be retired.
	claims claimWatch
	now    func() time.Time
}

// SetupWithManager watches the ClusterCSIDriver (its spec, and its status while it carries a
// condition of csi-operator's), the node cloud-conf and every owned object.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, guest cluster.Cluster) error {
	if r.now == nil {
		r.now = time.Now
	}
	r.cache = guest.GetCache()
	r.fallback = apply.NewUpdateFallback(
		schema.GroupKind{Group: storagev1.GroupName, Kind: "CSIDriver"},
		schema.GroupKind{Group: storagev1.GroupName, Kind: "StorageClass"},
		schema.GroupKind{Group: snapshotv1.GroupName, Kind: "VolumeSnapshotClass"})
	watch := func(obj client.Object, preds ...predicate.Predicate) source.Source {
		return clusters.Watch(r.cache, obj, preds...)
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("guest").
		WatchesRawSource(watch(&operatorv1.ClusterCSIDriver{}, predicate.Or(clusters.DriverChanged, clusters.CarriesConditions(names.CSIOperatorConditions...)))).
		WatchesRawSource(watch(&corev1.ConfigMap{}, clusters.InNamespace(names.GuestNamespace), clusters.Named(nodeconf.Name(r.Config.HyperShift)))).
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
// removes csi-operator's conditions and writes this manager's and the observed generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// This manager also removes what csi-operator left on the driver (see names.CSIOperatorConditions).
	w := conditions.Writer{Applier: r.applier(), Recorder: r.Recorder, ObserveGeneration: true, Remove: names.CSIOperatorConditions}
	return conditions.Reconcile(ctx, r.Guest, req.Name, r.now(), w, r.reconcile)
}

// reconcile applies the guest plan for the driver and sets the guest's conditions in st.
func (r *Reconciler) reconcile(ctx context.Context, driver *operatorv1.ClusterCSIDriver, st *conditions.Set) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	r.Config.LogLevel.Follow(log, driver.Spec.OperatorLogLevel)

	s, err := r.readInput(ctx, driver)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.GuestConditions...)
		st.Fold(names.ConditionNodeDegraded, err, "Reading the operator's inputs")
		return ctrl.Result{}, err
	}
	p, err := desired.Compute(r.Decoder, *s)
	if err != nil {
		return ctrl.Result{}, err
	}
	appliers := plan.Appliers{apply.ClusterGuest: r.applier().Adopting(names.LegacyFieldOwners...)}

	switch p.ManagementState {
	case operatorv1.Unmanaged:
		setNodeConditions(st, s.DaemonSet, "", nil)
		nodeWorkload.Unmanaged(st, names.ConditionStaticResourcesDegraded, names.ConditionStorageClassDegraded, names.ConditionZoneWarning)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		err := appliers.Delete(ctx, log, p.Delete)
		nodeWorkload.Removed(st, err, "the CSI node plugin, CSIDriver, StorageClasses and VolumeSnapshotClasses", p.Waiting,
			names.ConditionStaticResourcesDegraded, names.ConditionStorageClassDegraded, names.ConditionZoneWarning)
		return ctrl.Result{}, err
	}

	if len(p.Problems) > 0 {
		st.True(names.ConditionGuestConfigDegraded, names.ReasonInvalidConfig, strings.Join(p.Problems, " "))
	} else {
		st.False(names.ConditionGuestConfigDegraded, names.ReasonAsExpected, "")
	}

	// The class's watch starts, and has listed, before the class is applied (see LateWatch).
	var watchErr error
	if p.SnapshotClass {
		watchErr = r.snapshotClasses.Start(ctx, r.controller, r.cache, &snapshotv1.VolumeSnapshotClass{}, "VolumeSnapshotClasses")
	}
	failed := r.applyRecreating(ctx, appliers, p)
	if watchErr != nil {
		failed[desired.GroupClasses] = errors.Join(failed[desired.GroupClasses], watchErr)
	}
	if err := appliers.Delete(ctx, log, p.Delete); err != nil {
		failed[desired.GroupClasses] = errors.Join(failed[desired.GroupClasses], err)
	}
	kept, err := r.retireZoneClasses(ctx, appliers, p.Retire)
	if err != nil {
		failed[desired.GroupClasses] = errors.Join(failed[desired.GroupClasses], err)
	}

	if err := r.recordStable(ctx, s.DaemonSet); err != nil {
		failed[desired.GroupNode] = errors.Join(failed[desired.GroupNode], err)
	}
	st.Fold(names.ConditionStaticResourcesDegraded, failed[desired.GroupStatic], "Applying the CSI driver's ServiceAccount, RBAC and CSIDriver")
	setNodeConditions(st, s.DaemonSet, p.NodeWaiting, failed[desired.GroupNode])
	st.Fold(names.ConditionStorageClassDegraded, failed[desired.GroupClasses], "Applying the StorageClasses and VolumeSnapshotClasses")

	nodeZones, nodesErr := r.readNodeZones(ctx, p.Features)
	if nodesErr != nil {
		st.Keep(driver.Status.Conditions, names.ConditionZoneWarning)
	} else {
		setZoneWarning(st, zoneInputs{Features: p.Features, NodeZones: nodeZones, Kept: kept, Foreign: p.ForeignClasses,
			BackupClassTaken: p.BackupClassTaken, InvalidZones: p.InvalidZones})
	}
	if err := errors.Join(failed[desired.GroupStatic], failed[desired.GroupNode], failed[desired.GroupClasses], nodesErr); err != nil {
		return ctrl.Result{}, err
	}
	// A grant of what was denied changes nothing this manager watches: come back when the
	// denial is due to be asked again, so that the grant is taken up without a restart. Only
	// while something is denied; an allowed answer costs nothing at rest.
	return ctrl.Result{RequeueAfter: access.Soonest(r.accessReviews.Recheck(), r.nodes.Access.Recheck(), r.claims.gate.Access.Recheck())}, nil
}

// readInput reads what the guest manager's plan is computed from; a missing object is not an
// error.
func (r *Reconciler) readInput(ctx context.Context, driver *operatorv1.ClusterCSIDriver) (*desired.Input, error) {
	s := &desired.Input{Config: r.Config.plan(), Driver: driver}
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
		get(client.ObjectKey{Namespace: names.GuestNamespace, Name: nodeconf.Name(r.Config.HyperShift)}, &cloudConf, func() { s.CloudConf = &cloudConf }),
		get(client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, &ds, func() { s.DaemonSet = &ds }),
		get(client.ObjectKey{Name: names.StorageClass}, &sc, func() { s.StorageClass = &sc }),
		get(client.ObjectKey{Name: names.VolumeSnapshotClassCRD}, &crd, func() { s.SnapshotCRD = clusters.Established(&crd) }),
	)
	if err != nil {
		return nil, err
	}
	if s.SnapshotCRD && driver.Spec.ManagementState != operatorv1.Unmanaged {
		// The live classes decide what an apply cannot change, whose default class stands and,
		// also under Removed, whether the backup class's name is the operator's (see desired.Compute);
		// read only while the kind is served.
		var vscs snapshotv1.VolumeSnapshotClassList
		if err := apply.List(ctx, r.Guest, r.errCluster(), &vscs); err != nil {
			return nil, err
		}
		s.SnapshotClasses = vscs.Items
		for i := range s.SnapshotClasses {
			switch vsc := &s.SnapshotClasses[i]; vsc.Name {
			case names.VolumeSnapshotCls:
				s.SnapshotClass = vsc
			case names.BackupSnapshotClass:
				s.BackupSnapshotClass = vsc
			}
		}
	}
	if !r.Config.HyperShift && driver.Spec.ManagementState == operatorv1.Removed {
		// Only Removed decides from it (see desired.Input.ControllerServiceAccount).
		var sa corev1.ServiceAccount
		if err := get(client.ObjectKey{Namespace: names.GuestNamespace, Name: names.ControllerServiceAccount}, &sa, func() { s.ControllerServiceAccount = true }); err != nil {
			return nil, err
		}
	}
	if !r.Config.HyperShift {
		may, err := r.canReviewAccess(ctx)
		if err != nil {
			return nil, err
		}
		s.NoAccessReviews = !may
	}
	if err := apply.List(ctx, r.Guest, r.errCluster(), &scs); err != nil {
		return nil, err
	}
	s.StorageClasses = scs.Items
	return s, nil
}

// applyRecreating deletes the objects of p.Recreate, then writes p.Apply: the objects of p.Create
// with a create, which leaves an object of the name that exists by then (see
// desired.Plan.Create); the other recreated objects with an applier that reads the API server
// (the cache still holds them for a moment after their deletion); the rest as usual. It returns the failed groups, as
// plan.Appliers.Apply does.
func (r *Reconciler) applyRecreating(ctx context.Context, appliers plan.Appliers, p *desired.Plan) map[string]error {
	log := ctrl.LoggerFrom(ctx)
	failed := map[string]error{}
	recreated := map[string]bool{}
	for _, st := range p.Recreate {
		recreated[st.String()] = true
		log.Info("Recreating, since a field that cannot change differs", "kind", plan.Kind(st.Object), "object", klog.KObj(st.Object))
	}
	if len(p.Recreate) > 0 {
		if err := appliers.Delete(ctx, log, p.Recreate); err != nil {
			failed[desired.GroupClasses] = err
		}
	}
	created := map[string]bool{}
	for _, st := range p.Create {
		created[st.String()] = true
	}
	var cached, fresh, create []plan.Step
	for _, st := range p.Apply {
		switch {
		case created[st.String()]:
			create = append(create, st)
		case recreated[st.String()]:
			fresh = append(fresh, st)
		default:
			cached = append(cached, st)
		}
	}
	uncached := r.applier()
	uncached.Reader = r.GuestAPI
	for _, res := range []map[string]error{
		appliers.Apply(ctx, log, cached),
		plan.Appliers{apply.ClusterGuest: uncached}.Apply(ctx, log, fresh),
		appliers.Create(ctx, log, create),
	} {
		for g, err := range res {
			failed[g] = errors.Join(failed[g], err)
		}
	}
	return failed
}

// canReviewAccess reports whether the operator may create SubjectAccessReviews, asking the API
// server on the first reconcile and again after an interval while it may not: an administrator
// who grants it later gets the kube-rbac-proxies' ClusterRole with SubjectAccessReviews (and
// scrapes authorised by them) without restarting the operator.
func (r *Reconciler) canReviewAccess(ctx context.Context) (bool, error) {
	may, denied, err := r.accessReviews.Allowed(ctx, r.Guest, "", authorizationv1.GroupName, "subjectaccessreviews", "create")
	if denied {
		ctrl.LoggerFrom(ctx).Info("SubjectAccessReviews may not be created: the kube-rbac-proxies' ClusterRole grants token reviews only",
			"clusterRole", names.KubeRBACProxyRole)
	}
	return may, err
}

// recordStable records on the node DaemonSet the generation it has seen fully rolled out (see
// nodeRollingOut), under a field owner of its own: the guest manager's apply leaves the annotation
// out, and must not remove it. The live DaemonSet was read before this reconcile's apply; a
// generation that apply started is newer than the one recorded, and so still a rollout.
func (r *Reconciler) recordStable(ctx context.Context, ds *appsv1.DaemonSet) error {
	gen := stableGeneration(ds)
	if gen == "" {
		return nil
	}
	return apply.New(r.Guest, names.FieldOwnerRollout).On(r.errCluster()).Record(ctx, ds, names.StableGenerationAnnotation, gen)
}

// applier writes to the guest as the guest manager, naming the guest in errors on HyperShift.
func (r *Reconciler) applier() *apply.Applier {
	return apply.New(r.Guest, names.FieldOwnerGuest).On(r.errCluster()).WithUpdateFallback(r.fallback)
}

// errCluster names the guest in errors on HyperShift; a standalone install has one cluster.
func (r *Reconciler) errCluster() apply.Cluster {
	return apply.ClusterFor(r.Config.HyperShift, apply.ClusterGuest)
}
