package guest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// zoneLabel is the well-known zone label of a node; the kubelet sets it from the cloud provider.
// A node without it may still carry the driver's names.TopologyKey, set from the node plugin.
const zoneLabel = corev1.LabelTopologyZone

// zoneListMax is how many zones or classes a message names before "and N more".
const zoneListMax = 3

// nodeComputeZone returns the compute zone of a node from its labels: the well-known zone label,
// else the driver's topology label; "" when it has neither.
func nodeComputeZone(labels map[string]string) string {
	if z := labels[zoneLabel]; z != "" {
		return z
	}
	return labels[names.TopologyKey]
}

// nodeZones counts the nodes of each compute zone; nodes without a zone are left out.
func nodeZones(nodes []metav1.PartialObjectMetadata) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		if z := nodeComputeZone(n.Labels); z != "" {
			out[z]++
		}
	}
	return out
}

// claimsByClass counts, for each of classes, the claims that use it. A claim uses a class when it
// names it (spec.storageClassName) and is Bound or Pending: a bound claim's volume can still be
// expanded, which needs its class, and a pending claim is still to be provisioned from it. A Lost
// claim has no volume left to serve. The beta annotation some old claims carry instead of the
// field counts as naming the class.
func claimsByClass(claims []corev1.PersistentVolumeClaim, classes []string) map[string]int {
	out := map[string]int{}
	for i := range claims {
		c := &claims[i]
		name := claimClass(c)
		if !slices.Contains(classes, name) {
			continue
		}
		switch c.Status.Phase {
		case corev1.ClaimBound, corev1.ClaimPending, "":
			out[name]++
		}
	}
	return out
}

// zoneInputs is what the zone warning is computed from.
type zoneInputs struct {
	Features desired.Features
	// NodeZones counts the nodes of each compute zone; nil when the nodes were not read (topology
	// off, no zone listing yet, or the operator may not watch nodes).
	NodeZones map[string]int
	// Kept counts the claims of each per-zone class kept because claims use it; claimsUnknown
	// for a class kept because the operator may not watch claims to count them.
	Kept map[string]int
	// Foreign are the per-zone classes asked for whose name a StorageClass that is not the
	// operator's holds (desired.Plan.ForeignClasses).
	Foreign []string
	// BackupClassTaken is set when the backup class is asked for and a VolumeSnapshotClass that
	// is not the operator's holds its name (desired.Plan.BackupClassTaken).
	BackupClassTaken bool
	// InvalidZones are the volume zones that cannot name a per-zone class.
	InvalidZones []string
}

// watchesNodes reports whether the zone warning needs the nodes: topology on and the volume zones
// known.
func watchesNodes(f desired.Features) bool {
	return f.Known && f.Topology && f.VolumeZones != nil
}

// setZoneWarning sets the zone warning: True while nodes are in a compute zone that is no volume
// zone, where claims of standard-csi cannot be provisioned under topology, a per-zone class is
// kept for its claims, a per-zone class's name is held by a StorageClass of someone else's, the
// backup class's name by a VolumeSnapshotClass of someone else's, or a volume zone cannot name a
// class; else False. The backup class has no condition of the guest manager's own (BackupWarning
// is the controlplane manager's), so a name taken from it is told here, with the other names taken.
func setZoneWarning(st *conditions.Set, in zoneInputs) {
	v := zoneWarning(in)
	st.Set(names.ConditionZoneWarning, v.Status, v.Reason, v.Message)
}

// zoneWarning computes the zone warning's verdict; see setZoneWarning.
func zoneWarning(in zoneInputs) conditions.Verdict {
	var reasons, msgs []string
	if zones, nodes := strandedZones(in); len(zones) > 0 {
		reasons = append(reasons, names.ReasonNodesOutsideVolumeZones)
		msgs = append(msgs, fmt.Sprintf("%s %s (%s) %s no Cinder volume zone of the same name, and topology is on: "+
			"claims of StorageClass %s cannot be provisioned on %s nodes. Map these compute zones to volume zones with zone_mapping "+
			"and set zone_storage_classes \"true\" in ConfigMap %s/%s, then use the per-zone classes; or set enable_topology \"false\" there.",
			pluralWord(len(zones), "Compute zone", "Compute zones"), listSome(zones), plural(nodes, "node"), verb(len(zones)),
			names.StorageClass, pluralWord(len(zones), "its", "their"), names.OpenShiftConfigNamespace, names.UserConfigMap))
	}
	counted, unknown := keptClasses(in.Kept)
	if len(counted) > 0 {
		classes := slices.Sorted(maps.Keys(counted))
		claims := 0
		for _, n := range counted {
			claims += n
		}
		reasons = append(reasons, names.ReasonZoneClassInUse)
		msgs = append(msgs, fmt.Sprintf("%s %s %s kept because %s %s %s, although %s no longer asked for (%s volume %s went away, or zone_storage_classes was turned off): "+
			"new claims of %s would be provisioned into a zone that may be gone. Delete those claims to have %s removed, or keep %s by asking for %s again "+
			"(zone_storage_classes \"true\" and, for a compute zone of another name, zone_mapping in ConfigMap %s/%s).",
			pluralWord(len(classes), "StorageClass", "StorageClasses"), listSome(classes), isAre(len(classes)),
			plural(claims, "claim"), pluralWord(claims, "uses", "use"), pluralWord(len(classes), "it", "them"),
			pluralWord(len(classes), "it is", "they are"), pluralWord(len(classes), "its", "their"), pluralWord(len(classes), "zone", "zones"),
			pluralWord(len(classes), "it", "them"), pluralWord(len(classes), "the class", "the classes"), pluralWord(len(classes), "it", "them"),
			pluralWord(len(classes), "it", "them"), names.OpenShiftConfigNamespace, names.UserConfigMap))
	}
	if n := len(unknown); n > 0 {
		reasons = append(reasons, names.ReasonZoneClassInUse)
		msgs = append(msgs, fmt.Sprintf("%s %s %s kept, although %s no longer asked for: the operator may not list and watch claims in every namespace "+
			"to tell whether a claim uses %s. Grant it list and watch of persistentvolumeclaims, or delete %s once no claim uses %s.",
			pluralWord(n, "StorageClass", "StorageClasses"), listSome(unknown), isAre(n), pluralWord(n, "it is", "they are"),
			pluralWord(n, "it", "them"), pluralWord(n, "the class", "the classes"), pluralWord(n, "it", "them")))
	}
	if n := len(in.Foreign); n > 0 {
		zones := make([]string, n)
		for i, name := range in.Foreign {
			zones[i] = strings.TrimPrefix(name, zoneclasses.ClassPrefix)
		}
		reasons = append(reasons, names.ReasonZoneClassNameTaken)
		msgs = append(msgs, fmt.Sprintf("%s %s %s not the operator's (%s the operator's labels), so the operator leaves %s alone and %s %s %s no per-zone class. "+
			"Rename or delete %s to let the operator create %s.",
			pluralWord(n, "StorageClass", "StorageClasses"), listSome(in.Foreign), pluralWord(n, "exists and is", "exist and are"),
			pluralWord(n, "it lacks", "they lack"), pluralWord(n, "it", "them"),
			pluralWord(n, "volume zone", "volume zones"), listSome(zones), verb(n),
			pluralWord(n, "that StorageClass", "those StorageClasses"), pluralWord(n, "it", "them")))
	}
	if in.BackupClassTaken {
		reasons = append(reasons, names.ReasonBackupClassNameTaken)
		msgs = append(msgs, fmt.Sprintf("VolumeSnapshotClass %s exists and is not the operator's (it lacks the label %s=%s), so the operator leaves it alone "+
			"and does not make the backup class that %s \"true\" in ConfigMap %s/%s asks for. Rename or delete that VolumeSnapshotClass to let the operator create it.",
			names.BackupSnapshotClass, names.ManagedByLabel, names.ManagedByValue,
			names.KeyBackupSnapshotClass, names.OpenShiftConfigNamespace, names.UserConfigMap))
	}
	if len(in.InvalidZones) > 0 {
		reasons = append(reasons, names.ReasonZoneNameInvalid)
		msgs = append(msgs, fmt.Sprintf("%s %s cannot name a StorageClass (lower-case letters, digits, '-' and '.' only), so %s no per-zone class.",
			pluralWord(len(in.InvalidZones), "Volume zone", "Volume zones"), quoteSome(in.InvalidZones),
			pluralWord(len(in.InvalidZones), "it gets", "they get")))
	}
	if len(reasons) == 0 {
		return conditions.Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonAsExpected}
	}
	return conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: reasons[0], Message: strings.Join(msgs, " ")}
}

// keptClasses splits kept into the classes whose claims were counted and, sorted, those kept
// with claimsUnknown.
func keptClasses(kept map[string]int) (counted map[string]int, unknown []string) {
	counted = map[string]int{}
	for name, n := range kept {
		if n == claimsUnknown {
			unknown = append(unknown, name)
		} else {
			counted[name] = n
		}
	}
	slices.Sort(unknown)
	return counted, unknown
}

// strandedZones returns the compute zones, sorted, whose nodes cannot get a volume of standard-csi
// under topology, and how many nodes they hold: the driver creates a claim's volume in the zone of
// the node its pod was placed on, so a compute zone that is no volume zone fails every such claim.
// A per-zone class mapped to the zone does not change that for standard-csi (the default class),
// so the warning stays while such nodes exist; its message names both ways out.
func strandedZones(in zoneInputs) ([]string, int) {
	if in.NodeZones == nil || !watchesNodes(in.Features) {
		return nil, 0
	}
	var zones []string
	nodes := 0
	for z, n := range in.NodeZones {
		if !slices.Contains(in.Features.VolumeZones, z) {
			zones = append(zones, z)
			nodes += n
		}
	}
	slices.Sort(zones)
	return zones, nodes
}

// listSome joins sorted items, naming at most zoneListMax and counting the rest.
func listSome(items []string) string { return conditions.JoinSome(items, zoneListMax) }

// quoteSome is listSome of the items quoted: a zone name that cannot name a class may hold blanks.
func quoteSome(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return listSome(q)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func verb(n int) string { return pluralWord(n, "has", "have") }

func isAre(n int) string { return pluralWord(n, "is", "are") }
