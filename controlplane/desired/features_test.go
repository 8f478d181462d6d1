package desired

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

func TestParseFeatures(t *testing.T) {
	t.Parallel()
	user := func(data map[string]string) ConfigSource {
		return ConfigSource{Kind: UserConfigSource, Name: names.UserConfigMap, Key: names.KeyUserConfig, Data: data}
	}
	for _, tt := range []struct {
		name    string
		src     ConfigSource
		want    features
		wantErr []string
	}{
		{name: "When cinder-csi-config sets no feature key, it should turn every feature off but force-create", src: user(nil), want: defaultFeatures()},
		{
			name: "When cinder-csi-config turns every feature on, it should read each, in any case and with blanks",
			src: user(map[string]string{
				names.KeyZoneStorageClasses: "true", names.KeyZoneMapping: "nova-a = az-a,\nnova-b=az-b",
				names.KeyBackupSnapshotClass: " TRUE ", names.KeyBackupAvailabilityZone: " az-a ",
				names.KeyPVCAnnotations: "True", names.KeySnapshotForceCreate: "false",
				names.KeyAttachmentWarningAfter: " 90s ",
			}),
			want: features{ZoneClasses: true, Mapping: zoneclasses.Mapping{"nova-a": "az-a", "nova-b": "az-b"},
				BackupClass: true, BackupZone: "az-a", PVCAnnotations: true, AttachmentWarningAfter: 90 * time.Second},
		},
		{
			name:    "When the attachment bound is no duration or too short, it should say what to write",
			src:     user(map[string]string{names.KeyAttachmentWarningAfter: "5"}),
			want:    defaultFeatures(),
			wantErr: []string{"cinder-csi-config: attachment_warning_after: is not a duration of at least 10s; write one such as 5m or 90s"},
		},
		{
			name:    "When the attachment bound is shorter than 10s, it should refuse it",
			src:     user(map[string]string{names.KeyAttachmentWarningAfter: "2s"}),
			want:    defaultFeatures(),
			wantErr: []string{"cinder-csi-config: attachment_warning_after: is not a duration of at least 10s"},
		},
		{
			name: "When the installer's cloud provider config holds feature keys, it should ignore them",
			src:  ConfigSource{Kind: InstallerConfigSource, Name: "cloud-provider-config", Key: "config", Data: map[string]string{names.KeyZoneStorageClasses: "true", names.KeySnapshotForceCreate: "nonsense"}},
			want: defaultFeatures(),
		},
		{
			name:    "When a switch is neither true nor false, it should name the key and the default, never the value",
			src:     user(map[string]string{names.KeyZoneStorageClasses: "yes", names.KeySnapshotForceCreate: "0", names.KeyPVCAnnotations: "s3cret"}),
			want:    defaultFeatures(),
			wantErr: []string{`cinder-csi-config: zone_storage_classes: must be "true" or "false", or be left empty for the default (false)`, `cinder-csi-config: pvc_annotations: must be`, `cinder-csi-config: snapshot_force_create: must be "true" or "false", or be left empty for the default (true)`},
		},
		{
			name:    "When the zone mapping is not compute=volume pairs, it should say which pair",
			src:     user(map[string]string{names.KeyZoneMapping: "az1=v1,az2"}),
			want:    defaultFeatures(),
			wantErr: []string{`cinder-csi-config: zone_mapping: "az2" is not a compute=volume pair; write compute=volume pairs`},
		},
		{
			name:    "When the backup zone holds a control character, it should refuse it",
			src:     user(map[string]string{names.KeyBackupAvailabilityZone: "a\x00b"}),
			want:    defaultFeatures(),
			wantErr: []string{"cinder-csi-config: backup_availability_zone: contains a control character"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, errs := parseFeatures(tt.src)
			g.Expect(errs).To(HaveLen(len(tt.wantErr)))
			for i, want := range tt.wantErr {
				g.Expect(errs[i].Error()).To(HavePrefix(want))
				g.Expect(errs[i].Error()).NotTo(ContainSubstring("s3cret"))
			}
			if len(got.Mapping) == 0 {
				got.Mapping = nil
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestChooseZones(t *testing.T) {
	t.Parallel()
	yes := true
	live := map[string]string{nodeconf.KeyComputeZones: "c1,c2", nodeconf.KeyVolumeZones: "v2,v1"}
	for _, tt := range []struct {
		name string
		det  Detection
		live map[string]string
		want zoneRecord
	}{
		{name: "When the latest listing succeeded, it should use its zones over the live node copy's",
			det: Detection{Enabled: &yes, ComputeZones: []string{"c3"}, VolumeZones: []string{"v3"}}, live: live,
			want: zoneRecord{Compute: []string{"c3"}, Volume: []string{"v3"}, Known: true}},
		{name: "When the latest listing failed, it should keep the zones the live node copy records",
			det: Detection{Enabled: &yes, Failure: openstack.ReasonUnreachable, ComputeZones: []string{"c3"}, VolumeZones: []string{"v3"}}, live: live,
			want: zoneRecord{Compute: []string{"c1", "c2"}, Volume: []string{"v1", "v2"}, Known: true}},
		{name: "When no listing ran in this process (a restart, or no listing needed), it should keep the live node copy's zones",
			live: live, want: zoneRecord{Compute: []string{"c1", "c2"}, Volume: []string{"v1", "v2"}, Known: true}},
		{name: "When an offline render gives a decision without zones, it should keep the live node copy's zones",
			det: Offline(true), live: live, want: zoneRecord{Compute: []string{"c1", "c2"}, Volume: []string{"v1", "v2"}, Known: true}},
		{name: "When the listing failed and the node copy records nothing, it should keep this process's last success",
			det:  Detection{Enabled: &yes, Failure: openstack.ReasonTimeout, ComputeZones: []string{"c3"}, VolumeZones: []string{"v3"}},
			want: zoneRecord{Compute: []string{"c3"}, Volume: []string{"v3"}, Known: true}},
		{name: "When no zones are known anywhere, it should say so", det: Detection{Failure: openstack.ReasonTimeout}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			live, err := nodeconf.Decode(tt.live)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(chooseZones(tt.det, live)).To(Equal(tt.want))
		})
	}
}

func TestNodeDecisions(t *testing.T) {
	t.Parallel()
	zones := zoneRecord{Compute: []string{"az1", "az2", "nova"}, Volume: []string{"az1", "az2", "ceph"}, Known: true}
	on := defaultFeatures()
	on.ZoneClasses = true
	on.Mapping = zoneclasses.Mapping{"nova": "ceph"}
	for _, tt := range []struct {
		name     string
		f        features
		zones    zoneRecord
		topology bool
		want     map[string]string
	}{
		{name: "When no feature is on and no zone is known, it should add nothing", f: defaultFeatures(), want: map[string]string{}},
		{name: "When no feature is on, it should still record the zones", f: defaultFeatures(), zones: zones,
			want: map[string]string{nodeconf.KeyVolumeZones: "az1,az2,ceph", nodeconf.KeyComputeZones: "az1,az2,nova"}},
		{name: "When per-zone classes are on with topology, it should pin each volume zone to its compute zones, mapped ones included", f: on, zones: zones, topology: true,
			want: map[string]string{nodeconf.KeyVolumeZones: "az1,az2,ceph", nodeconf.KeyComputeZones: "az1,az2,nova",
				nodeconf.KeyZoneClasses: `[{"volumeZone":"az1","computeZones":["az1"]},{"volumeZone":"az2","computeZones":["az2"]},{"volumeZone":"ceph","computeZones":["nova"]}]`}},
		{name: "When per-zone classes are on without topology, it should give every volume zone an unpinned class", f: on, zones: zones,
			want: map[string]string{nodeconf.KeyVolumeZones: "az1,az2,ceph", nodeconf.KeyComputeZones: "az1,az2,nova",
				nodeconf.KeyZoneClasses: `[{"volumeZone":"az1"},{"volumeZone":"az2"},{"volumeZone":"ceph"}]`}},
		{name: "When per-zone classes are on but no zone is known, it should write no class key", f: on, topology: true, want: map[string]string{}},
		{name: "When the backup class is asked for in a zone and force-create is off, it should carry both settings",
			f:    features{BackupClass: true, BackupZone: "az2"},
			want: map[string]string{nodeconf.KeyBackupSnapshotClass: "true", nodeconf.KeyBackupAvailabilityZone: "az2", nodeconf.KeySnapshotForceCreate: "false"}},
		{name: "When the backup class is asked for without a zone, it should carry no zone", f: features{BackupClass: true, SnapshotForceCreate: true},
			want: map[string]string{nodeconf.KeyBackupSnapshotClass: "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The keys the decisions add to the node copy, cloud.conf and enable_topology aside.
			got := nodeconf.Encode(nodeDecisions(tt.f, tt.zones, tt.topology))
			delete(got, nodeconf.KeyCloudConf)
			delete(got, nodeconf.KeyEnableTopology)
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}

// featureConfig is a cinder-csi-config with every feature on.
func featureConfig() map[string]string {
	return map[string]string{
		names.KeyUserConfig:             testUserConfig,
		names.KeyZoneStorageClasses:     "true",
		names.KeyZoneMapping:            "nova=ceph",
		names.KeyBackupSnapshotClass:    "true",
		names.KeyBackupAvailabilityZone: "az2",
		names.KeyPVCAnnotations:         "true",
		names.KeySnapshotForceCreate:    "false",
	}
}

// withFeatures is s with every feature on and a listing that found zones az1, az2 and nova
// (compute) and az1, az2 and ceph (volume).
func withFeatures(s Input, topology bool) Input {
	s.UserConfig = &corev1.ConfigMap{Data: featureConfig()}
	s.Detection = OfflineZones(topology, []string{"az1", "az2", "nova"}, []string{"az1", "az2", "ceph"})
	return s
}

// planNodeCopy returns the node copy of cloud-conf a plan applies.
func planNodeCopy(g Gomega, p *Plan) *corev1.ConfigMap {
	for _, s := range p.Apply {
		if cm, ok := s.Object.(*corev1.ConfigMap); ok && s.Cluster == apply.ClusterGuest {
			return cm
		}
	}
	g.Expect(false).To(BeTrue(), "the plan applies no node copy")
	return nil
}

func TestDesiredFeatures(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name  string
		rc    Config
		state func() Input
	}{
		{"on HyperShift", hyperShiftConfig(), func() Input { return hyperShiftState(false, testutil.CA) }},
		{"standalone", standaloneConfig(), func() Input { return standaloneState(false, false) }},
	} {
		t.Run("When the class features are switched on "+mode.name+", it should change the node copy and nothing next to the controller", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			off := mode.state()
			off.Detection = OfflineZones(true, []string{"az1", "az2", "nova"}, []string{"az1", "az2", "ceph"})
			on := withFeatures(mode.state(), true)
			delete(on.UserConfig.Data, names.KeyPVCAnnotations)
			pOff, pOn := desiredPlan(t, mode.rc, off), desiredPlan(t, mode.rc, on)
			g.Expect(pOn.Problems).To(BeEmpty())
			g.Expect(pOn.Apply).To(HaveLen(len(pOff.Apply)))
			for i := range pOn.Apply {
				if pOn.Apply[i].Cluster == apply.ClusterGuest {
					continue
				}
				g.Expect(pOn.Apply[i].Object).To(Equal(pOff.Apply[i].Object), "%T %s", pOn.Apply[i].Object, pOn.Apply[i].Object.GetName())
			}
			node := planNodeCopy(g, pOn)
			g.Expect(node.Data).To(HaveKeyWithValue(nodeconf.KeyZoneClasses,
				`[{"volumeZone":"az1","computeZones":["az1"]},{"volumeZone":"az2","computeZones":["az2"]},{"volumeZone":"ceph","computeZones":["nova"]}]`))
			g.Expect(node.Data).To(HaveKeyWithValue(nodeconf.KeyBackupSnapshotClass, "true"))
			g.Expect(node.Data).To(HaveKeyWithValue(nodeconf.KeyBackupAvailabilityZone, "az2"))
			g.Expect(node.Data).To(HaveKeyWithValue(nodeconf.KeySnapshotForceCreate, "false"))
			g.Expect(planNodeCopy(g, pOff).Data).To(HaveKeyWithValue(nodeconf.KeyVolumeZones, "az1,az2,ceph"))
			for _, k := range nodeconf.PluginKeys {
				g.Expect(node.Data[k]).To(Equal(planNodeCopy(g, pOff).Data[k]), "the node plugin's key %s", k)
			}
		})

		t.Run("When OpenStack is down after a restart "+mode.name+", it should keep the per-zone classes the live node copy records", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			before := withFeatures(mode.state(), true)
			live := planNodeCopy(g, desiredPlan(t, mode.rc, before))

			after := withFeatures(mode.state(), true)
			after.Detection = Detection{Failure: openstack.ReasonUnreachable, Pending: false}
			after.NodeCloudConf = live
			after.CloudConf = &corev1.ConfigMap{Data: map[string]string{nodeconf.KeyEnableTopology: "true"}}
			p := desiredPlan(t, mode.rc, after)
			g.Expect(planNodeCopy(g, p).Data).To(Equal(live.Data))
			g.Expect(p.Topology.Failure).To(Equal(openstack.ReasonUnreachable))
		})

		t.Run("When the mapping changes during an outage "+mode.name+", it should decide the classes again from the recorded zones", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			live := planNodeCopy(g, desiredPlan(t, mode.rc, withFeatures(mode.state(), true)))
			after := withFeatures(mode.state(), true)
			after.UserConfig.Data[names.KeyZoneMapping] = ""
			after.Detection = Detection{Failure: openstack.ReasonTimeout}
			after.NodeCloudConf = live
			after.CloudConf = &corev1.ConfigMap{Data: map[string]string{nodeconf.KeyEnableTopology: "true"}}
			g.Expect(planNodeCopy(g, desiredPlan(t, mode.rc, after)).Data).To(HaveKeyWithValue(nodeconf.KeyZoneClasses,
				`[{"volumeZone":"az1","computeZones":["az1"]},{"volumeZone":"az2","computeZones":["az2"]}]`))
		})
	}

	t.Run("When a feature key is invalid, it should report a problem naming the ConfigMap and key, and apply nothing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := hyperShiftState(false, "")
		s.UserConfig.Data[names.KeyBackupSnapshotClass] = "on"
		p := desiredPlan(t, hyperShiftConfig(), s)
		g.Expect(p.Apply).To(BeEmpty())
		g.Expect(p.ProblemMessages()).To(ConsistOf(`ConfigMap openshift-config/cinder-csi-config: backup_snapshot_class: must be "true" or "false", or be left empty for the default (false).`))
		g.Expect(p.Problems[0].Reason).To(Equal(names.ReasonInvalidConfig))
	})

	t.Run("When topology is overridden and per-zone classes or the backup class are on, it should still list", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		for _, key := range []string{names.KeyZoneStorageClasses, names.KeyBackupSnapshotClass} {
			s := hyperShiftState(false, "")
			s.UserConfig.Data[names.KeyEnableTopology] = "false"
			s.UserConfig.Data[key] = "true"
			in, ok := Resolve(configured(hyperShiftConfig(), s)).Listing()
			g.Expect(ok).To(BeTrue(), key)
			g.Expect(in.Decided).To(BeTrue(), "the override is a decision in force: nothing to wait for")
			g.Expect(in.Backup).To(Equal(key == names.KeyBackupSnapshotClass))
		}
	})
}
