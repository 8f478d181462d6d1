package nodeconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// StandaloneName is the node copy's name in standalone mode, where it shares the controller
// copy's namespace: a ConfigMap of its own, so that the nodes never mount a config that names
// the credentials file.
const StandaloneName = "cloud-conf-node"

// Name is the name of the node copy in the guest namespace. On HyperShift it lives in another
// cluster than the controller copy and keeps csi-operator's name, names.CloudConfConfigMap, so
// that a switch from csi-operator adopts it; standalone it is StandaloneName.
func Name(hyperShift bool) string {
	if hyperShift {
		return names.CloudConfConfigMap
	}
	return StandaloneName
}

// Keys of cloud-conf that the driver reads; the controller copy has these alone.
const (
	// KeyCloudConf is the driver's INI file; the node copy's has no [Global] and so names no
	// credentials.
	KeyCloudConf = "cloud.conf"
	// KeyEnableTopology is the topology decision, "true" or "false", which both sides give the
	// driver as --with-topology. It carries the user's override under the user's key.
	KeyEnableTopology = names.KeyEnableTopology
	// KeyCABundle is the OpenStack CA bundle, under the key of the ConfigMaps it comes from. The
	// controlplane manager writes it into the controller copy only; a node copy of csi-operator's
	// may hold one.
	KeyCABundle = names.KeyCABundle
)

// Keys of the node copy that carry the controlplane manager's decisions to the guest manager.
// The node plugin mounts none of them: they are left out of its pod-template hash (PluginKeys),
// so they never roll it.
const (
	// KeyZoneClasses holds the per-zone StorageClasses, a JSON list of zoneclasses.Class;
	// absent when there are none.
	KeyZoneClasses = "zone_classes"
	// KeyVolumeZones holds the volume zones of the last zone listing that succeeded, sorted and
	// comma-separated; absent before one did.
	KeyVolumeZones = "volume_zones"
	// KeyComputeZones holds the compute zones of that same listing, sorted and comma-separated;
	// absent before one succeeded or when it found none. The controlplane manager reads both
	// back when OpenStack cannot be asked, so that the per-zone classes are decided again from
	// the recorded zones, under the current zone_mapping and topology decision, instead of
	// vanishing.
	KeyComputeZones = "compute_zones"
	// KeyBackupSnapshotClass is "true" when the user asked for the backup VolumeSnapshotClass;
	// absent otherwise.
	KeyBackupSnapshotClass = names.KeyBackupSnapshotClass
	// KeyBackupAvailabilityZone is the availability zone of those backups; absent when Cinder
	// chooses.
	KeyBackupAvailabilityZone = names.KeyBackupAvailabilityZone
	// KeySnapshotForceCreate is "false" when the user opted out of force-create on standard-csi's
	// VolumeSnapshotClass; absent for the default, "true".
	KeySnapshotForceCreate = names.KeySnapshotForceCreate
)

// PluginKeys are the keys of the node copy the node plugin reads, the only ones its
// pod-template hash covers (PluginHash).
var PluginKeys = []string{KeyCloudConf, KeyEnableTopology, KeyCABundle}

// HashInput names the cloud-conf hash among a pod template's hash annotations
// (confighash.AnnotationKey): the controller Deployment's, of the controller copy, and the node
// DaemonSet's, of the node copy's PluginKeys.
const HashInput = "configmap-cloud-conf"

// HashAnnotation holds, on both copies of cloud-conf, the hash (Hash) of the data the
// controlplane manager wrote. The guest manager uses the node copy only while the hash matches
// (Usable): after a switch back to csi-operator and forward again, csi-operator's rewrite of the
// ConfigMap keeps this operator's labels and annotations, and only the hash tells its content
// from the controlplane manager's.
const HashAnnotation = "cinder.csi.openshift.io/data-hash"

// Contents is what the node copy carries, decoded: what the controlplane manager writes and the
// guest manager reads. Its zero value is not the defaults, because SnapshotForceCreate's default
// is true; start from Defaults.
type Contents struct {
	// CloudConf is cloud.conf; Topology is enable_topology; CABundle is ca-bundle.pem, "" when
	// absent.
	CloudConf string
	Topology  bool
	CABundle  string
	// VolumeZones and ComputeZones are the zones of the last listing that succeeded, sorted
	// and without repeats (zoneclasses.Zones). VolumeZones is nil before one did, and non-nil,
	// even empty, once the key is present; ComputeZones is nil when its key is absent.
	VolumeZones  []string
	ComputeZones []string
	// ZoneClasses are the per-zone StorageClasses; nil when there are none.
	ZoneClasses []zoneclasses.Class
	// BackupClass asks for the backup VolumeSnapshotClass, its backups in BackupZone ("" lets
	// Cinder choose).
	BackupClass bool
	BackupZone  string
	// SnapshotForceCreate is standard-csi's force-create, as the user's snapshot_force_create
	// key: true unless the user set it to "false". The same convention holds on both sides.
	SnapshotForceCreate bool
}

// Defaults returns the Contents that decide nothing: what Decode gives for no data, the zero
// value but SnapshotForceCreate.
func Defaults() Contents { return Contents{SnapshotForceCreate: true} }

// Encode returns the node copy's data for c. Zone lists are written sorted and without repeats;
// a key whose value is the default of its absence is left out, as every release has written
// it. A zone name must hold no comma, the lists' separator.
func Encode(c Contents) map[string]string {
	data := map[string]string{
		KeyCloudConf:      c.CloudConf,
		KeyEnableTopology: strconv.FormatBool(c.Topology),
	}
	if c.CABundle != "" {
		data[KeyCABundle] = c.CABundle
	}
	if c.VolumeZones != nil {
		data[KeyVolumeZones] = strings.Join(zoneclasses.Zones(c.VolumeZones), ",")
	}
	if c.ComputeZones != nil {
		data[KeyComputeZones] = strings.Join(zoneclasses.Zones(c.ComputeZones), ",")
	}
	if len(c.ZoneClasses) > 0 {
		data[KeyZoneClasses] = encodeClasses(c.ZoneClasses)
	}
	if c.BackupClass {
		data[KeyBackupSnapshotClass] = "true"
	}
	if c.BackupZone != "" {
		data[KeyBackupAvailabilityZone] = c.BackupZone
	}
	if !c.SnapshotForceCreate {
		data[KeySnapshotForceCreate] = "false"
	}
	return data
}

// Decode reads the node copy's data. An absent key decodes to its default (enable_topology and
// backup_snapshot_class false, snapshot_force_create true, the rest empty); keys it does not
// know are ignored. A key whose value does not decode keeps that default and is named in the
// error, a DecodeError; the other keys are decoded all the same, so the caller decides what a
// bad key stops.
func Decode(data map[string]string) (Contents, error) {
	var errs DecodeError
	flag := func(key string, def bool) bool {
		v, ok := data[key]
		if !ok {
			return def
		}
		b, err := parseBool(v)
		if err != nil {
			errs = append(errs, KeyError{Key: key, Reason: err.Error()})
			return def
		}
		return b
	}
	c := Contents{
		CloudConf:           data[KeyCloudConf],
		Topology:            flag(KeyEnableTopology, false),
		CABundle:            data[KeyCABundle],
		BackupClass:         flag(KeyBackupSnapshotClass, false),
		BackupZone:          strings.TrimSpace(data[KeyBackupAvailabilityZone]),
		SnapshotForceCreate: flag(KeySnapshotForceCreate, true),
	}
	if v, ok := data[KeyVolumeZones]; ok {
		// Present, even empty, means a listing succeeded: not nil.
		c.VolumeZones = append([]string{}, zoneclasses.SplitZones(v)...)
	}
	if v, ok := data[KeyComputeZones]; ok {
		c.ComputeZones = append([]string{}, zoneclasses.SplitZones(v)...)
	}
	classes, err := decodeClasses(data[KeyZoneClasses])
	if err != nil {
		errs = append(errs, KeyError{Key: KeyZoneClasses, Reason: err.Error()})
	}
	c.ZoneClasses = classes
	if len(errs) > 0 {
		errs.sort()
		return c, errs
	}
	return c, nil
}

// errNotSwitch is the reason of a switch that is neither "true" nor "false".
var errNotSwitch = errors.New(`is not "true" or "false"`)

// parseBool parses a switch as strconv.FormatBool writes it. Every release wrote "true" or
// "false" exactly; csi-operator's enable_topology too.
func parseBool(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errNotSwitch
}

// encodeClasses returns the value of KeyZoneClasses for classes, a JSON list.
func encodeClasses(classes []zoneclasses.Class) string {
	b, err := json.Marshal(classes)
	if err != nil {
		// A slice of strings and string slices always marshals.
		panic(err)
	}
	return string(b)
}

// decodeClasses parses the value of KeyZoneClasses; blank is no classes. A class with no
// compute zones has them nil, as zoneclasses.Decide makes it, and an empty list is nil.
func decodeClasses(s string) ([]zoneclasses.Class, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []zoneclasses.Class
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("is not a JSON list of per-zone classes: %w", err)
	}
	for i := range out {
		if len(out[i].ComputeZones) == 0 {
			out[i].ComputeZones = nil
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Hash returns the data hash of a cloud-conf's data, as HashAnnotation records it.
func Hash(data map[string]string, binaryData map[string][]byte) string {
	return confighash.Data(data, binaryData)
}

// Seal records on cm the hash of its data (HashAnnotation), after its data is final.
func Seal(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[HashAnnotation] = Hash(cm.Data, cm.BinaryData)
}

// Usable reports whether cm is a node copy the controlplane manager wrote: it carries the
// operator's label, and the hash it records is its data's. A node copy that is not usable is
// still csi-operator's (HyperShift keeps csi-operator's name for it) or was rewritten by it, and
// nothing is decided from it.
func Usable(cm *corev1.ConfigMap) bool {
	return cm != nil && cm.Labels[names.ManagedByLabel] == names.ManagedByValue &&
		cm.Annotations[HashAnnotation] == Hash(cm.Data, cm.BinaryData)
}

// PluginHash returns the node plugin's pod-template hash of cm (HashInput): its PluginKeys only,
// so that the decisions for the guest manager, which share the ConfigMap, never roll the node
// plugin. For a node copy holding only those keys it is confighash.ConfigMap's, so that an
// upgrade from a release that hashed the whole ConfigMap rolls no node plugin. "" when cm is nil.
func PluginHash(cm *corev1.ConfigMap) string {
	return confighash.ConfigMapKeys(cm, PluginKeys...)
}
