package desired

import (
	"fmt"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
)

// This file is the controlplane manager's whole desired state: one pure function from what the
// manager read (Input) to what it applies and deletes (Plan). The reconciler executes the plan,
// `cinder-csi-operator render` prints it, and the golden fixtures snapshot it.

// GroupController is the plan group the ControllerDegraded condition reports on: every object
// of this manager.
const GroupController = "controller"

// Plan is the controlplane manager's desired state for one Input.
//
// Its Apply holds the node copy of cloud-conf in the guest, then, next to the controller, the
// controller copy, the controller objects, the ServiceMonitors and the alerts; under managementState Removed
// its Delete holds everything this manager creates in either cluster.
type Plan struct {
	plan.Base
	// Problems is the invalid or missing input found. When there is any, Apply is empty: the
	// live objects stay as they are until the input is fixed.
	Problems []Problem
	// Topology is the decision the objects carry, and why.
	Topology TopologyDecision
	// ConfigSource is where the driver settings come from; the controller copy of cloud-conf
	// records it.
	ConfigSource ConfigSource
	// Monitoring is which monitoring objects Apply holds: the ServiceMonitors' watch starts
	// late, once their kind is served.
	Monitoring Monitoring
	// TLS is the TLS security profile the kube-rbac-proxies serve. Its Problem is set when the
	// cluster's profile cannot be served and Intermediate stands in for it.
	TLS tlsprofile.Settings
	// Warnings are the informational conditions (warnings.go).
	Warnings []Warning
}

// Compute computes the plan for in. It reads nothing, writes nothing, lists no zones and changes
// nothing of in: the reconciler fills in.Detection beforehand, from the listing in's resolution
// names (Resolve, Resolution.Listing), and an offline render or a fixture gives a fixed one
// (Offline). The error is an internal one (an operand manifest that does not decode); invalid
// input is reported in Plan.Problems.
func Compute(d *manifests.Decoder, in Input) (*Plan, error) {
	return Resolve(in).Plan(d, in.Detection)
}

// Resolution is an Input resolved once (resolve): the zone listing the plan needs and the plan
// itself are both made from it, so they cannot disagree. Nothing changes it once made.
type Resolution struct {
	in Input
	// cfg is nil when the plan uses no input (Unmanaged, Removed).
	cfg      *settings
	problems []Problem
}

// Resolve resolves in, all but its Detection, which only Plan reads.
func Resolve(in Input) *Resolution {
	res := &Resolution{in: in}
	if plan.UsesInputs(in.Driver) {
		res.cfg, res.problems = resolve(plan.Driver(in.Driver), &in)
	}
	return res
}

// Listing returns what a zone listing is made with, and whether the plan uses one at all: only
// Managed, with valid input, and either without the user's cinder-csi-config deciding topology or
// with a feature that needs the zones (per-zone classes) or the backup services (the backup class)
// all the same. The reconciler lists the zones, or asks its cache, before it plans.
func (res *Resolution) Listing() (Listing, bool) {
	l, ok := res.Credentials()
	if !ok {
		return Listing{}, false
	}
	cfg := res.cfg
	if cfg.Override != nil && !cfg.Features.needsZones() {
		return Listing{}, false
	}
	l.Decided, l.Backup = cfg.LastTopology != nil || cfg.Override != nil, cfg.Features.BackupClass
	return l, true
}

// Credentials returns what an OpenStack client is made with, whether or not the plan lists
// zones; false when the plan uses no input or the input is not valid.
func (res *Resolution) Credentials() (Listing, bool) {
	if res.cfg == nil || len(res.problems) > 0 {
		return Listing{}, false
	}
	cfg := res.cfg
	return Listing{CloudsYAML: cfg.CloudsYAML, CloudName: cfg.CloudName, CAPEM: []byte(cfg.CABundle), Proxy: cfg.Proxy}, true
}

// Plan computes the plan of the resolved input, given what the listing said (det).
func (res *Resolution) Plan(d *manifests.Decoder, det Detection) (*Plan, error) {
	in, rc := res.in, res.in.Config
	base, complete, err := plan.Start(in.Driver, func() ([]plan.Step, error) {
		return objects(d, rc, &settings{Monitoring: in.Monitoring, TLS: tlsprofile.Intermediate()}, nodeconf.Contents{}, nil, nil, false)
	})
	// Under managementState Removed, the monitoring objects the inputs allow are deleted.
	p := &Plan{Base: base, Monitoring: in.Monitoring}
	if complete || err != nil {
		if err == nil && p.ManagementState == operatorv1.Removed && !rc.HyperShift {
			p.holdServiceAccount(in.ControllerPods)
		}
		return p, err
	}
	if len(res.problems) > 0 {
		p.Problems = res.problems
		return p, nil
	}
	cfg := res.cfg
	p.Topology = chooseTopology(cfg.Override, det, cfg.LastTopology)
	if p.Topology.Source == SourceOverride {
		p.Topology.OverrideFrom = cfg.Source.ref()
	}
	p.ConfigSource = cfg.Source
	node := nodeDecisions(cfg.Features, chooseZones(det, cfg.LiveNode), p.Topology.Enabled)
	p.Warnings = warnings(cfg, det)
	steps, err := objects(d, rc, cfg, node, in.Credentials, in.Deployment, p.Topology.Enabled)
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
	mgmt := append(append([]plan.Object{controllerConf}, objs...), monitoring...)
	if rc.HyperShift {
		ownedBy(cfg.Owner, mgmt...)
	}
	return append(plan.Steps(apply.ClusterGuest, GroupController, nodeConf),
		plan.Steps(apply.ClusterManagement, GroupController, mgmt...)...), nil
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
func chooseTopology(override *bool, det Detection, lastKnown *bool) TopologyDecision {
	d := TopologyDecision{Failure: det.Failure, FailureMessage: det.FailureMessage, ComputeZones: det.ComputeZones, VolumeZones: det.VolumeZones, RecheckIn: det.RecheckIn}
	switch {
	case override != nil:
		d.Enabled, d.Source = *override, SourceOverride
	case det.Failure == "" && det.Enabled != nil:
		d.Enabled, d.Source = *det.Enabled, SourceDetected
	case lastKnown != nil:
		d.Enabled, d.Source = *lastKnown, SourceLastKnown
	case det.Enabled != nil:
		d.Enabled, d.Source = *det.Enabled, SourceLastKnown
	case det.Pending:
		d.Enabled, d.Source = false, SourcePending
	default:
		d.Enabled, d.Source = false, SourceDefault
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
