package nodeconf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// everyFeature is the Contents of testdata/hypershift-every-feature.yaml.
var everyFeature = Contents{
	CloudConf:    "[BlockStorage]\nignore-volume-az = true\n",
	Topology:     true,
	VolumeZones:  []string{"az1", "az2", "ceph"},
	ComputeZones: []string{"az1", "az2", "nova"},
	ZoneClasses: []zoneclasses.Class{
		{VolumeZone: "az1", ComputeZones: []string{"az1"}},
		{VolumeZone: "az2", ComputeZones: []string{"az2"}},
		{VolumeZone: "ceph", ComputeZones: []string{"nova"}},
	},
	BackupClass: true,
	BackupZone:  "az2",
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Contents
	}{
		{name: "When nothing is set, it should give back the zero value", in: Contents{}},
		{name: "When only the defaults are set, it should give them back", in: Defaults()},
		{name: "When the driver's keys alone are set, it should give them back",
			in: Contents{CloudConf: "[BlockStorage]\n", Topology: true, CABundle: "-----BEGIN CERTIFICATE-----\n", SnapshotForceCreate: true}},
		{name: "When a listing found no zone, it should keep the empty lists apart from none",
			in: Contents{VolumeZones: []string{}, ComputeZones: []string{}, SnapshotForceCreate: true}},
		{name: "When zones and pinned classes are set, it should give them back",
			in: Contents{VolumeZones: []string{"az-1", "nova"}, ComputeZones: []string{"AZ 2", "az-1"},
				ZoneClasses:         []zoneclasses.Class{{VolumeZone: "az-1", ComputeZones: []string{"AZ 2", "az-1"}}, {VolumeZone: "nova"}},
				SnapshotForceCreate: true}},
		{name: "When zone names are not ASCII, it should give them back",
			in: Contents{VolumeZones: []string{"zone-ä", "區域"}, ZoneClasses: []zoneclasses.Class{{VolumeZone: "區域", ComputeZones: []string{"zone-ä"}}}}},
		{name: "When the backup class is asked for in a zone and force-create is off, it should give them back",
			in: Contents{BackupClass: true, BackupZone: "backups"}},
		{name: "When every feature is on, it should give it back", in: everyFeature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Decode(Encode(tt.in))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.in))
		})
	}
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	got, err := Decode(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(Defaults()), "no data decides nothing")
	g.Expect(Encode(Defaults())).To(Equal(map[string]string{KeyCloudConf: "", KeyEnableTopology: "false"}), "the defaults are written as no key")
}

// TestRoundTripDecided checks that the per-zone classes zoneclasses.Decide makes, pinned or not,
// cross the wire unchanged.
func TestRoundTripDecided(t *testing.T) {
	compute, volume := []string{"a", "az-b", "nova"}, []string{"a", "ceph", "vol-b"}
	mapping := zoneclasses.Mapping{"az-b": "vol-b", "nova": "ceph"}
	for _, topology := range []bool{true, false} {
		g := NewWithT(t)
		in := Defaults()
		in.VolumeZones, in.ComputeZones, in.Topology = volume, compute, topology
		in.ZoneClasses = zoneclasses.Decide(compute, volume, mapping, topology)
		g.Expect(in.ZoneClasses).To(HaveLen(3))
		got, err := Decode(Encode(in))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(in), "topology %t", topology)
	}
}

func TestEncode(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Contents
		want map[string]string
	}{
		{name: "When nothing is decided, it should write the driver's keys and force-create's opt-out",
			in: Contents{}, want: map[string]string{KeyCloudConf: "", KeyEnableTopology: "false", KeySnapshotForceCreate: "false"}},
		{name: "When only the defaults are set, it should write the driver's keys alone",
			in: Contents{CloudConf: "c", Topology: true, SnapshotForceCreate: true}, want: map[string]string{KeyCloudConf: "c", KeyEnableTopology: "true"}},
		{name: "When zones come unsorted and repeated, it should write them sorted, once each",
			in:   Contents{VolumeZones: []string{"b", "a", "b"}, ComputeZones: []string{"z", " y "}, SnapshotForceCreate: true},
			want: map[string]string{KeyCloudConf: "", KeyEnableTopology: "false", KeyVolumeZones: "a,b", KeyComputeZones: "y,z"}},
		{name: "When an empty class list is set, it should write no key",
			in: Contents{ZoneClasses: []zoneclasses.Class{}, SnapshotForceCreate: true}, want: map[string]string{KeyCloudConf: "", KeyEnableTopology: "false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Encode(tt.in)).To(Equal(tt.want))
		})
	}
}

// TestWireToday checks that the node copies clusters hold today, as the controlplane manager
// (testdata/*.yaml but csi-operator.yaml, taken from controlplane's fixtures) and csi-operator
// write them, decode to the meaning they had; that the controlplane manager's encode to the same
// data; and that the hash they record is still Hash's, so that no upgrade finds them unusable.
func TestWireToday(t *testing.T) {
	standalone := everyFeature
	standalone.Topology = false
	standalone.ZoneClasses = append([]zoneclasses.Class(nil), everyFeature.ZoneClasses...)
	for i := range standalone.ZoneClasses {
		standalone.ZoneClasses[i].ComputeZones = nil
	}
	for _, tt := range []struct {
		name, file string
		want       Contents
		// written is set for the controlplane manager's: Encode gives back the data, and the
		// ConfigMap is usable.
		written bool
	}{
		{name: "When it is the controlplane manager's on HyperShift with every feature, it should decode as before",
			file: "hypershift-every-feature.yaml", want: everyFeature, written: true},
		{name: "When it is the controlplane manager's standalone with every feature and topology off, it should decode as before",
			file: "standalone-every-feature.yaml", want: standalone, written: true},
		{name: "When it is the controlplane manager's with no feature and no listing, it should decode as before",
			file: "standalone-plain.yaml", written: true,
			want: Contents{CloudConf: "[BlockStorage]\nignore-volume-az = true\n", SnapshotForceCreate: true}},
		{name: "When it is csi-operator's, it should decode its keys and not be usable",
			file: "csi-operator.yaml",
			want: Contents{
				CloudConf: "[Global]\nuse-clouds = true\nclouds-file = /etc/kubernetes/secret/clouds.yaml\ncloud = openstack\n" +
					"ca-file = /etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem\n",
				Topology:            true,
				CABundle:            "-----BEGIN CERTIFICATE-----\nMIIBVTCCAQegAwIBAgIUJXVTqn4fEgCu/5oh4sq6PxGIpagwBQYDK2VwMB8xHTAb\n-----END CERTIFICATE-----\n",
				SnapshotForceCreate: true,
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(filepath.Join("testdata", tt.file))
			g.Expect(err).NotTo(HaveOccurred())
			var cm corev1.ConfigMap
			g.Expect(yaml.Unmarshal(raw, &cm)).To(Succeed())

			got, err := Decode(cm.Data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(Usable(&cm)).To(Equal(tt.written))
			if tt.written {
				g.Expect(Encode(got)).To(Equal(cm.Data))
				g.Expect(cm.Name).To(Equal(Name(cm.Name == names.CloudConfConfigMap)))
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		data     map[string]string
		wantKeys []string
		want     Contents
	}{
		{name: "When zone_classes is not JSON, it should name the key and decode the rest",
			data:     map[string]string{KeyZoneClasses: "[", KeyBackupSnapshotClass: "true", KeyVolumeZones: "b,a"},
			wantKeys: []string{KeyZoneClasses},
			want:     Contents{BackupClass: true, VolumeZones: []string{"a", "b"}, SnapshotForceCreate: true}},
		{name: "When switches are not true or false, it should name each and keep their defaults",
			data:     map[string]string{KeySnapshotForceCreate: "False", KeyEnableTopology: "yes", KeyBackupSnapshotClass: "1"},
			wantKeys: []string{KeyBackupSnapshotClass, KeyEnableTopology, KeySnapshotForceCreate},
			want:     Contents{SnapshotForceCreate: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Decode(tt.data)
			var de DecodeError
			g.Expect(errors.As(err, &de)).To(BeTrue(), "a DecodeError")
			g.Expect(de.Keys()).To(Equal(tt.wantKeys))
			var ke KeyError
			g.Expect(errors.As(err, &ke)).To(BeTrue(), "each KeyError is found")
			g.Expect(ke.Key).To(Equal(tt.wantKeys[0]))
			for _, k := range tt.wantKeys {
				g.Expect(err.Error()).To(ContainSubstring("key " + k + " "))
			}
			for _, v := range tt.data {
				if len(v) > 1 {
					g.Expect(err.Error()).NotTo(ContainSubstring(`"`+v+`"`), "the value is not quoted")
				}
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestUsable(t *testing.T) {
	sealed := func(edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue}},
			Data:       Encode(everyFeature),
		}
		Seal(cm)
		if edit != nil {
			edit(cm)
		}
		return cm
	}
	for _, tt := range []struct {
		name string
		cm   *corev1.ConfigMap
		want bool
	}{
		{name: "When there is none, it should not be usable", cm: nil},
		{name: "When it is sealed and labelled, it should be usable", cm: sealed(nil), want: true},
		{name: "When its data changed after the seal, it should not be usable",
			cm: sealed(func(cm *corev1.ConfigMap) { cm.Data[KeyCloudConf] = "[Global]\n" })},
		{name: "When binary data was added after the seal, it should not be usable",
			cm: sealed(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": nil} })},
		{name: "When the operator's label is gone, it should not be usable",
			cm: sealed(func(cm *corev1.ConfigMap) { delete(cm.Labels, names.ManagedByLabel) })},
		{name: "When no hash is recorded, it should not be usable",
			cm: sealed(func(cm *corev1.ConfigMap) { cm.Annotations = nil })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Usable(tt.cm)).To(Equal(tt.want))
		})
	}
}

func TestPluginHash(t *testing.T) {
	g := NewWithT(t)
	plugin := &corev1.ConfigMap{Data: Encode(Contents{CloudConf: "[BlockStorage]\n", Topology: true, SnapshotForceCreate: true})}
	decided := &corev1.ConfigMap{Data: Encode(Contents{CloudConf: "[BlockStorage]\n", Topology: true, VolumeZones: []string{"a"},
		ZoneClasses: []zoneclasses.Class{{VolumeZone: "a"}}, BackupClass: true, BackupZone: "b"})}
	g.Expect(PluginHash(decided)).To(Equal(PluginHash(plugin)), "the decisions do not roll the node plugin")
	g.Expect(PluginHash(plugin)).To(Equal(Hash(plugin.Data, nil)), "a node copy of the plugin's keys alone hashes as a whole")
	g.Expect(PluginHash(nil)).To(BeEmpty())
	changed := plugin.DeepCopy()
	changed.Data[KeyEnableTopology] = "false"
	g.Expect(PluginHash(changed)).NotTo(Equal(PluginHash(plugin)), "the topology decision rolls it")
}
