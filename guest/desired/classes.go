package desired

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// This file holds the classes next to standard-csi that the controlplane manager's decisions ask
// for, through keys of the node copy of cloud-conf: the per-zone StorageClasses, the backup
// VolumeSnapshotClass, and standard-csi's force-create.

// Parameters of the driver's StorageClasses and VolumeSnapshotClasses.
const (
	paramAvailability = "availability"
	paramForceCreate  = "force-create"
)

// Features is what the node copy of cloud-conf decides for the classes, decoded. Known is false
// while the node copy is missing or still csi-operator's (not nodeconf.Usable): then nothing here
// is decided, and what exists is left as it is.
type Features struct {
	Known bool
	nodeconf.Contents
	// Err is set when keys of the node copy do not decode (a nodeconf.DecodeError, which names
	// them): then the per-zone classes are left as they are, and each key that does not decode
	// reads as its default.
	Err error
}

// readFeatures decodes the node copy, usable when it is the controlplane manager's (see Compute).
func readFeatures(cm *corev1.ConfigMap, usable bool) Features {
	if cm == nil || !usable {
		return Features{}
	}
	c, err := nodeconf.Decode(cm.Data)
	return Features{Known: true, Contents: c, Err: err}
}

// validZoneClass reports whether c's volume zone can name a StorageClass (a DNS subdomain) and be
// the value of names.ZoneClassLabel. OpenStack allows zone names that cannot (upper case, blanks,
// "_"); such a zone gets no class and the zone warning names it.
func validZoneClass(c zoneclasses.Class) bool {
	return len(validation.IsDNS1123Subdomain(c.Name())) == 0 && len(validation.IsValidLabelValue(c.VolumeZone)) == 0
}

// desiredZoneClass returns the per-zone StorageClass of c: standard-csi's shape (provisioner,
// reclaim policy, binding mode, expansion, parameters) without the default-class annotation (the
// operator never makes it the default), creating its volumes in c's volume zone and, when
// topology is on, offered only to nodes of c's compute zones.
func desiredZoneClass(d *manifests.Decoder, c zoneclasses.Class) (*storagev1.StorageClass, error) {
	sc, err := desiredStorageClass(d, "")
	if err != nil {
		return nil, err
	}
	delete(sc.Annotations, names.DefaultStorageClassAnnotation)
	if len(sc.Annotations) == 0 {
		sc.Annotations = nil
	}
	sc.Name = c.Name()
	sc.Labels[names.ZoneClassLabel] = c.VolumeZone
	if sc.Parameters == nil {
		sc.Parameters = map[string]string{}
	}
	sc.Parameters[paramAvailability] = c.VolumeZone
	if len(c.ComputeZones) > 0 {
		zones := slices.Sorted(slices.Values(c.ComputeZones))
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{
			MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: names.TopologyKey, Values: zones}},
		}}
	}
	return sc, nil
}

// ownZoneClass reports whether sc is a per-zone class of the operator's: it carries both the
// operator's label and the per-zone label, as every per-zone class the operator made does. A class
// of a per-zone name without them is someone else's, also one of the operator's whose labels a
// user removed: taking that back would override the user's decision, and a class whose immutable
// fields differ would be deleted to be recreated.
func ownZoneClass(sc *storagev1.StorageClass) bool {
	_, zoned := sc.Labels[names.ZoneClassLabel]
	return zoned && sc.Labels[names.ManagedByLabel] == names.ManagedByValue
}

// zoneClassesLive returns the operator's per-zone classes (see ownZoneClass) among all of the
// cluster's: the only ones it applies over, retires or deletes.
func zoneClassesLive(all []storagev1.StorageClass) []*storagev1.StorageClass {
	var out []*storagev1.StorageClass
	for i := range all {
		if sc := &all[i]; ownZoneClass(sc) {
			out = append(out, sc)
		}
	}
	slices.SortFunc(out, func(a, b *storagev1.StorageClass) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// storageClassNeedsRecreate reports whether live differs from desired in a field an apply cannot
// change. The API server refuses changes of provisioner, parameters, reclaimPolicy and
// volumeBindingMode; allowedTopologies it lets change, but the create-and-update fallback (see
// apply.UpdateFallback) cannot remove it when topology is turned off, so a change of it recreates
// the class too. Deleting a StorageClass does not touch the volumes provisioned from it.
func storageClassNeedsRecreate(live, desired *storagev1.StorageClass) bool {
	if live == nil {
		return false
	}
	policy := func(p *corev1.PersistentVolumeReclaimPolicy) corev1.PersistentVolumeReclaimPolicy {
		if p == nil {
			return corev1.PersistentVolumeReclaimDelete // the API server's default
		}
		return *p
	}
	mode := func(m *storagev1.VolumeBindingMode) storagev1.VolumeBindingMode {
		if m == nil {
			return storagev1.VolumeBindingImmediate // the API server's default
		}
		return *m
	}
	return live.Provisioner != desired.Provisioner ||
		!maps.Equal(live.Parameters, desired.Parameters) ||
		policy(live.ReclaimPolicy) != policy(desired.ReclaimPolicy) ||
		mode(live.VolumeBindingMode) != mode(desired.VolumeBindingMode) ||
		!sameTopologies(live.AllowedTopologies, desired.AllowedTopologies)
}

// sameTopologies compares two allowedTopologies, the order of values aside.
func sameTopologies(a, b []corev1.TopologySelectorTerm) bool {
	canon := func(terms []corev1.TopologySelectorTerm) []string {
		var out []string
		for _, t := range terms {
			var reqs []string
			for _, r := range t.MatchLabelExpressions {
				reqs = append(reqs, r.Key+"="+strings.Join(slices.Sorted(slices.Values(r.Values)), ","))
			}
			slices.Sort(reqs)
			out = append(out, strings.Join(reqs, ";"))
		}
		return out
	}
	return slices.Equal(canon(a), canon(b))
}

// snapshotForceCreate returns standard-csi's force-create: "true" unless the user opted out. While
// the node copy is not known, the live class keeps its value (csi-operator's "false" included),
// so that a switch from csi-operator does not flip it twice.
func snapshotForceCreate(f Features, live *snapshotv1.VolumeSnapshotClass) string {
	switch {
	case f.Known:
		return strconv.FormatBool(f.SnapshotForceCreate)
	case live != nil && live.Parameters[paramForceCreate] != "":
		return live.Parameters[paramForceCreate]
	}
	return "true"
}

// desiredBackupSnapshotClass returns the VolumeSnapshotClass whose snapshots are Cinder backups,
// in zone when set, with standard-csi's force-create. It carries the operator's label, as it has
// since the operator first made it: that label tells the operator's class from a user's of the
// same name (see ownBackupClass).
func desiredBackupSnapshotClass(d *manifests.Decoder, zone, forceCreate string) (*snapshotv1.VolumeSnapshotClass, error) {
	vsc, err := manifests.Object[*snapshotv1.VolumeSnapshotClass](d, "volumesnapshotclass_backup.yaml")
	if err != nil {
		return nil, err
	}
	operand.Managed(vsc)
	if vsc.Parameters == nil {
		vsc.Parameters = map[string]string{}
	}
	if zone != "" {
		vsc.Parameters[paramAvailability] = zone
	}
	vsc.Parameters[paramForceCreate] = forceCreate
	return vsc, nil
}

// ownBackupClass reports whether vsc, the live VolumeSnapshotClass of the backup class's name, is
// the operator's: it carries the operator's label. One without it is someone else's, also one of
// the operator's whose label a user removed: the operator neither applies over it, recreates it
// nor deletes it, as ownZoneClass says of the per-zone classes. csi-operator never made a class
// of that name, so no class of a switch from it is taken for a user's.
func ownBackupClass(vsc *snapshotv1.VolumeSnapshotClass) bool {
	return vsc.Labels[names.ManagedByLabel] == names.ManagedByValue
}

// snapshotClassNeedsRecreate reports whether live holds a parameter desired no longer sets (the
// backups' zone unset). VolumeSnapshotClass parameters are mutable (the CRD has no rule against a
// change), and an apply removes such a key, but the create-and-update fallback cannot.
func snapshotClassNeedsRecreate(live, desired *snapshotv1.VolumeSnapshotClass) bool {
	if live == nil {
		return false
	}
	for k := range live.Parameters {
		if _, ok := desired.Parameters[k]; !ok {
			return true
		}
	}
	return false
}

// zoneClassPlan is what the per-zone classes add to a plan under storageClassState Managed.
type zoneClassPlan struct {
	Apply    []*storagev1.StorageClass
	Recreate []*storagev1.StorageClass
	// Create are the classes of Apply that have no live copy, or are recreated: written with a
	// create, never an apply (see Plan.Create).
	Create []*storagev1.StorageClass
	// Retire are live per-zone classes no longer asked for, deleted unless a claim uses them.
	Retire []string
	// Invalid are volume zones that cannot name a class.
	Invalid []string
	// Foreign are the classes asked for whose name a class that is not the operator's (see
	// ownZoneClass) already has, sorted: neither applied nor ever deleted.
	Foreign []string
}

// planZoneClasses computes the per-zone classes for f against all of the cluster's live classes.
func planZoneClasses(d *manifests.Decoder, f Features, all []storagev1.StorageClass) (zoneClassPlan, error) {
	var zp zoneClassPlan
	byName := map[string]*storagev1.StorageClass{}
	for i := range all {
		byName[all[i].Name] = &all[i]
	}
	live := zoneClassesLive(all)
	wanted := map[string]bool{}
	for _, c := range f.ZoneClasses {
		if !validZoneClass(c) {
			zp.Invalid = append(zp.Invalid, c.VolumeZone)
			continue
		}
		sc, err := desiredZoneClass(d, c)
		if err != nil {
			return zp, fmt.Errorf("computing StorageClass %s: %w", c.Name(), err)
		}
		if other := byName[sc.Name]; other != nil && !ownZoneClass(other) {
			// A server-side apply would force the operator's fields onto it (and fail on
			// an immutable field that differs), and a retirement would later delete it.
			zp.Foreign = append(zp.Foreign, sc.Name)
			continue
		}
		wanted[sc.Name] = true
		zp.Apply = append(zp.Apply, sc)
		recreate := storageClassNeedsRecreate(byName[sc.Name], sc)
		if recreate {
			zp.Recreate = append(zp.Recreate, sc)
		}
		if recreate || byName[sc.Name] == nil {
			zp.Create = append(zp.Create, sc)
		}
	}
	for _, sc := range live {
		if !wanted[sc.Name] {
			zp.Retire = append(zp.Retire, sc.Name)
		}
	}
	slices.Sort(zp.Invalid)
	slices.Sort(zp.Foreign)
	return zp, nil
}
