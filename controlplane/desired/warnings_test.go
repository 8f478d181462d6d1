package desired

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudconfig"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// userSource is cinder-csi-config as the source of the driver settings.
var userSource = ConfigSource{Kind: UserConfigSource, Name: names.UserConfigMap, Key: names.KeyUserConfig}

func TestAttachLimitWarning(t *testing.T) {
	t.Parallel()
	installer := ConfigSource{Kind: InstallerConfigSource, Name: "cloud-provider-config", Key: "config"}
	for _, tt := range []struct {
		name        string
		src         ConfigSource
		report      cloudconfig.Report
		wantOn      bool
		wantMessage string
	}{
		{name: "When [BlockStorage] sets an attach limit, it should not warn", src: userSource, report: cloudconfig.Report{AttachLimit: 25, AttachLimitSet: true},
			wantMessage: "[BlockStorage] sets node-volume-attach-limit: the node plugin reports it to the scheduler."},
		{name: "When [BlockStorage] sets none, it should say where to set it and a typical value", src: userSource, wantOn: true,
			wantMessage: "[BlockStorage] sets no node-volume-attach-limit, so the node plugin reports no attach limit and the scheduler may place more " +
				"volumes on a node than its instance can attach. Set node-volume-attach-limit in [BlockStorage] of key config of ConfigMap " +
				"openshift-config/cinder-csi-config, for example to 25 on virtio-blk instances, which attach about 26 disks, the root disk included."},
		{name: "When [BlockStorage] sets it to 0, it should warn as for none", src: userSource, report: cloudconfig.Report{AttachLimitSet: true}, wantOn: true,
			wantMessage: "[BlockStorage] sets node-volume-attach-limit to 0, so the node plugin reports no attach limit"},
		{name: "When the settings come from the installer's file, it should say cinder-csi-config takes its place", src: installer, wantOn: true,
			wantMessage: "(which then takes the place of the installer's cloud provider config openshift-config/cloud-provider-config)"},
		{name: "When no configuration exists at all, it should warn", src: ConfigSource{}, wantOn: true, wantMessage: "[BlockStorage] sets no node-volume-attach-limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			w := attachLimitWarning(&settings{Source: tt.src, Report: tt.report})
			g.Expect(w.Type).To(Equal(names.ConditionAttachLimitWarning))
			g.Expect(w.On).To(Equal(tt.wantOn))
			g.Expect(w.Reason).To(Equal(map[bool]string{true: names.ReasonAttachLimitNotSet, false: names.ReasonAsExpected}[tt.wantOn]))
			g.Expect(w.Message).To(ContainSubstring(tt.wantMessage))
		})
	}
}

func TestConfigKeysWarning(t *testing.T) {
	t.Parallel()
	installer := ConfigSource{Kind: InstallerConfigSource, Name: "cloud-provider-config", Key: "config"}
	for _, tt := range []struct {
		name string
		// src is userSource when unset.
		src         ConfigSource
		ini         string
		wantOn      bool
		wantMessage string
	}{
		{name: "When every key is known, it should not warn", ini: "[BlockStorage]\nnode-volume-attach-limit = 25\n[Metadata]\nsearch-order = configDrive\n",
			wantMessage: "The driver knows every key of the driver settings."},
		{name: "When keys, sections and [Global] are ignored, it should name each, say where credentials come from and never echo a value",
			ini:    "stray = 1\n[Global]\npassword = s3cret-pa55\n[LoadBalancer]\nuse-octavia = true\n[BlockStorage]\nnode-volume-attach-limits = 25\ntrust-device-path = false\n",
			wantOn: true,
			wantMessage: "The driver settings in key config of ConfigMap openshift-config/cinder-csi-config hold what the driver never sees or ignores. " +
				"[BlockStorage] keys the installed driver does not know, and ignores: node-volume-attach-limits (it knows ignore-volume-az, " +
				"ignore-volume-microversion, node-volume-attach-limit, rescan-on-resize). [BlockStorage] keys the CSI driver does not use, left out: " +
				"trust-device-path. Section [Global] is dropped: the OpenStack credentials and endpoints come from the credentials Secret " +
				"openstack-cloud-credentials only, never from cinder-csi-config. Sections the driver settings do not include, dropped: [LoadBalancer] " +
				"(only [BlockStorage] and [Metadata] are kept). Keys before the first section header are dropped. Remove them, or fix their names."},
		{name: "When the installer's cloud provider config holds cloud provider keys in [BlockStorage], it should say to leave them and point at cinder-csi-config",
			src:    installer,
			ini:    "[Global]\nsecret-name = openstack-credentials\n[LoadBalancer]\nuse-octavia = true\n[BlockStorage]\nbs-version = v3\ntrust-device-path = false\nignore-volume-az = yes\n",
			wantOn: true,
			wantMessage: "The driver settings come from [BlockStorage] of the installer's cloud provider config, key config of ConfigMap " +
				"openshift-config/cloud-provider-config, as ConfigMap openshift-config/cinder-csi-config does not exist; it holds what the " +
				"driver never sees or ignores. [BlockStorage] keys the installed driver does not know, and ignores: bs-version (it knows " +
				"ignore-volume-az, ignore-volume-microversion, node-volume-attach-limit, rescan-on-resize). [BlockStorage] keys the CSI " +
				"driver does not use, left out: trust-device-path. These keys belong to the cloud provider: leave them in that file. To give " +
				"the driver settings of its own, create key config of ConfigMap openshift-config/cinder-csi-config with a [BlockStorage] " +
				"section of the driver's keys only, carrying over those the installer's file sets (ignore-volume-az, say): it then takes " +
				"the place of the installer's file for the driver, and this warning clears."},
		{name: "When the installer's cloud provider config holds only keys the driver knows, it should not warn about its other sections",
			src:         installer,
			ini:         "[Global]\nsecret-name = openstack-credentials\n[LoadBalancer]\nuse-octavia = true\n[BlockStorage]\nignore-volume-az = yes\n",
			wantMessage: "The driver knows every key of the driver settings."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			src := tt.src
			if src.Kind == NoConfigSource {
				src = userSource
			}
			report, err := cloudconfig.Inspect(cloudconfig.Input{UserConfig: tt.ini, BlockStorageOnly: src.Kind == InstallerConfigSource})
			g.Expect(err).NotTo(HaveOccurred())
			w := configKeysWarning(&settings{Source: src, Report: report})
			g.Expect(w.On).To(Equal(tt.wantOn))
			g.Expect(w.Reason).To(Equal(map[bool]string{true: names.ReasonIgnoredConfiguration, false: names.ReasonAsExpected}[tt.wantOn]))
			g.Expect(w.Message).To(Equal(tt.wantMessage))
			g.Expect(w.Message).NotTo(ContainSubstring("s3cret"))
		})
	}
}

func TestBackupWarning(t *testing.T) {
	t.Parallel()
	on := features{BackupClass: true}
	inZone := features{BackupClass: true, BackupZone: "az2"}
	listed := func(services ...openstack.BackupService) BackupDetection {
		return BackupDetection{Listed: true, Services: services}
	}
	for _, tt := range []struct {
		name        string
		f           features
		b           BackupDetection
		wantReason  string
		wantMessage string
	}{
		{name: "When the backup class is not asked for, it should not warn, whatever Cinder says", f: defaultFeatures(),
			b: BackupDetection{Failure: openstack.ReasonPermissionDenied}, wantReason: names.ReasonAsExpected,
			wantMessage: "The backup VolumeSnapshotClass standard-csi-backup is not asked for."},
		{name: "When a backup service is up and enabled, it should not warn", f: on, b: listed(openstack.BackupService{Zone: "az1", Usable: true}),
			wantReason: names.ReasonAsExpected, wantMessage: "A Cinder backup service is up and enabled for the snapshots of standard-csi-backup."},
		{name: "When none is up and enabled, it should warn", f: on, b: listed(openstack.BackupService{Zone: "az1"}), wantReason: names.ReasonNoBackupService,
			wantMessage: "No Cinder backup service (cinder-backup) is up and enabled, so snapshots of standard-csi-backup fail. Start one, or set " +
				"backup_snapshot_class to false in ConfigMap openshift-config/cinder-csi-config."},
		{name: "When Cinder has no backup service at all, it should warn", f: on, b: listed(), wantReason: names.ReasonNoBackupService},
		{name: "When the asked zone has none, it should name the zone and the zones that have one", f: inZone,
			b: listed(openstack.BackupService{Zone: "az1", Usable: true}, openstack.BackupService{Zone: "az2"}), wantReason: names.ReasonNoBackupServiceInZone,
			wantMessage: `No Cinder backup service (cinder-backup) is up and enabled in availability zone "az2" (backup_availability_zone), so snapshots ` +
				"of standard-csi-backup fail. Set backup_availability_zone in ConfigMap openshift-config/cinder-csi-config to a zone with one (az1), " +
				"or leave it empty to let Cinder choose."},
		{name: "When the asked zone has one, it should not warn", f: inZone, b: listed(openstack.BackupService{Zone: "az2", Usable: true}),
			wantReason: names.ReasonAsExpected, wantMessage: `A Cinder backup service is up and enabled in availability zone "az2" (backup_availability_zone)`},
		{name: "When Cinder's policy refuses the listing, it should say it could not be checked and why, with a reason of its own", f: on,
			b: BackupDetection{Failure: openstack.ReasonPermissionDenied}, wantReason: names.ReasonBackupServicesForbidden,
			wantMessage: "Whether a Cinder backup service runs could not be checked: Cinder refused to list its services to the operator's OpenStack user " +
				"(its default policy allows that to administrators only)."},
		{name: "When the listing failed after a success, it should judge by the last success", f: on,
			b:          BackupDetection{Listed: true, Services: []openstack.BackupService{{Zone: "az1", Usable: true}}, Failure: openstack.ReasonUnreachable},
			wantReason: names.ReasonAsExpected},
		{name: "When the listing failed before any success, it should say it could not be checked yet", f: on,
			b: BackupDetection{Failure: openstack.ReasonUnreachable, FailureMessage: openstack.Message(openstack.ReasonUnreachable)}, wantReason: names.ReasonOpenStackUnavailable,
			wantMessage: "Whether a Cinder backup service runs could not be checked yet: The OpenStack API cannot be reached; check auth_url, DNS, " +
				"the network path and the proxy settings. The operator retries."},
		{name: "When the first listing is still running, it should not warn yet", f: on, wantReason: names.ReasonAsExpected,
			wantMessage: "Cinder's backup services are being listed."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			w := backupWarning(tt.f, tt.b)
			g.Expect(w.Type).To(Equal(names.ConditionBackupWarning))
			g.Expect(w.Reason).To(Equal(tt.wantReason))
			g.Expect(w.On).To(Equal(tt.wantReason != names.ReasonAsExpected))
			g.Expect(w.Message).To(ContainSubstring(tt.wantMessage))
		})
	}
}

func TestPlanWarnings(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := desiredPlan(t, hyperShiftConfig(), hyperShiftState(false, ""))
	var types []string
	byType := map[string]Warning{}
	for _, w := range p.Warnings {
		types = append(types, w.Type)
		byType[w.Type] = w
	}
	g.Expect(types).To(Equal(WarningTypes), "a verdict for every type, in order")
	g.Expect(byType[names.ConditionAttachLimitWarning].On).To(BeTrue(), "the test configuration sets no attach limit")
	g.Expect(byType[names.ConditionConfigKeysWarning].On).To(BeFalse())
	g.Expect(byType[names.ConditionConfigKeysWarning].Reason).To(Equal(names.ReasonAsExpected))
	g.Expect(byType[names.ConditionBackupWarning].On).To(BeFalse())
	for _, typ := range WarningTypes {
		g.Expect(names.ControlPlaneConditions).To(ContainElement(typ), "the controlplane manager owns %s", typ)
	}
}
