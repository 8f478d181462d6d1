package desired

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudconfig"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// This file reads the opt-in feature keys of the user's openshift-config/cinder-csi-config and
// turns the decisions they ask for into the node copy of cloud-conf (nodeconf.Contents), where
// the guest manager finds them. Only cinder-csi-config carries them: the installer's cloud
// provider config is the cloud provider's file, and a cluster without either runs with every
// feature off.

// features are the feature keys as resolved.
type features struct {
	// ZoneClasses asks for one StorageClass per usable volume zone; Mapping maps compute zones
	// to volume zones of other names.
	ZoneClasses bool
	Mapping     zoneclasses.Mapping
	// BackupClass asks for the backup VolumeSnapshotClass, its backups in BackupZone ("" lets
	// Cinder choose).
	BackupClass bool
	BackupZone  string
	// PVCAnnotations gives the driver --pvc-annotations.
	PVCAnnotations bool
	// SnapshotForceCreate is false only when the user set snapshot_force_create to "false".
	SnapshotForceCreate bool
	// AttachmentWarningAfter is how long an attachment may take before it is reported.
	AttachmentWarningAfter time.Duration
}

// defaultFeatures are the features of a cluster that asks for none.
func defaultFeatures() features {
	return features{SnapshotForceCreate: true, AttachmentWarningAfter: DefaultAttachmentWarningAfter}
}

// DefaultAttachmentWarningAfter is how long an attachment may take before it is reported: the
// external-attacher retries for minutes with backoff, and a healthy attach takes seconds.
const DefaultAttachmentWarningAfter = 5 * time.Minute

// minAttachmentWarningAfter is the shortest attachment_warning_after: a healthy attach takes
// seconds, and a shorter bound would report every slow one.
const minAttachmentWarningAfter = 10 * time.Second

// parseFeatures reads the feature keys of src, the defaults when src is not cinder-csi-config. A
// value that is not valid is a ConfigError naming the key (worded by configProblem); values are
// never quoted but for a zone mapping's pair, which names zones only.
func parseFeatures(src ConfigSource) (features, []error) {
	f := defaultFeatures()
	if src.Kind != UserConfigSource {
		return f, nil
	}
	var errs []error
	flag := func(key string, into *bool) {
		v, err := parseFlag(src.Data[key], *into)
		if err != nil {
			errs = append(errs, &cloudconfig.ConfigError{Key: key, Reason: err.Error()})
			return
		}
		*into = v
	}
	flag(names.KeyZoneStorageClasses, &f.ZoneClasses)
	flag(names.KeyBackupSnapshotClass, &f.BackupClass)
	flag(names.KeyPVCAnnotations, &f.PVCAnnotations)
	flag(names.KeySnapshotForceCreate, &f.SnapshotForceCreate)

	m, err := zoneclasses.ParseMapping(src.Data[names.KeyZoneMapping])
	if err != nil {
		errs = append(errs, &cloudconfig.ConfigError{Key: names.KeyZoneMapping,
			Reason: fmt.Sprintf("%s; write compute=volume pairs of availability zone names, separated by commas or newlines", err)})
	}
	f.Mapping = m

	if d, err := ParseAttachmentWarningAfter(src.Data[names.KeyAttachmentWarningAfter]); err != nil {
		errs = append(errs, err)
	} else {
		f.AttachmentWarningAfter = d
	}

	zone := strings.TrimSpace(src.Data[names.KeyBackupAvailabilityZone])
	if strings.ContainsFunc(zone, unicode.IsControl) {
		errs = append(errs, &cloudconfig.ConfigError{Key: names.KeyBackupAvailabilityZone,
			Reason: "contains a control character; write the name of one Cinder availability zone, or leave it empty"})
	} else {
		f.BackupZone = zone
	}
	return f, errs
}

// ParseAttachmentWarningAfter parses the value of attachment_warning_after: the default when
// blank, an error naming the key when not a duration of at least minAttachmentWarningAfter.
func ParseAttachmentWarningAfter(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return DefaultAttachmentWarningAfter, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < minAttachmentWarningAfter {
		return DefaultAttachmentWarningAfter, &cloudconfig.ConfigError{Key: names.KeyAttachmentWarningAfter,
			Reason: fmt.Sprintf("is not a duration of at least %s; write one such as 5m or 90s, or leave it empty for %s", minAttachmentWarningAfter, DefaultAttachmentWarningAfter)}
	}
	return d, nil
}

// parseFlag parses a feature switch: "true" or "false" in any case (as enable_topology), blanks
// around it ignored; empty is the default.
func parseFlag(s string, def bool) (bool, error) {
	switch v := strings.TrimSpace(s); {
	case v == "":
		return def, nil
	case strings.EqualFold(v, "true"):
		return true, nil
	case strings.EqualFold(v, "false"):
		return false, nil
	}
	return def, fmt.Errorf(`must be "true" or "false", or be left empty for the default (%t)`, def)
}

// zoneRecord is the zones the per-zone decisions are made from: the latest listing's when it
// succeeded, else those the live node copy of cloud-conf records, else the last success of this
// process. Known is false when there are none anywhere (no listing ever succeeded).
type zoneRecord struct {
	Compute, Volume []string
	Known           bool
}

// chooseZones returns the zones the node copy carries. An OpenStack outage, or an operator that
// restarted and has not listed yet, must never drop a per-zone class: until a listing succeeds,
// the zones the node copy records stay in force, as the topology decision does (chooseTopology).
// A successful listing always holds zones (openstack.DetectTopology fails on an empty list), so an
// offline Detection without zones reads as no listing.
func chooseZones(det Detection, liveNode nodeconf.Contents) zoneRecord {
	if det.Failure == "" && len(det.VolumeZones) > 0 {
		return zoneRecord{Compute: det.ComputeZones, Volume: det.VolumeZones, Known: true}
	}
	if len(liveNode.VolumeZones) > 0 {
		return zoneRecord{Compute: liveNode.ComputeZones, Volume: liveNode.VolumeZones, Known: true}
	}
	if len(det.VolumeZones) > 0 {
		return zoneRecord{Compute: det.ComputeZones, Volume: det.VolumeZones, Known: true}
	}
	return zoneRecord{}
}

// nodeDecisions returns what the node copy of cloud-conf carries besides cloud.conf,
// enable_topology and the CA, for the guest manager: the zones, the per-zone classes decided
// under the topology decision in force, and the snapshot class settings. None of them is in
// nodeconf.PluginKeys, so none rolls the node plugin, and the controller copy carries none.
func nodeDecisions(f features, zones zoneRecord, topology bool) nodeconf.Contents {
	c := nodeconf.Contents{SnapshotForceCreate: f.SnapshotForceCreate}
	if zones.Known {
		// Recorded once known, even without a zone: a listing succeeded.
		c.VolumeZones = append([]string{}, zones.Volume...)
		if len(zones.Compute) > 0 {
			c.ComputeZones = zones.Compute
		}
		if f.ZoneClasses {
			c.ZoneClasses = zoneclasses.Decide(zones.Compute, zones.Volume, f.Mapping, topology)
		}
	}
	if f.BackupClass {
		c.BackupClass, c.BackupZone = true, f.BackupZone
	}
	return c
}

// needsZones reports whether f needs a zone listing even when the user decides topology: the
// per-zone classes are made from the zones, and the backup warning from the same listing.
func (f features) needsZones() bool { return f.ZoneClasses || f.BackupClass }
