package desired

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudconfig"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// This file decides the controlplane manager's warning conditions: informational, True while
// their cause holds and False (AsExpected) otherwise, never Degraded (cluster-storage-operator
// folds no *Warning type into the storage ClusterOperator). Their messages are stable and say
// what to set; they name keys and sections, never a value of the user's configuration.

// Warning is one warning condition's verdict: True (On) while its cause holds.
type Warning struct {
	Type    string
	On      bool
	Reason  string
	Message string
}

// WarningTypes are the warning condition types of the plan, in the order Plan.Warnings holds
// them.
var WarningTypes = []string{names.ConditionAttachLimitWarning, names.ConditionConfigKeysWarning, names.ConditionBackupWarning}

// typicalAttachLimit is the value the attach limit warning suggests: a virtio-blk instance
// attaches about 26 disks, its root disk among them (kubernetes/cloud-provider-openstack#572).
const typicalAttachLimit = 25

// userConfigRef names where the user's driver settings go.
var userConfigRef = fmt.Sprintf("key %s of ConfigMap %s/%s", names.KeyUserConfig, names.OpenShiftConfigNamespace, names.UserConfigMap)

// warnings returns the verdicts of every warning condition for valid configuration cfg and the
// listing det.
func warnings(cfg *settings, det Detection) []Warning {
	return []Warning{attachLimitWarning(cfg), configKeysWarning(cfg), backupWarning(cfg.Features, det.Backup)}
}

// attachLimitWarning: since driver v1.32 (kubernetes/cloud-provider-openstack#2655) the node
// plugin reports [BlockStorage] node-volume-attach-limit as it is, and none when it is unset or
// 0 (before, it reported 256). Kubernetes then puts no bound on the volumes of a node, and pods
// past what the instance can attach hang in ContainerCreating.
func attachLimitWarning(cfg *settings) Warning {
	w := Warning{Type: names.ConditionAttachLimitWarning}
	r := cfg.Report
	if r.AttachLimitSet && r.AttachLimit != 0 {
		w.Reason, w.Message = names.ReasonAsExpected, "[BlockStorage] sets node-volume-attach-limit: the node plugin reports it to the scheduler."
		return w
	}
	what := "[BlockStorage] sets no node-volume-attach-limit"
	if r.AttachLimitSet {
		what = "[BlockStorage] sets node-volume-attach-limit to 0"
	}
	where := userConfigRef
	if cfg.Source.Kind == InstallerConfigSource {
		where += fmt.Sprintf(" (which then takes the place of the installer's cloud provider config %s)", cfg.Source.ref())
	}
	w.On, w.Reason = true, names.ReasonAttachLimitNotSet
	w.Message = fmt.Sprintf("%s, so the node plugin reports no attach limit and the scheduler may place more volumes on a node than "+
		"its instance can attach. Set node-volume-attach-limit in [BlockStorage] of %s, for example to %d on virtio-blk instances, "+
		"which attach about 26 disks, the root disk included.", what, where, typicalAttachLimit)
	return w
}

// maxListed bounds the names one sentence lists.
const maxListed = 8

// list joins names for a message, at most maxListed of them.
func list(items []string) string { return conditions.JoinSome(items, maxListed) }

// configKeysWarning names what of the user's configuration the driver never sees (dropped by the
// operator) or does not know (passed on and ignored by the driver's parser, gcfg), which was
// silent before: a misspelt key looks applied and is not. Its advice depends on the source: keys
// of cinder-csi-config are the user's to remove or fix, while the installer's cloud provider
// config is the cloud provider's file, read for its [BlockStorage] only because clusters
// installed before 4.14 keep their driver settings there. The keys of that section the driver
// does not use (bs-version, trust-device-path, ...) are the cloud provider's and must stay, so
// the way out is cinder-csi-config, which then takes the file's place for the driver.
func configKeysWarning(cfg *settings) Warning {
	w := Warning{Type: names.ConditionConfigKeysWarning}
	r := cfg.Report
	if !r.Ignored() {
		w.Reason, w.Message = names.ReasonAsExpected, "The driver knows every key of the driver settings."
		return w
	}
	var parts []string
	if len(r.UnknownBlockStorageKeys) > 0 {
		parts = append(parts, fmt.Sprintf("[BlockStorage] keys the installed driver does not know, and ignores: %s (it knows %s).",
			list(r.UnknownBlockStorageKeys), strings.Join(knownKeys(), ", ")))
	}
	if len(r.DroppedBlockStorageKeys) > 0 {
		parts = append(parts, fmt.Sprintf("[BlockStorage] keys the CSI driver does not use, left out: %s.", list(r.DroppedBlockStorageKeys)))
	}
	if r.Global {
		parts = append(parts, fmt.Sprintf("Section [Global] is dropped: the OpenStack credentials and endpoints come from the credentials "+
			"Secret %s only, never from %s.", names.CredentialsSecret, names.UserConfigMap))
	}
	if len(r.DroppedSections) > 0 {
		quoted := make([]string, len(r.DroppedSections))
		for i, s := range r.DroppedSections {
			quoted[i] = "[" + s + "]"
		}
		parts = append(parts, fmt.Sprintf("Sections the driver settings do not include, dropped: %s (only [BlockStorage] and [Metadata] are kept).", list(quoted)))
	}
	if r.KeysBeforeSections {
		parts = append(parts, "Keys before the first section header are dropped.")
	}
	w.On, w.Reason = true, names.ReasonIgnoredConfiguration
	if cfg.Source.Kind == InstallerConfigSource {
		// Inspect reads the installer's file with BlockStorageOnly: only [BlockStorage] keys
		// are reported, never its other sections.
		w.Message = fmt.Sprintf("The driver settings come from [BlockStorage] of the installer's cloud provider config, %s, as ConfigMap "+
			"%s/%s does not exist; it holds what the driver never sees or ignores. %s These keys belong to the cloud provider: "+
			"leave them in that file. To give the driver settings of its own, create %s with a [BlockStorage] section of the "+
			"driver's keys only, carrying over those the installer's file sets (ignore-volume-az, say): it then takes the place "+
			"of the installer's file for the driver, and this warning clears.",
			cfg.Source.settingsRef(), names.OpenShiftConfigNamespace, names.UserConfigMap, strings.Join(parts, " "), userConfigRef)
		return w
	}
	w.Message = fmt.Sprintf("The driver settings in %s hold what the driver never sees or ignores. %s Remove them, or fix their names.",
		cfg.Source.settingsRef(), strings.Join(parts, " "))
	return w
}

// knownKeys are the [BlockStorage] keys of the driver, sorted.
func knownKeys() []string {
	keys := slices.Clone(cloudconfig.KnownBlockStorageKeys)
	slices.Sort(keys)
	return keys
}

// backupWarning: a backup VolumeSnapshotClass whose snapshots no cinder-backup service can take
// leaves every VolumeSnapshot of it unready (Cinder fails the backup). Evaluated only when the
// class is asked for.
func backupWarning(f features, b BackupDetection) Warning {
	w := Warning{Type: names.ConditionBackupWarning, Reason: names.ReasonAsExpected}
	if !f.BackupClass {
		w.Message = fmt.Sprintf("The backup VolumeSnapshotClass %s is not asked for.", names.BackupSnapshotClass)
		return w
	}
	if b.Failure == openstack.ReasonPermissionDenied {
		w.On, w.Reason = true, names.ReasonBackupServicesForbidden
		w.Message = fmt.Sprintf("Whether a Cinder backup service runs could not be checked: Cinder refused to list its services to the "+
			"operator's OpenStack user (its default policy allows that to administrators only). Snapshots of %s fail unless "+
			"a cinder-backup service is up and enabled%s; ask the cloud's administrators.", names.BackupSnapshotClass, inZone(f.BackupZone))
		return w
	}
	if !b.Listed {
		if b.Failure == "" {
			w.Message = "Cinder's backup services are being listed."
			return w
		}
		w.On, w.Reason = true, names.ReasonOpenStackUnavailable
		w.Message = fmt.Sprintf("Whether a Cinder backup service runs could not be checked yet: %s. The operator retries.",
			strings.TrimSuffix(backupFailureMessage(b), "."))
		return w
	}
	usable, zones := 0, map[string]bool{}
	for _, s := range b.Services {
		if s.Usable {
			usable++
			zones[s.Zone] = true
		}
	}
	switch {
	case usable == 0:
		w.On, w.Reason = true, names.ReasonNoBackupService
		w.Message = fmt.Sprintf("No Cinder backup service (cinder-backup) is up and enabled, so snapshots of %s fail. Start one, or "+
			"set %s to false in ConfigMap %s/%s.", names.BackupSnapshotClass, names.KeyBackupSnapshotClass, names.OpenShiftConfigNamespace, names.UserConfigMap)
	case f.BackupZone != "" && !zones[f.BackupZone]:
		with := slices.Sorted(maps.Keys(zones))
		w.On, w.Reason = true, names.ReasonNoBackupServiceInZone
		w.Message = fmt.Sprintf("No Cinder backup service (cinder-backup) is up and enabled%s, so snapshots of %s fail. "+
			"Set %s in ConfigMap %s/%s to a zone with one (%s), or leave it empty to let Cinder choose.",
			inZone(f.BackupZone), names.BackupSnapshotClass, names.KeyBackupAvailabilityZone, names.OpenShiftConfigNamespace, names.UserConfigMap, list(with))
	default:
		w.Message = fmt.Sprintf("A Cinder backup service is up and enabled%s for the snapshots of %s.", inZone(f.BackupZone), names.BackupSnapshotClass)
	}
	return w
}

// inZone names the backup zone in a sentence, nothing without one.
func inZone(zone string) string {
	if zone == "" {
		return ""
	}
	return fmt.Sprintf(" in availability zone %q (%s)", zone, names.KeyBackupAvailabilityZone)
}

// backupFailureMessage is the sentence of a failed listing of the backup services.
func backupFailureMessage(b BackupDetection) string {
	if b.FailureMessage != "" {
		return b.FailureMessage
	}
	return openstack.Message(b.Failure)
}
