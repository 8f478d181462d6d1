package desired

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// This file is the guest manager's whole desired state: one pure function from what the manager
// read (Input) to what it applies and deletes (Plan). The reconciler executes the plan,
// `cinder-csi-operator render` prints it, and the golden fixtures snapshot it.

// Plan groups, one per Degraded condition.
const (
	// GroupStatic holds the node ServiceAccount, RBAC and the CSIDriver (StaticResourcesDegraded).
	GroupStatic = "static"
	// GroupNode holds the node plugin DaemonSet (NodeDegraded).
	GroupNode = "node"
	// GroupClasses holds the StorageClasses and the VolumeSnapshotClasses (StorageClassDegraded).
	GroupClasses = "classes"
)

// Input is everything the guest manager's plan is computed from: the manager's configuration, the
// ClusterCSIDriver and the objects the manager read, each nil when it does not exist. The plan
// only reads it.
type Input struct {
	Config Config
	Driver *operatorv1.ClusterCSIDriver
	// CloudConf is the node copy of cloud-conf, which the controlplane manager writes.
	CloudConf *corev1.ConfigMap
	// DaemonSet is the live node plugin DaemonSet (for conditions only).
	DaemonSet *appsv1.DaemonSet
	// StorageClass is the live standard-csi, and StorageClasses all of the cluster's classes:
	// the user's choice of default class stands, and a per-zone name that a class of someone
	// else's holds is left to it (see ownZoneClass).
	StorageClass   *storagev1.StorageClass
	StorageClasses []storagev1.StorageClass
	// SnapshotCRD is set when the API server serves VolumeSnapshotClasses.
	SnapshotCRD bool
	// SnapshotClass is the live standard-csi VolumeSnapshotClass, BackupSnapshotClass the live
	// class of the backup class's name (the operator's or not, see ownBackupClass), and
	// SnapshotClasses all of the cluster's VolumeSnapshotClasses: the user's choice of default
	// class stands. Read only while the kind is served.
	SnapshotClass       *snapshotv1.VolumeSnapshotClass
	BackupSnapshotClass *snapshotv1.VolumeSnapshotClass
	SnapshotClasses     []snapshotv1.VolumeSnapshotClass
	// NoAccessReviews is set, standalone, when the operator may not create SubjectAccessReviews
	// itself (cluster-storage-operator's RBAC): it cannot grant what it does not hold, so the
	// kube-rbac-proxies' ClusterRole grants token reviews only, as csi-operator's does.
	NoAccessReviews bool
	// ControllerServiceAccount is set, standalone and under managementState Removed, while the
	// controller's ServiceAccount exists: the controller's RBAC stays until then (see
	// holdControllerRBAC).
	ControllerServiceAccount bool
}

// Config is what the manager's configuration gives the plan.
type Config struct {
	// HyperShift selects the hosted-cluster flavour; false is standalone OpenShift.
	HyperShift bool
	// Images are the node plugin's operand images.
	Images operandimages.Node
}

// Plan is the guest manager's desired state for one Input.
//
// Its Apply holds the static objects (a ClusterRole before the binding that references it), the
// DaemonSet, the StorageClasses (standard-csi and the per-zone classes) and the
// VolumeSnapshotClasses (standard-csi and, when asked for, the backup class); its Delete holds the
// StorageClasses under storageClassState Removed, the backup class when it is the operator's but no
// longer asked for, and under managementState Removed everything this manager creates. Under
// names a user may also give a class (the per-zone classes and the backup class), only a live
// class with the operator's label is ever applied over, recreated or deleted.
type Plan struct {
	plan.Base
	// Problems are the ClusterCSIDriver fields the guest manager cannot honour, as sentences.
	// They do not stop the plan: what they concern is left as it is.
	Problems []string
	// NodeWaiting says what the node plugin waits for when Apply has no DaemonSet; empty when
	// it has one or when an unknown log level keeps the live one.
	NodeWaiting string
	// SnapshotClass is set when Apply holds the VolumeSnapshotClass, whose watch starts late.
	SnapshotClass bool
	// Recreate holds the identities of objects of Apply whose live copy differs in a field an
	// apply cannot change (see storageClassNeedsRecreate): deleted before Apply creates them anew.
	Recreate []plan.Step
	// Create holds the identities of objects of Apply written with a create, not an apply: the
	// classes under names a user may also give one (the per-zone classes and the backup class)
	// that have no live copy or are recreated. A class someone else makes after the cache was
	// read fails the create, where a forced apply would take it over; it is left alone, and the
	// next plan, which reads it, finds it someone else's.
	Create []plan.Step
	// Retire names the per-zone StorageClasses no longer asked for: each is deleted unless a
	// claim uses it, which the reconciler asks the API server (claimsByClass).
	Retire []string
	// Features is what the node copy of cloud-conf decides; InvalidZones the volume zones that
	// cannot name a per-zone class; ForeignClasses the per-zone classes asked for whose name a
	// StorageClass that is not the operator's holds, and BackupClassTaken is set when the backup
	// class is asked for and a VolumeSnapshotClass that is not the operator's has its name; the
	// plan leaves those alone. All four feed the zone warning.
	Features         Features
	InvalidZones     []string
	ForeignClasses   []string
	BackupClassTaken bool
}

// Compute computes the plan for s. It reads nothing, writes nothing and changes nothing of s. The
// error is an internal one (an operand manifest that does not decode).
func Compute(d *manifests.Decoder, s Input) (*Plan, error) {
	cfg := s.Config
	base, complete, err := plan.Start(s.Driver, func() ([]plan.Step, error) { return removals(d, cfg, s) })
	p := &Plan{Base: base}
	if complete || err != nil {
		if err == nil && p.ManagementState == operatorv1.Removed && !cfg.HyperShift && s.ControllerServiceAccount {
			err = p.holdControllerRBAC(d)
		}
		return p, err
	}
	driver := plan.Driver(s.Driver)

	if _, err := loglevel.Verbosity(driver.Spec.OperatorLogLevel); err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("spec.operatorLogLevel %q is not one of Normal, Debug, Trace, TraceAll.", driver.Spec.OperatorLogLevel))
	}
	verbosity, err := loglevel.Verbosity(driver.Spec.LogLevel)
	if err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("spec.logLevel %q is not one of Normal, Debug, Trace, TraceAll; the node plugin keeps its current verbosity.", driver.Spec.LogLevel))
	}
	scState := driver.Spec.StorageClassState
	switch scState {
	case "", operatorv1.ManagedStorageClass, operatorv1.UnmanagedStorageClass, operatorv1.RemovedStorageClass:
	default:
		p.Problems = append(p.Problems, fmt.Sprintf("spec.storageClassState %q is not one of Managed, Unmanaged, Removed; the StorageClass is left as it is.", scState))
		scState = operatorv1.UnmanagedStorageClass
	}

	static, err := desiredStaticObjects(d, cfg.HyperShift, s.NoAccessReviews)
	if err != nil {
		return nil, fmt.Errorf("computing the static objects: %w", err)
	}
	p.Apply = plan.Steps(apply.ClusterGuest, GroupStatic, static...)

	usable := nodeconf.Usable(s.CloudConf)
	p.Features = readFeatures(s.CloudConf, usable)
	switch {
	case verbosity == 0:
		// An unknown log level: the DaemonSet stays as it is.
	case s.CloudConf == nil:
		p.NodeWaiting = fmt.Sprintf("Waiting for ConfigMap %s/%s, which the controlplane manager writes.", names.GuestNamespace, nodeconf.Name(cfg.HyperShift))
	case !usable:
		// On HyperShift the node copy has csi-operator's name: until the controlplane manager
		// has written its own, the one here is csi-operator's, and a DaemonSet hashed from it
		// would roll the node plugin twice in a switch (to csi-operator's content, then to the
		// node copy's a moment later). csi-operator's DaemonSet runs on meanwhile. Its rewrite
		// keeps this operator's label and annotations (after a switch back and forward again),
		// so the content must also be the one whose hash the controlplane manager recorded.
		p.NodeWaiting = fmt.Sprintf("Waiting for the controlplane manager to take over ConfigMap %s/%s from csi-operator.", names.GuestNamespace, nodeconf.Name(cfg.HyperShift))
	default:
		ds, err := desiredNodeFor(d, cfg, s.CloudConf, p.Features.Topology, verbosity)
		if err != nil {
			return nil, fmt.Errorf("computing the node DaemonSet: %w", err)
		}
		p.Apply = append(p.Apply, plan.Step{Cluster: apply.ClusterGuest, Group: GroupNode, Object: ds})
	}

	if err := p.storageClasses(d, cfg, scState, s); err != nil {
		return nil, err
	}
	if s.SnapshotCRD {
		if err := p.snapshotClasses(d, s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// storageClasses plans standard-csi and the per-zone classes, which follow storageClassState
// alike: Unmanaged leaves them, Removed deletes them.
func (p *Plan) storageClasses(d *manifests.Decoder, cfg Config, scState operatorv1.StorageClassStateName, s Input) error {
	switch scState {
	case operatorv1.UnmanagedStorageClass:
		return nil
	case operatorv1.RemovedStorageClass:
		sc, err := desiredStorageClass(d, "")
		if err != nil {
			return err
		}
		p.Delete = plan.Identities(plan.Steps(apply.ClusterGuest, GroupClasses, sc))
		for _, z := range zoneClassesLive(s.StorageClasses) {
			p.Delete = append(p.Delete, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(z)})
		}
		return nil
	}
	sc, err := desiredStorageClass(d, defaultClassValue(s.StorageClass, s.StorageClasses))
	if err != nil {
		return err
	}
	if s.StorageClass != nil {
		// Conditional on the class as read (see apply.Apply): the default-class annotation is
		// kept from it, and a cache that has not yet seen a user's change of it must not write
		// the old value back over the user's.
		sc.ResourceVersion = s.StorageClass.ResourceVersion
	}
	p.Apply = append(p.Apply, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: sc})
	switch {
	case !p.Features.Known:
		// The decision is not known: the per-zone classes stay as they are.
	case p.Features.Err != nil:
		p.Problems = append(p.Problems, undecodable(p.Features.Err, cfg.HyperShift))
	default:
		zp, err := planZoneClasses(d, p.Features, s.StorageClasses)
		if err != nil {
			return err
		}
		for _, z := range zp.Apply {
			p.Apply = append(p.Apply, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: z})
		}
		for _, z := range zp.Recreate {
			p.Recreate = append(p.Recreate, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(z)})
		}
		for _, z := range zp.Create {
			p.Create = append(p.Create, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(z)})
		}
		p.Retire, p.InvalidZones, p.ForeignClasses = zp.Retire, zp.Invalid, zp.Foreign
	}
	return nil
}

// snapshotClasses plans standard-csi's VolumeSnapshotClass and, as the node copy says, the backup
// class; only while the kind is served. A live class of the backup class's name that is not the
// operator's (see ownBackupClass) is left alone, asked for or not.
func (p *Plan) snapshotClasses(d *manifests.Decoder, s Input) error {
	force := snapshotForceCreate(p.Features, s.SnapshotClass)
	vsc, err := desiredVolumeSnapshotClass(d, force, defaultSnapshotClassValue(s.SnapshotClass, s.SnapshotClasses))
	if err != nil {
		return err
	}
	p.Apply = append(p.Apply, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: vsc})
	p.SnapshotClass = true
	switch {
	case snapshotClassNeedsRecreate(s.SnapshotClass, vsc):
		p.Recreate = append(p.Recreate, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(vsc)})
	case s.SnapshotClass != nil:
		// Conditional on the class as read, as standard-csi's StorageClass is (a class deleted
		// to be made anew is not: its apply creates it).
		vsc.ResourceVersion = s.SnapshotClass.ResourceVersion
	}
	if !p.Features.Known {
		return nil
	}
	backup, err := desiredBackupSnapshotClass(d, p.Features.BackupZone, force)
	if err != nil {
		return err
	}
	live := s.BackupSnapshotClass
	if live != nil && !ownBackupClass(live) {
		// Someone else's: an apply would force the operator's fields onto it, and neither a
		// recreate nor a delete is the operator's to make. Reported while it is asked for.
		p.BackupClassTaken = p.Features.BackupClass
		return nil
	}
	if !p.Features.BackupClass {
		// Turned off, or never asked for: deleted when it exists.
		if live != nil {
			p.Delete = append(p.Delete, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(backup)})
		}
		return nil
	}
	p.Apply = append(p.Apply, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: backup})
	recreate := snapshotClassNeedsRecreate(live, backup)
	if recreate {
		p.Recreate = append(p.Recreate, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(backup)})
	}
	if recreate || live == nil {
		p.Create = append(p.Create, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(backup)})
	}
	return nil
}

// removals returns what managementState Removed deletes: everything, plus the per-zone classes
// that exist (found by their label: which zones they are for is not known then) and the backup
// VolumeSnapshotClass when it exists and is the operator's (see ownBackupClass).
func removals(d *manifests.Decoder, cfg Config, s Input) ([]plan.Step, error) {
	all, err := everything(d, cfg, s.SnapshotCRD)
	if err != nil {
		return nil, err
	}
	var extra []plan.Step
	for _, z := range zoneClassesLive(s.StorageClasses) {
		extra = append(extra, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: plan.Identity(z)})
	}
	if s.SnapshotCRD && s.BackupSnapshotClass != nil && ownBackupClass(s.BackupSnapshotClass) {
		backup, err := desiredBackupSnapshotClass(d, "", "")
		if err != nil {
			return nil, err
		}
		extra = append(extra, plan.Step{Cluster: apply.ClusterGuest, Group: GroupClasses, Object: backup})
	}
	// Before the static objects, which everything puts last.
	i := slices.IndexFunc(all, func(st plan.Step) bool { return st.Group == GroupStatic })
	if i < 0 {
		i = len(all)
	}
	return slices.Concat(all[:i], extra, all[i:]), nil
}

// holdControllerRBAC keeps the controller's RBAC (standalone) out of the removal while the
// controller's ServiceAccount exists: the controlplane manager deletes the ServiceAccount once the
// controller's pods have ended, and until then their sidecars need the lease Role to release their
// leader leases as they stop. The ServiceAccount's deletion brings the guest manager back.
func (p *Plan) holdControllerRBAC(d *manifests.Decoder) error {
	rbac, err := d.Operand("controller_rbac.yaml")
	if err != nil {
		return err
	}
	held := map[string]bool{}
	for _, st := range plan.Steps(apply.ClusterGuest, GroupStatic, rbac...) {
		held[st.String()] = true
	}
	p.Hold(func(st plan.Step) bool { return held[st.String()] },
		fmt.Sprintf("The CSI controller's RBAC stays until ServiceAccount %s is deleted, once the controller's pods have ended.", names.ControllerServiceAccount))
	return nil
}

// everything returns every object the guest manager can create in this mode, whatever the inputs:
// what managementState Removed deletes. The VolumeSnapshotClass is among them only while its kind
// is served (a delete of a kind that is not served fails, and there is nothing to delete then).
func everything(d *manifests.Decoder, cfg Config, snapshotCRD bool) ([]plan.Step, error) {
	// An empty node copy the controlplane manager wrote: usable, deciding nothing.
	cloudConf := &corev1.ConfigMap{}
	operand.Managed(cloudConf)
	nodeconf.Seal(cloudConf)
	s := Input{Config: cfg, Driver: &operatorv1.ClusterCSIDriver{}, CloudConf: cloudConf, SnapshotCRD: snapshotCRD}
	p, err := Compute(d, s)
	if err != nil {
		return nil, err
	}
	// Delete the DaemonSet and the classes before the RBAC and CSIDriver they rely on.
	var first, last []plan.Step
	for _, st := range p.Apply {
		if st.Group == GroupStatic {
			last = append(last, st)
		} else {
			first = append(first, st)
		}
	}
	return append(first, last...), nil
}

// desiredNodeFor returns the node DaemonSet for the node cloud-conf as it is in the guest, with
// its topology decision.
func desiredNodeFor(d *manifests.Decoder, cfg Config, cloudConf *corev1.ConfigMap, topology bool, verbosity int) (*appsv1.DaemonSet, error) {
	return desiredNode(d, nodeInputs{
		Images:        cfg.Images,
		Verbosity:     verbosity,
		Topology:      topology,
		CloudConfName: nodeconf.Name(cfg.HyperShift),
		// Only the keys the node plugin reads: the controlplane manager's decisions for the
		// guest manager share the ConfigMap and must not roll it.
		CloudConfHash: nodeconf.PluginHash(cloudConf),
	})
}

// undecodable returns the problem of a usable node copy whose keys err (a nodeconf.DecodeError)
// names do not decode: a release of the controlplane manager that writes what this one does not
// read.
func undecodable(err error, hyperShift bool) string {
	subject, verb := "A key", "does not decode"
	var de nodeconf.DecodeError
	if errors.As(err, &de) && len(de) == 1 {
		subject = "Key " + de[0].Key
	} else if len(de) > 1 {
		subject, verb = "Keys "+strings.Join(de.Keys(), ", "), "do not decode"
	}
	return fmt.Sprintf("%s of ConfigMap %s/%s, which the controlplane manager writes, %s; the per-zone StorageClasses are left as they are.",
		subject, names.GuestNamespace, nodeconf.Name(hyperShift), verb)
}
