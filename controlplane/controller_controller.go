package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// Hash input names, one pod-template annotation each.
const (
	hashCloudConf   = "configmap-cloud-conf"
	hashCredentials = "secret-openstack-cloud-credentials"
	hashProxy       = "proxy-cluster"
	hashTrustedCA   = "configmap-trusted-ca-bundle"
)

// proxyHash hashes the cluster-wide proxy, "" when there is none.
func proxyHash(p configv1.ProxyStatus) string {
	if p == (configv1.ProxyStatus{}) {
		return ""
	}
	return confighash.Data(map[string]string{"http": p.HTTPProxy, "https": p.HTTPSProxy, "no": p.NoProxy}, nil)
}

// Reconciler keeps the CSI controller and both copies of cloud-conf in shape for the one
// ClusterCSIDriver, and reports on them in its conditions.
type Reconciler struct {
	// Mgmt talks to the management cluster (the HostedControlPlane namespace); in standalone
	// mode, to the one cluster.
	Mgmt client.Client
	// Guest talks to the guest cluster: ClusterCSIDriver, the user's configuration and the
	// node copy of cloud-conf.
	Guest    client.Client
	Config   Config
	Decoder  *manifests.Decoder
	Recorder recorder.EventRecorder

	topology *topologyCache
	now      func() time.Time

	// mgmtCache is the cache of the controller namespace and controller this reconciler's
	// controller: the ServiceMonitor watch is added to them once the kind is served.
	mgmtCache  cache.Cache
	controller controller.Controller
	// monitors is the ServiceMonitor watch. It starts on the first reconcile that finds the
	// kind served, not at setup: the monitoring stack may be installed at any time.
	monitors clusters.LateWatch
}

// driverRequest is the one request every event maps to: there is one ClusterCSIDriver.
var driverRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: names.ClusterCSIDriverName}}

func toDriver(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{driverRequest}
}

// SetupWithManager watches the inputs and owned objects on both clusters.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, mgmt, guest cluster.Cluster) error {
	if r.now == nil {
		r.now = time.Now
	}
	ns := r.Config.Namespace
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
	named := func(nameList ...string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool { return slices.Contains(nameList, o.GetName()) })
	}
	enqueue := handler.EnqueueRequestsFromMapFunc(toDriver)

	watch := func(c cluster.Cluster, obj client.Object, preds ...predicate.Predicate) source.Source {
		return source.Kind(c.GetCache(), obj, enqueue, preds...)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("controlplane").
		WatchesRawSource(watch(guest, &operatorv1.ClusterCSIDriver{},
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesRawSource(watch(guest, &corev1.ConfigMap{}, predicate.Or(
			named(names.NodeCloudConf(r.Config.HyperShift), names.UserConfigMap),
			// Standalone: the cloud-provider config with the CA, named by Infrastructure.
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return !r.Config.HyperShift && o.GetNamespace() == names.OpenShiftConfigNamespace
			})))).
		WatchesRawSource(watch(mgmt, &corev1.Secret{}, inNamespace, named(names.CredentialsSecret))).
		WatchesRawSource(watch(mgmt, &corev1.ConfigMap{}, inNamespace,
			named(names.HyperShiftCloudConfigMap, names.CloudConfConfigMap, names.TrustedCABundleConfigMap))).
		WatchesRawSource(watch(mgmt, &appsv1.Deployment{}, inNamespace)).
		WatchesRawSource(watch(mgmt, &corev1.ServiceAccount{}, inNamespace)).
		WatchesRawSource(watch(mgmt, &corev1.Service{}, inNamespace)).
		WatchesRawSource(watch(mgmt, &policyv1.PodDisruptionBudget{}, inNamespace))
	if r.Config.HyperShift {
		b = b.WatchesRawSource(watch(mgmt, &hyperv1.HostedControlPlane{}, inNamespace))
	} else {
		b = b.WatchesRawSource(watch(guest, &configv1.Infrastructure{})).
			WatchesRawSource(watch(guest, &configv1.Proxy{})).
			WatchesRawSource(watch(guest, &apiextensionsv1.CustomResourceDefinition{}, named(names.ServiceMonitorCRD)))
	}
	var err error
	r.controller, err = b.Build(r)
	return err
}

// Reconcile makes the controller objects match the ClusterCSIDriver, the credentials and the
// cloud, then writes this manager's conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	driver, st, err := conditions.Begin(ctx, r.Guest, req.Name, r.now())
	if driver == nil {
		return ctrl.Result{}, err
	}
	defer func() {
		status := apply.New(r.Guest, r.fieldOwner()).On(r.errCluster(apply.ClusterGuest))
		reterr = errors.Join(reterr, conditions.Write(ctx, r.Recorder, status, driver, st, nil))
	}()
	r.applyOperatorLogLevel(ctx, driver)

	in, err := r.readInputs(ctx)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.ControlPlaneConditions...)
		st.Fold(names.ConditionControllerDegraded, err, "Reading the operator's inputs")
		return ctrl.Result{}, err
	}
	p, err := desired(r.Decoder, r.Config, State{Driver: driver, Inputs: *in}, func(di detectionInputs) Detection {
		return r.detection(ctx, di)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	appliers := plan.Appliers{
		plan.Management: r.mgmtApplier().Adopting(names.LegacyFieldOwners...).On(r.errCluster(apply.ClusterManagement)),
		plan.Guest:      apply.New(r.Guest, r.fieldOwner()).Adopting(names.LegacyFieldOwners...).On(r.errCluster(apply.ClusterGuest)),
	}

	switch p.ManagementState {
	case operatorv1.Unmanaged:
		setControllerConditions(st, in.Deployment, "", nil)
		st.Unmanaged(names.ConditionControllerProgressing, names.ConditionControllerDegraded,
			names.ConditionConfigDegraded, names.ConditionTopologyDegraded)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		err := appliers.Delete(ctx, log, p.Delete)
		st.Removed(names.ConditionControllerAvailable, names.ConditionControllerProgressing, names.ConditionControllerDegraded,
			err, "the CSI controller and its configuration", names.ConditionConfigDegraded, names.ConditionTopologyDegraded)
		return ctrl.Result{}, err
	}

	if len(p.Problems) > 0 {
		msg := strings.Join(p.ProblemMessages(), " ")
		st.True(names.ConditionConfigDegraded, p.Problems[0].Reason, msg)
		setControllerConditions(st, in.Deployment, "The CSI controller waits for valid configuration: "+msg, nil)
		keepTopologyCondition(st, driver)
		log.V(2).Info("Not applying: invalid configuration", "reason", p.Problems[0].Reason)
		return ctrl.Result{}, reconcile.TerminalError(errors.New(p.Problems[0].Reason))
	}
	st.False(names.ConditionConfigDegraded, names.ReasonAsExpected, "")
	setTopologyCondition(st, p.Topology)
	log.V(4).Info("Topology decided", "enabled", p.Topology.Enabled, "source", p.Topology.Source,
		"computeZones", p.Topology.ComputeZones, "volumeZones", p.Topology.VolumeZones)

	var applyErr error
	if p.ServiceMonitor {
		applyErr = r.monitors.Start(r.watchServiceMonitors)
	}
	if applyErr == nil {
		applyErr = appliers.Apply(ctx, log, p.Apply)[groupController]
	}
	setControllerConditions(st, in.Deployment, "", applyErr)
	if applyErr != nil {
		return ctrl.Result{}, applyErr
	}
	return ctrl.Result{RequeueAfter: p.Topology.RecheckIn}, nil
}

// mgmtApplier applies to the controller namespace, comparing with that namespace's cache for
// every kind. The client reads objects without a Go type (the ServiceMonitor) from the API
// server, which would cost a GET on every reconcile. The client itself must stay that way: the
// applier's adoption fallback reads csi-operator's objects through it, and the label-selected
// cache cannot see them.
func (r *Reconciler) mgmtApplier() *apply.Applier {
	a := apply.New(r.Mgmt, r.fieldOwner())
	a.Reader = r.mgmtCache
	return a
}

// watchServiceMonitors watches the ServiceMonitor, so a changed or deleted one is put back.
func (r *Reconciler) watchServiceMonitors() error {
	err := r.controller.Watch(source.Kind(r.mgmtCache, client.Object(newServiceMonitor()),
		handler.EnqueueRequestsFromMapFunc(toDriver)))
	if err != nil {
		return fmt.Errorf("watching ServiceMonitors: %w", err)
	}
	return nil
}

// applyOperatorLogLevel sets the operator's own verbosity from spec.operatorLogLevel. An unknown
// level leaves the verbosity as it is; the guest manager reports it.
func (r *Reconciler) applyOperatorLogLevel(ctx context.Context, driver *operatorv1.ClusterCSIDriver) {
	if r.Config.LogLevel == nil {
		return
	}
	v, err := loglevel.Verbosity(driver.Spec.OperatorLogLevel)
	if err != nil {
		return
	}
	if r.Config.LogLevel.Set(v) {
		ctrl.LoggerFrom(ctx).Info("Changed the operator's verbosity", "verbosity", v)
	}
}

func (r *Reconciler) fieldOwner() string { return names.FieldOwnerControlPlane }

// cluster names c in errors on HyperShift; a standalone install has one cluster.
func (r *Reconciler) errCluster(c apply.Cluster) apply.Cluster {
	return apply.ClusterFor(r.Config.HyperShift, c)
}

// keepTopologyCondition re-sends the existing topology condition unchanged, so that a config
// problem does not erase it (an apply without it would drop it).
func keepTopologyCondition(st *conditions.Set, driver *operatorv1.ClusterCSIDriver) {
	if conditions.Find(driver.Status.Conditions, names.ConditionTopologyDegraded) != nil {
		st.Keep(driver.Status.Conditions, names.ConditionTopologyDegraded)
		return
	}
	st.False(names.ConditionTopologyDegraded, names.ReasonWaitingForConfig, "Topology is decided once the configuration is valid.")
}
