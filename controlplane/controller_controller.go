package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
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
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
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
	// monitorsWatched is set once the ServiceMonitor watch is running. It starts on the first
	// reconcile that finds the kind served, not at setup: watching a kind the API server does
	// not serve fails, and the monitoring stack may be installed at any time.
	monitorsMu      sync.Mutex
	monitorsWatched bool
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
			named(names.CloudConfConfigMap, names.CloudConfNodeConfigMap, names.UserConfigMap),
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
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// Reconcile makes the controller objects match the ClusterCSIDriver, the credentials and the
// cloud, then writes this manager's conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	driver := &operatorv1.ClusterCSIDriver{}
	if err := r.Guest.Get(ctx, req.NamespacedName, driver); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	st := conditions.New(driver.Status.Conditions, metav1.NewTime(r.now()))
	defer func() {
		reterr = errors.Join(reterr, r.writeStatus(ctx, driver, st))
	}()
	r.applyOperatorLogLevel(ctx, driver)

	in, err := r.readInputs(ctx)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.ControlPlaneConditions...)
		st.True(names.ConditionControllerDegraded, names.ReasonReadFailed, "Reading the operator's inputs failed; the operator retries. See the operator log for the API error.")
		return ctrl.Result{}, err
	}

	switch driver.Spec.ManagementState {
	case operatorv1.Unmanaged:
		setUnmanaged(st, in.Deployment)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		err := r.remove(ctx, in)
		setRemoved(st, err)
		return ctrl.Result{}, err
	}

	cfg, problems := r.resolve(driver, in)
	if len(problems) > 0 {
		msg := problemsMessage(problems)
		st.True(names.ConditionConfigDegraded, problems[0].Reason, msg)
		setControllerConditions(st, in.Deployment, "The CSI controller waits for valid configuration: "+msg, nil)
		keepTopologyCondition(st, driver)
		log.V(2).Info("Not applying: invalid configuration", "reason", problems[0].Reason)
		return ctrl.Result{}, reconcile.TerminalError(errors.New(problems[0].Reason))
	}
	st.False(names.ConditionConfigDegraded, names.ReasonAsExpected, "")

	topo := r.decide(ctx, cfg.Override, detectionInputs{
		CloudsYAML: cfg.CloudsYAML, CloudName: cfg.CloudName, CAPEM: []byte(cfg.CABundle), LastKnown: cfg.LastTopology,
		Proxy: cfg.Proxy,
	})
	setTopologyCondition(st, topo)
	log.V(4).Info("Topology decided", "enabled", topo.Enabled, "source", topo.Source, "computeZones", topo.ComputeZones, "volumeZones", topo.VolumeZones)

	applyErr := r.applyAll(ctx, cfg, in, topo)
	setControllerConditions(st, in.Deployment, "", applyErr)
	if applyErr != nil {
		return ctrl.Result{}, applyErr
	}
	return ctrl.Result{RequeueAfter: topo.RecheckIn}, nil
}

// applyAll applies both cloud-conf copies, then the controller objects that mount them.
func (r *Reconciler) applyAll(ctx context.Context, cfg *config, in *inputs, topo topologyDecision) error {
	log := ctrl.LoggerFrom(ctx)
	mgmtObjs, nodeConf, err := desiredAll(r.Decoder, r.Config, cfg, in.Credentials, topo.Enabled)
	if err != nil {
		return err
	}
	if cfg.ServiceMonitor {
		if err := r.startMonitorWatch(); err != nil {
			return err
		}
	}
	mgmt := r.mgmtApplier().Adopting(names.LegacyFieldOwners...)
	guest := apply.New(r.Guest, r.fieldOwner()).Adopting(names.LegacyFieldOwners...)
	if _, err := guest.Apply(ctx, nodeConf); err != nil {
		return err
	}
	for _, o := range mgmtObjs {
		res, err := mgmt.Apply(ctx, o)
		if err != nil {
			return err
		}
		if res == apply.Applied {
			log.V(2).Info("Applied", "kind", kindOf(o), "object", klog.KObj(o))
		}
	}
	return nil
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

// startMonitorWatch watches the ServiceMonitor, so a changed or deleted one is put back. A
// failed start (the kind's REST mapping not yet discovered, say) is retried by the next
// reconcile, which the returned error causes.
func (r *Reconciler) startMonitorWatch() error {
	r.monitorsMu.Lock()
	defer r.monitorsMu.Unlock()
	if r.monitorsWatched {
		return nil
	}
	err := r.controller.Watch(source.Kind(r.mgmtCache, client.Object(newServiceMonitor()),
		handler.EnqueueRequestsFromMapFunc(toDriver)))
	if err != nil {
		return fmt.Errorf("watching ServiceMonitors: %w", err)
	}
	r.monitorsWatched = true
	return nil
}

// desiredAll returns, in apply order, the objects the controlplane manager applies next to the
// controller (the controller copy of cloud-conf first), and the node copy of cloud-conf for the
// guest. It is pure: the reconciler and `cinder-csi-operator render` both call it.
func desiredAll(d *manifests.Decoder, rc Config, cfg *config, credentials *corev1.Secret, enableTopology bool) ([]client.Object, *corev1.ConfigMap, error) {
	ns := rc.Namespace
	controllerConf := desiredCloudConf(ns, names.CloudConfConfigMap, cfg.ControllerConf, enableTopology, cfg.CABundle)
	nodeConf := desiredCloudConf(names.GuestNamespace, nodeCloudConfName(rc.HyperShift), cfg.NodeConf, enableTopology, "")

	objs, err := desiredControllerObjects(d, controllerInputs{
		HyperShift:      rc.HyperShift,
		Namespace:       ns,
		Images:          rc.Images,
		ClusterID:       cfg.ClusterID,
		HighlyAvailable: cfg.HA,
		NodeSelector:    cfg.NodeSelector,
		Tolerations:     cfg.Tolerations,
		PodLabels:       cfg.PodLabels,
		Verbosity:       cfg.Verbosity,
		Topology:        enableTopology,
		Proxy:           cfg.Proxy,
		TrustedCA:       cfg.TrustedCA != nil && cfg.TrustedCA.Data[names.KeyTrustedCA] != "",
		Hashes: map[string]string{
			// The hash of the ConfigMap as it will be applied, so the first rollout already
			// carries the final value.
			hashCloudConf:   confighash.ConfigMap(controllerConf),
			hashCredentials: confighash.SecretKeys(credentials, names.KeyCloudsYAML),
			// Standalone only (empty, so no annotation, on HyperShift): a proxy or trusted CA
			// change rolls the controller.
			hashProxy:     proxyHash(cfg.Proxy),
			hashTrustedCA: confighash.ConfigMapKeys(cfg.TrustedCA, names.KeyTrustedCA),
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("computing the controller objects: %w", err)
	}
	objs = append([]client.Object{controllerConf}, objs...)
	if cfg.ServiceMonitor && !rc.HyperShift {
		sm, err := desiredServiceMonitor(d, ns)
		if err != nil {
			return nil, nil, fmt.Errorf("computing the ServiceMonitor: %w", err)
		}
		objs = append(objs, sm)
	}
	return objs, nodeConf, nil
}

// remove deletes what this manager created, for managementState Removed.
func (r *Reconciler) remove(ctx context.Context, in *inputs) error {
	ns := r.Config.Namespace
	mgmt := r.mgmtApplier()
	guest := apply.New(r.Guest, r.fieldOwner())
	var errs []error
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerDeployment}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerPDB}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerMetricsService}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerServiceAccount}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CloudConfConfigMap}},
	}
	if !r.Config.HyperShift {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.TrustedCABundleConfigMap}})
	}
	if in.ServiceMonitorCRD {
		sm := newServiceMonitor()
		sm.SetNamespace(ns)
		sm.SetName(names.ControllerServiceMonitor)
		objs = append([]client.Object{sm}, objs...)
	}
	for _, o := range objs {
		if _, err := mgmt.Delete(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := guest.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: r.nodeCloudConfName()}}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// writeStatus applies this manager's conditions to the ClusterCSIDriver status, and records an
// Event for every condition that turned Degraded or recovered.
func (r *Reconciler) writeStatus(ctx context.Context, driver *operatorv1.ClusterCSIDriver, st *conditions.Set) error {
	conds := st.List()
	if len(conds) == 0 {
		return nil
	}
	conditions.RecordTransitions(r.Recorder, driver, conds)
	return conditions.ApplyStatus(ctx, apply.New(r.Guest, r.fieldOwner()), driver.Name, conds, nil)
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

// nodeCloudConfName is the node copy's name: on HyperShift it lives in another cluster and keeps
// csi-operator's name; in standalone it shares a namespace with the controller copy.
func (r *Reconciler) nodeCloudConfName() string { return nodeCloudConfName(r.Config.HyperShift) }

func nodeCloudConfName(hyperShift bool) string {
	if hyperShift {
		return names.CloudConfConfigMap
	}
	return names.CloudConfNodeConfigMap
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

func setUnmanaged(st *conditions.Set, dep *appsv1.Deployment) {
	const msg = "managementState is Unmanaged: the operator changes nothing."
	setControllerConditions(st, dep, "", nil)
	st.False(names.ConditionControllerProgressing, names.ReasonUnmanaged, msg)
	st.False(names.ConditionControllerDegraded, names.ReasonUnmanaged, msg)
	st.False(names.ConditionConfigDegraded, names.ReasonUnmanaged, msg)
	st.False(names.ConditionTopologyDegraded, names.ReasonUnmanaged, msg)
}

func setRemoved(st *conditions.Set, err error) {
	const msg = "managementState is Removed: the CSI controller and its configuration are removed."
	st.True(names.ConditionControllerAvailable, names.ReasonRemoved, msg)
	st.False(names.ConditionControllerProgressing, names.ReasonRemoved, msg)
	st.FoldError(names.ConditionControllerDegraded, err, names.ReasonApplyFailed, "Removing the CSI controller objects failed; the operator retries.")
	st.False(names.ConditionConfigDegraded, names.ReasonRemoved, msg)
	st.False(names.ConditionTopologyDegraded, names.ReasonRemoved, msg)
}

func problemsMessage(ps []problem) string {
	msgs := make([]string, 0, len(ps))
	for _, p := range ps {
		msgs = append(msgs, p.Message)
	}
	return strings.Join(msgs, " ")
}

func kindOf(o runtime.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1.")
}
