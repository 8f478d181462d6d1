package nodeconf

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// fuzzKeys are the keys FuzzDecode sets, in the order of its arguments; bit i of its present
// argument says whether fuzzKeys[i] is in the data.
var fuzzKeys = []string{
	KeyCloudConf, KeyEnableTopology, KeyCABundle, KeyVolumeZones, KeyComputeZones, KeyZoneClasses,
	KeyBackupSnapshotClass, KeyBackupAvailabilityZone, KeySnapshotForceCreate,
}

// FuzzDecode checks Decode, which reads what another manager (or csi-operator, or a user's edit)
// left in the node copy, on arbitrary values of every key, each present or not:
//
//   - it never panics;
//   - its error is nil or a DecodeError, one line, naming each key once, only keys it knows;
//   - what it returns, even with an error, is a valid Contents: Encode then Decode gives it back
//     with no error, and encoding that gives back the same data.
//
// Its seeds are below; `make fuzz` explores further.
func FuzzDecode(f *testing.F) {
	all := uint16(1)<<len(fuzzKeys) - 1
	f.Add("[BlockStorage]\n", "true", "", "az1,az2,ceph", "az1,az2,nova",
		`[{"volumeZone":"az1","computeZones":["az1"]},{"volumeZone":"ceph","computeZones":["nova"]}]`, "true", "az2", "false", all)
	f.Add("", "false", "", "", "", "", "", "", "", uint16(0b11))
	f.Add("[Global]\n", "true", "-----BEGIN CERTIFICATE-----\n", " b , a,,a ", "", "[]", "false", " z ", "true", all)
	f.Add("", "yes", "", "", "", `[{"volumeZone":"a","computeZones":[]},{}]`, "TRUE", "", "nonsense", all)
	f.Add("", "", "", "x", "y", `{"volumeZone":"a"}`, "", "", "", all)
	f.Add("", "", "", "", "", "null", "", "", "", all)
	f.Fuzz(func(t *testing.T, cloudConf, topology, ca, volume, compute, classes, backup, backupZone, force string, present uint16) {
		data := map[string]string{}
		for i, v := range []string{cloudConf, topology, ca, volume, compute, classes, backup, backupZone, force} {
			if present&(1<<i) != 0 {
				data[fuzzKeys[i]] = v
			}
		}
		c, err := Decode(data)
		if err != nil {
			var de DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode's error %T is not a DecodeError", err)
			}
			keys := de.Keys()
			if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
				t.Fatalf("DecodeError names keys %q, not each once in order", keys)
			}
			for _, k := range keys {
				if _, ok := data[k]; !ok {
					t.Fatalf("DecodeError names key %q, which the data does not hold", k)
				}
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("DecodeError %q is not one line", err)
			}
		}
		enc := Encode(c)
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode of Encode(%#v) failed: %v", c, err)
		}
		if !equal(back, c) {
			t.Fatalf("Decode(Encode(x)) = %#v, want x = %#v", back, c)
		}
		if again := Encode(back); !maps.Equal(again, enc) {
			t.Fatalf("Encode changed on a round trip: %q, then %q", enc, again)
		}
	})
}

// equal compares Contents as reflect.DeepEqual does, nil and empty slices apart.
func equal(a, b Contents) bool {
	sameZones := func(x, y []string) bool { return (x == nil) == (y == nil) && slices.Equal(x, y) }
	if a.CloudConf != b.CloudConf || a.Topology != b.Topology || a.CABundle != b.CABundle ||
		a.BackupClass != b.BackupClass || a.BackupZone != b.BackupZone || a.SnapshotForceCreate != b.SnapshotForceCreate ||
		!sameZones(a.VolumeZones, b.VolumeZones) || !sameZones(a.ComputeZones, b.ComputeZones) ||
		(a.ZoneClasses == nil) != (b.ZoneClasses == nil) || len(a.ZoneClasses) != len(b.ZoneClasses) {
		return false
	}
	for i := range a.ZoneClasses {
		if a.ZoneClasses[i].VolumeZone != b.ZoneClasses[i].VolumeZone || !sameZones(a.ZoneClasses[i].ComputeZones, b.ZoneClasses[i].ComputeZones) {
			return false
		}
	}
	return true
}
