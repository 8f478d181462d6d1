package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// Reconciler keeps the CSI controller and both copies of cloud-conf in shape for the one
// ClusterCSIDriver, and reports on them in its conditions.
type Reconciler struct {
	// Mgmt talks to the management cluster (the HostedControlPlane namespace); in standalone
	// mode, to the one cluster. MgmtAPI reads from its API server, not the cache: the
	// controller's pods, which are not watched (see runningControllerPods).
	Mgmt    client.Client
	MgmtAPI client.Reader
	// Guest talks to the guest cluster: ClusterCSIDriver, the user's configuration and the
	// node copy of cloud-conf.
	Guest    client.Client
	Config   Config
	Decoder  *manifests.Decoder
	Recorder recorder.EventRecorder

	// listings keeps what the zone and backup-service listings said, and the OpenStack
	// client they reuse.
	listings *listingCache
	now      func() time.Time

	// mgmtCache is the cache of the controller namespace and controller this reconciler's
	// controller: the ServiceMonitor watch is added to them once the kind is served.
	mgmtCache  cache.Cache
	controller controller.Controller
	// monitors is the ServiceMonitor watch. It starts on the first reconcile that finds the
	// kind served, not at setup: the monitoring stack may be installed at any time.
	monitors clusters.LateWatch
	// monitorAccess says whether ServiceMonitors may be watched at all (not under
	// cluster-storage-operator's RBAC); when not, they are read directly and not watched.
	monitorAccess access.Gate
	// monitoringAccess says which monitoring objects the operator may write (monitors.go).
	monitoringAccess *monitoringAccess
	// podsUnreadLogged is set once runningControllerPods has logged that it cannot list pods.
	podsUnreadLogged bool
}

// SetupWithManager watches the inputs and owned objects on both clusters.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, mgmt, guest cluster.Cluster) error {
	if r.now == nil {
		r.now = time.Now
	}
	inNamespace := clusters.InNamespace(r.Config.Namespace)
	mgmtCache, guestCache := mgmt.GetCache(), guest.GetCache()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("controlplane").
		WatchesRawSource(clusters.Watch(guestCache, &operatorv1.ClusterCSIDriver{}, clusters.DriverChanged)).
		WatchesRawSource(clusters.Watch(guestCache, &corev1.ConfigMap{}, predicate.Or(
			clusters.Named(nodeconf.Name(r.Config.HyperShift), names.UserConfigMap),
			// Standalone: the installer's cloud provider config, named by Infrastructure (whose
			// own events cover a change of the name), with the CA and the fallback settings.
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return !r.Config.HyperShift && o.GetNamespace() == names.OpenShiftConfigNamespace
			})))).
		WatchesRawSource(clusters.Watch(mgmtCache, &corev1.Secret{}, inNamespace, clusters.Named(names.CredentialsSecret))).
		WatchesRawSource(clusters.Watch(mgmtCache, &corev1.ConfigMap{}, inNamespace, predicate.Or(
			clusters.Named(names.HyperShiftCloudConfigMap, names.CloudConfConfigMap, names.TrustedCABundleConfigMap),
			predicate.NewPredicateFuncs(r.isAdditionalTrustBundle)))).
		WatchesRawSource(clusters.Watch(mgmtCache, &appsv1.Deployment{}, inNamespace)).
		WatchesRawSource(clusters.Watch(mgmtCache, &corev1.ServiceAccount{}, inNamespace)).
		WatchesRawSource(clusters.Watch(mgmtCache, &corev1.Service{}, inNamespace)).
		WatchesRawSource(clusters.Watch(mgmtCache, &policyv1.PodDisruptionBudget{}, inNamespace)).
		// A zone listing that finished in the background.
		WatchesRawSource(source.Channel(r.listings.events, clusters.EnqueueDriver))
	if r.Config.HyperShift {
		b = b.WatchesRawSource(clusters.Watch(mgmtCache, &hyperv1.HostedControlPlane{}, inNamespace))
	} else {
		b = b.WatchesRawSource(clusters.Watch(guestCache, &configv1.Infrastructure{})).
			WatchesRawSource(clusters.Watch(guestCache, &configv1.Proxy{})).
			WatchesRawSource(clusters.Watch(guestCache, &configv1.APIServer{})).
			WatchesRawSource(clusters.Watch(guestCache, &apiextensionsv1.CustomResourceDefinition{}, clusters.Named(names.ServiceMonitorCRD)))
	}
	var err error
	r.controller, err = b.Build(r)
	return err
}

// isAdditionalTrustBundle reports whether o is the ConfigMap the HostedControlPlane of the
// namespace names as its additional trust bundle (HyperShift), as the cache sees it now. The name
// is the HostedControlPlane's to choose, so it cannot be a fixed filter; a change of the name
// itself arrives as a HostedControlPlane event.
func (r *Reconciler) isAdditionalTrustBundle(o client.Object) bool {
	if !r.Config.HyperShift {
		return false
	}
	hcps := &hyperv1.HostedControlPlaneList{}
	if err := r.Mgmt.List(context.Background(), hcps, client.InNamespace(r.Config.Namespace)); err != nil {
		return false
	}
	for i := range hcps.Items {
		if desired.AdditionalTrustBundleRef(&hcps.Items[i]) == o.GetName() {
			return true
		}
	}
	return false
}

// Reconcile makes the controller objects match the ClusterCSIDriver, the credentials and the
// cloud, then writes this manager's conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := conditions.Writer{Applier: apply.New(r.Guest, r.fieldOwner()).On(r.errCluster(apply.ClusterGuest)), Recorder: r.Recorder}
	return conditions.Reconcile(ctx, r.Guest, req.Name, r.now(), w, r.reconcile)
}

func (r *Reconciler) reconcile(ctx context.Context, driver *operatorv1.ClusterCSIDriver, st *conditions.Set) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	r.Config.LogLevel.Follow(log, driver.Spec.OperatorLogLevel)

	in, err := r.readInputs(ctx, driver)
	if err != nil {
		st.Keep(driver.Status.Conditions, names.ControlPlaneConditions...)
		st.Fold(names.ConditionControllerDegraded, err, "Reading the operator's inputs")
		return ctrl.Result{}, err
	}
	if driver.Spec.ManagementState == operatorv1.Removed && !r.Config.HyperShift {
		in.ControllerPods = r.runningControllerPods(ctx)
	}
	// Resolved once: the listing asked for and the plan are made from the same resolution.
	res := desired.Resolve(*in)
	p, err := res.Plan(r.Decoder, r.detectionFor(ctx, res))
	if err != nil {
		return ctrl.Result{}, err
	}
	mgmtApplier, monitorsWatched, err := r.mgmtApplier(ctx, p.Monitoring)
	if err != nil {
		return ctrl.Result{}, err
	}
	appliers := plan.Appliers{
		apply.ClusterManagement: mgmtApplier.Adopting(names.LegacyFieldOwners...).On(r.errCluster(apply.ClusterManagement)),
		apply.ClusterGuest:      apply.New(r.Guest, r.fieldOwner()).Adopting(names.LegacyFieldOwners...).On(r.errCluster(apply.ClusterGuest)),
	}

	switch p.ManagementState {
	case operatorv1.Unmanaged:
		setControllerConditions(st, in.Deployment, "", nil)
		controllerWorkload.Unmanaged(st, otherConditions()...)
		return ctrl.Result{}, nil
	case operatorv1.Removed:
		err := appliers.Delete(ctx, log, p.Delete)
		controllerWorkload.Removed(st, err, "the CSI controller and its configuration", p.Waiting, otherConditions()...)
		if len(p.Held) > 0 {
			// Pods are not watched: look again when a pod's termination may be over.
			return ctrl.Result{RequeueAfter: leaseRecheck}, err
		}
		return ctrl.Result{}, err
	}

	if len(p.Problems) > 0 {
		msg := strings.Join(p.ProblemMessages(), " ")
		st.True(names.ConditionConfigDegraded, p.Problems[0].Reason, msg)
		setControllerConditions(st, in.Deployment, "The CSI controller waits for valid configuration: "+msg, nil)
		keepTopologyCondition(st, driver)
		keepWarningConditions(st, driver)
		log.V(2).Info("Not applying: invalid configuration", "reason", p.Problems[0].Reason)
		return ctrl.Result{}, reconcile.TerminalError(errors.New(p.Problems[0].Reason))
	}
	setConfigCondition(st, p)
	setTopologyCondition(st, p.Topology)
	metrics.SetTopology(p.Topology.Enabled)
	setWarningConditions(st, p.Warnings)
	log.V(4).Info("Topology decided", "enabled", p.Topology.Enabled, "source", p.Topology.Source,
		"computeZones", p.Topology.ComputeZones, "volumeZones", p.Topology.VolumeZones)

	var applyErr error
	if p.Monitoring.ServiceMonitors && monitorsWatched {
		applyErr = r.monitors.Start(ctx, r.controller, r.mgmtCache, newServiceMonitor(), "ServiceMonitors")
	}
	if applyErr == nil {
		applyErr = appliers.Apply(ctx, log, p.Apply)[desired.GroupController]
	}
	setControllerConditions(st, in.Deployment, "", applyErr)
	if applyErr != nil {
		return ctrl.Result{}, applyErr
	}
	// Recorded after the apply that writes the new source into cloud-conf: a failed apply
	// records nothing, and its retry does.
	if note, changed := configSourceEvent(in.CloudConf, p.ConfigSource); changed && r.Recorder != nil {
		log.V(0).Info("Driver settings source changed", "source", p.ConfigSource.Record())
		r.Recorder.Eventf(driver, nil, corev1.EventTypeNormal, names.ReasonConfigSourceChanged, p.ConfigSource.Action(), "%s", note)
	}
	// A denied watch of ServiceMonitors, or write of a monitoring object, is asked again on its
	// interval: a grant changes no object this reconciler watches, so nothing else would bring
	// it back to ask.
	return ctrl.Result{RequeueAfter: access.Soonest(p.Topology.RecheckIn, r.monitorAccess.Access.Recheck(), r.monitoringAccess.recheck())}, nil
}

// mgmtApplier applies to the controller namespace, comparing with that namespace's cache for
// every kind. The client reads objects without a Go type (the monitoring kinds) from the API
// server, which would cost a GET on every reconcile. The client itself must stay that way: the
// applier's adoption fallback reads csi-operator's objects through it, and the label-selected
// cache cannot see them. m is what the plan applies or deletes of the monitoring kinds: with
// ServiceMonitors, it asks, once, whether they may be watched, and if not reads them directly
// (see monitorsWatchable); the answer is returned with the applier.
func (r *Reconciler) mgmtApplier(ctx context.Context, m desired.Monitoring) (*apply.Applier, bool, error) {
	a := apply.New(r.Mgmt, r.fieldOwner())
	a.Reader = r.mgmtCache
	var watched bool
	if m.ServiceMonitors {
		var err error
		if watched, err = monitorsWatchable(ctx, &r.monitorAccess, r.Mgmt, r.Config.Namespace); err != nil {
			return nil, false, fmt.Errorf("checking access to ServiceMonitors: %w", err)
		}
	}
	if (m.ServiceMonitors && !watched) || m.PrometheusRules {
		a.Reader = monitorReader{cached: r.mgmtCache, direct: r.Mgmt, watchedMonitors: watched}
	}
	return a, watched, nil
}

func (r *Reconciler) fieldOwner() string { return names.FieldOwnerControlPlane }

// errCluster names c in errors on HyperShift; a standalone install has one cluster.
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

// keepWarningConditions re-sends the existing warning conditions unchanged while the
// configuration is invalid (they are evaluated from valid configuration only); a warning not yet
// written waits for it.
func keepWarningConditions(st *conditions.Set, driver *operatorv1.ClusterCSIDriver) {
	for _, t := range desired.WarningTypes {
		if conditions.Find(driver.Status.Conditions, t) != nil {
			st.Keep(driver.Status.Conditions, t)
			continue
		}
		st.False(t, names.ReasonWaitingForConfig, "Evaluated once the configuration is valid.")
	}
}

// otherConditions are this manager's condition types besides the controller workload's: what
// Unmanaged and Removed report on next to the workload's.
func otherConditions() []string {
	return append([]string{names.ConditionConfigDegraded, names.ConditionTopologyDegraded}, desired.WarningTypes...)
}
