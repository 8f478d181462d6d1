package controlplane

import (
	"fmt"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// This file is the controlplane manager's whole desired state: one pure function from what the
// manager read (State) to what it applies and deletes (Plan). The reconciler executes the plan,
// `cinder-csi-operator render` prints it, and the golden fixtures snapshot it.

// groupController is the plan group the ControllerDegraded condition reports on: every object
// of this manager.
const groupController = "controller"

// State is everything the controlplane manager decides from: the ClusterCSIDriver, the objects it
// read from both clusters, and what the last availability-zone listing said.
type State struct {
	Driver    *operatorv1.ClusterCSIDriver
	Inputs    Inputs
	Detection Detection
	// ControllerPods names the controller pods that may still run, read only under
	// managementState Removed in standalone mode (see holdServiceAccount).
	ControllerPods []string
}

// Detection is what the availability-zone listing said.
type Detection struct {
	// Enabled is the decision of the last listing that succeeded, nil when none did.
	Enabled *bool
	// Failure is why the latest listing failed; empty when it succeeded or none was made.
	// FailureMessage is its user-facing sentence (openstack.Describe), which names the proxy
	// when the proxy failed.
	Failure        openstack.Reason
	FailureMessage string
	// ComputeZones and VolumeZones are the zones of the last success: the per-zone classes and
	// the node copy's zone keys are made from them (chooseZones), and logs show them.
	ComputeZones, VolumeZones []string
	// Backup is what the listing of Cinder's backup services said, when the backup class is
	// asked for.
	Backup BackupDetection
	// RecheckIn is when the zones are due to be listed again; zero when no listing is needed.
	RecheckIn time.Duration
	// Pending is whether no listing has finished yet: the first one is still running.
	Pending bool
}

// BackupDetection is what the listing of Cinder's backup services said.
type BackupDetection struct {
	// Listed is whether a listing succeeded; Services are the cinder-backup services of the
	// last one that did.
	Listed   bool
	Services []openstack.BackupService
	// Failure is why the latest listing failed (openstack.ReasonPermissionDenied when Cinder's
	// policy refused it); FailureMessage its sentence.
	Failure        openstack.Reason
	FailureMessage string
}

// Offline is the Detection of an offline render, where no zone can be listed: the given decision,
// as if a listing had made it.
func Offline(enabled bool) Detection { return Detection{Enabled: &enabled} }

// OfflineZones is the Detection of an offline render given the zones a listing would have
// returned: the given decision, made from them as a listing would have made it.
func OfflineZones(enabled bool, computeZones, volumeZones []string) Detection {
	d := Offline(enabled)
	d.ComputeZones, d.VolumeZones = zoneclasses.Zones(computeZones), zoneclasses.Zones(volumeZones)
	return d
}

// Plan is the controlplane manager's desired state for one State.
//
// Its Apply holds the node copy of cloud-conf in the guest, then, next to the controller, the
// controller copy, the controller objects, the ServiceMonitors and the alerts; under managementState Removed
// its Delete holds everything this manager creates in either cluster.
type Plan struct {
	plan.Base
	// Problems is the invalid or missing input found. When there is any, Apply is empty: the
	// live objects stay as they are until the input is fixed.
	Problems []problem
	// Topology is the decision the objects carry, and why.
	Topology topologyDecision
	// ConfigSource is where the driver settings come from; the controller copy of cloud-conf
	// records it.
	ConfigSource configSource
	// Monitoring is which monitoring objects Apply holds: the ServiceMonitors' watch starts
	// late, once their kind is served.
	Monitoring Monitoring
	// TLS is the TLS security profile the kube-rbac-proxies serve. Its Problem is set when the
	// cluster's profile cannot be served and Intermediate stands in for it.
	TLS tlsprofile.Settings
	// Warnings are the informational conditions (warnings.go).
	Warnings []warning
}

// Desired computes the plan for s. It reads nothing, writes nothing and lists no zones: the
// reconciler fills s.Detection beforehand, from the listing its resolution names (listing), and
// an offline render or a fixture gives a fixed one (Offline). The error is an internal one (an
// operand manifest that does not decode); invalid input is reported in Plan.Problems.
func Desired(d *manifests.Decoder, rc Config, s State) (*Plan, error) {
	return desired(d, rc, s, resolveState(rc, s))
}

// resolution is the inputs of a State resolved once (resolve): the zone listing the plan needs
// and the plan itself are both made from it, so they cannot disagree.
type resolution struct {
	cfg      *settings
	problems []problem
}

// resolveState resolves s's inputs; nil when the plan for s uses none (Unmanaged, Removed).
func resolveState(rc Config, s State) *resolution {
	if !plan.UsesInputs(s.Driver) {
		return nil
	}
	cfg, problems := resolve(rc, plan.Driver(s.Driver), &s.Inputs)
	return &resolution{cfg: cfg, problems: problems}
}

// listing returns what a zone listing is made with, and whether the plan uses one at all: only
// Managed, with valid input, and either without the user's cinder-csi-config deciding topology or
// with a feature that needs the zones (per-zone classes) or the backup services (the backup class)
// all the same. The reconciler lists the zones, or asks its cache, before it plans.
func (res *resolution) listing() (listingRequest, bool) {
	if res == nil || len(res.problems) > 0 {
		return listingRequest{}, false
	}
	cfg := res.cfg
	if cfg.Override != nil && !cfg.Features.needsZones() {
		return listingRequest{}, false
	}
	in, _ := res.credentials()
	in.Decided, in.Backup = cfg.LastTopology != nil || cfg.Override != nil, cfg.Features.BackupClass
	return in, true
}

// credentials returns what an OpenStack client is made with, whether or not the plan lists
// zones; false when the input is not valid.
func (res *resolution) credentials() (listingRequest, bool) {
	if res == nil || len(res.problems) > 0 {
		return listingRequest{}, false
	}
	cfg := res.cfg
	return listingRequest{CloudsYAML: cfg.CloudsYAML, CloudName: cfg.CloudName, CAPEM: []byte(cfg.CABundle), Proxy: cfg.Proxy}, true
}

// desired is Desired from s's resolution res (resolveState).
func desired(d *manifests.Decoder, rc Config, s State, res *resolution) (*Plan, error) {
	base, complete, err := plan.Start(s.Driver, func() ([]plan.Step, error) {
		return objects(d, rc, &settings{Monitoring: s.Inputs.Monitoring, TLS: tlsprofile.Intermediate()}, nodeconf.Contents{}, nil, nil, false)
	})
	// Under managementState Removed, the monitoring objects the inputs allow are deleted.
	p := &Plan{Base: base, Monitoring: s.Inputs.Monitoring}
	if complete || err != nil {
		if err == nil && p.ManagementState == operatorv1.Removed && !rc.HyperShift {
			p.holdServiceAccount(s.ControllerPods)
		}
		return p, err
	}
	if len(res.problems) > 0 {
		p.Problems = res.problems
		return p, nil
	}
	cfg := res.cfg
	p.Topology = chooseTopology(cfg.Override, s.Detection, cfg.LastTopology)
	if p.Topology.Source == sourceOverride {
		p.Topology.OverrideFrom = cfg.Source.ref()
	}
	p.ConfigSource = cfg.Source
	node := nodeDecisions(cfg.Features, chooseZones(s.Detection, cfg.LiveNode), p.Topology.Enabled)
	p.Warnings = warnings(cfg, s.Detection)
	steps, err := objects(d, rc, cfg, node, s.Inputs.Credentials, s.Inputs.Deployment, p.Topology.Enabled)
	if err != nil {
		return nil, err
	}
	p.Apply = steps
	p.Monitoring = cfg.Monitoring
	p.TLS = cfg.TLS
	return p, nil
}

// holdServiceAccount keeps the controller's ServiceAccount, standalone, while pods names
// controller pods that may still run. Their sidecars talk to the API server with its token, and
// the API server stops accepting the token once the ServiceAccount is gone: a sidecar told to
// stop could no longer release its leader lease, and a controller installed again soon after
// would wait for the lease to expire (over two minutes) before it provisions or attaches. On
// HyperShift the sidecars use the guest's kubeconfig instead, so nothing waits.
func (p *Plan) holdServiceAccount(pods []string) {
	if len(pods) == 0 {
		return
	}
	p.Hold(func(st plan.Step) bool {
		_, ok := st.Object.(*corev1.ServiceAccount)
		return ok && st.Object.GetName() == names.ControllerServiceAccount
	}, fmt.Sprintf("ServiceAccount %s stays until the controller's pods (%s) have ended, so that their sidecars can release their leader leases.",
		names.ControllerServiceAccount, strings.Join(pods, ", ")))
}

// objects returns, in apply order, the node copy of cloud-conf for the guest and the objects
// next to the controller. node is what the node copy carries besides cloud.conf and
// enable_topology (nodeDecisions).
func objects(d *manifests.Decoder, rc Config, cfg *settings, node nodeconf.Contents, credentials *corev1.Secret, live *appsv1.Deployment, enableTopology bool) ([]plan.Step, error) {
	ns := rc.Namespace
	controller := nodeconf.Defaults()
	controller.CloudConf, controller.Topology, controller.CABundle = cfg.ControllerConf, enableTopology, cfg.CABundle
	controllerConf := desiredCloudConf(ns, names.CloudConfConfigMap, controller)
	cfg.Source.annotate(controllerConf)
	// The node copy alone carries the decisions for the guest manager: a change of a class
	// setting must not roll the controller, whose pod template hashes its own copy. The node
	// plugin talks to no OpenStack API, so the node copy carries no CA.
	node.CloudConf, node.Topology = cfg.NodeConf, enableTopology
	nodeConf := desiredCloudConf(names.GuestNamespace, nodeconf.Name(rc.HyperShift), node)

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
		PVCAnnotations:  cfg.Features.PVCAnnotations,
		Proxy:           cfg.Proxy,
		TrustedCA:       cfg.TrustedCA != nil,
		TLS:             cfg.TLS,
		Hosted:          hostedFor(rc, cfg, live),
		Hashes: map[string]string{
			// The hash of the ConfigMap as it will be applied, so the first rollout already
			// carries the final value.
			nodeconf.HashInput: confighash.ConfigMap(controllerConf),
			hashCredentials:    confighash.SecretKeys(credentials, names.KeyCloudsYAML),
			// A proxy change rolls the controller (empty, so no annotation, without a proxy),
			// and so does a change of a trusted CA bundle.
			hashProxy:                 proxyHash(cfg.Proxy),
			hashTrustedCA:             confighash.ConfigMapKeys(cfg.TrustedCA, names.KeyTrustedCA),
			hashAdditionalTrustBundle: confighash.ConfigMapKeys(cfg.AdditionalTrustBundle, names.KeyTrustedCA),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("computing the controller objects: %w", err)
	}
	monitoring, err := desiredMonitoring(d, cfg.Monitoring, ns)
	if err != nil {
		return nil, err
	}
	mgmt := append(append([]client.Object{controllerConf}, objs...), monitoring...)
	if rc.HyperShift {
		ownedBy(cfg.Owner, mgmt...)
	}
	return append(plan.Steps(apply.ClusterGuest, groupController, nodeConf),
		plan.Steps(apply.ClusterManagement, groupController, mgmt...)...), nil
}

// hostedFor returns what the controller takes from a hosted control plane, nothing standalone.
func hostedFor(rc Config, cfg *settings, live *appsv1.Deployment) hostedInputs {
	if !rc.HyperShift {
		return hostedInputs{}
	}
	h := hostedInputs{Owner: cfg.Owner, ReleaseVersion: rc.ReleaseVersion, Live: live, RunAsUser: rc.RunAsUser}
	if cfg.AdditionalTrustBundle != nil {
		h.AdditionalTrustBundle = cfg.AdditionalTrustBundle.Name
	}
	return h
}

// chooseTopology returns the topology decision: the user's override when set (with what a listing
// made for the per-zone classes said, so that its failure is reported); else the detected one.
// When the latest listing failed, the last known decision stays in force (the one in the live
// cloud-conf, else the last success in this process), and only without any does it fall back to
// false, the setting under which volumes can be provisioned whatever the zones are.
func chooseTopology(override *bool, det Detection, lastKnown *bool) topologyDecision {
	d := topologyDecision{Failure: det.Failure, FailureMessage: det.FailureMessage, ComputeZones: det.ComputeZones, VolumeZones: det.VolumeZones, RecheckIn: det.RecheckIn}
	switch {
	case override != nil:
		d.Enabled, d.Source = *override, sourceOverride
	case det.Failure == "" && det.Enabled != nil:
		d.Enabled, d.Source = *det.Enabled, sourceDetected
	case lastKnown != nil:
		d.Enabled, d.Source = *lastKnown, sourceLastKnown
	case det.Enabled != nil:
		d.Enabled, d.Source = *det.Enabled, sourceLastKnown
	case det.Pending:
		d.Enabled, d.Source = false, sourcePending
	default:
		d.Enabled, d.Source = false, sourceDefault
	}
	return d
}

// ProblemMessages returns the messages of the plan's problems, the sentences ConfigDegraded shows.
func (p *Plan) ProblemMessages() []string {
	out := make([]string, 0, len(p.Problems))
	for _, pr := range p.Problems {
		out = append(out, pr.Message)
	}
	return out
}
