package zoneclasses

import (
	"reflect"
	"testing"
)

func TestParseMapping(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     Mapping
		wantErr  bool
	}{
		{name: "empty", in: "", want: Mapping{}},
		{name: "commas and newlines, blanks trimmed", in: " az1 = vol1,\naz2=vol2\n\n", want: Mapping{"az1": "vol1", "az2": "vol2"}},
		{name: "no equals sign", in: "az1", wantErr: true},
		{name: "empty volume zone", in: "az1=", wantErr: true},
		{name: "empty compute zone", in: "=vol1", wantErr: true},
		{name: "compute zone twice", in: "az1=vol1,az1=vol2", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMapping(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error %v", err, c.wantErr)
			}
			if !c.wantErr && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name            string
		compute, volume []string
		mapping         Mapping
		topology        bool
		want            []Class
	}{
		{
			name:    "topology on: a class per shared zone, pinned to it",
			compute: []string{"b", "a"}, volume: []string{"a", "b"}, topology: true,
			want: []Class{{VolumeZone: "a", ComputeZones: []string{"a"}}, {VolumeZone: "b", ComputeZones: []string{"b"}}},
		},
		{
			name:    "topology on: a mapped pair of different names, and a volume zone no compute zone uses",
			compute: []string{"a", "az-b"}, volume: []string{"a", "vol-b", "unused"}, mapping: Mapping{"az-b": "vol-b"}, topology: true,
			want: []Class{{VolumeZone: "a", ComputeZones: []string{"a"}}, {VolumeZone: "vol-b", ComputeZones: []string{"az-b"}}},
		},
		{
			name:    "topology on: two compute zones mapped to one volume zone",
			compute: []string{"c2", "c1"}, volume: []string{"v"}, mapping: Mapping{"c1": "v", "c2": "v"}, topology: true,
			want: []Class{{VolumeZone: "v", ComputeZones: []string{"c1", "c2"}}},
		},
		{
			name:    "topology on: a mapping to a volume zone that does not exist gives no class",
			compute: []string{"a"}, volume: []string{"b"}, mapping: Mapping{"a": "gone"}, topology: true,
		},
		{
			name:    "topology off: every volume zone, unpinned",
			compute: []string{"a", "az-b"}, volume: []string{"vol-b", "a"}, mapping: Mapping{"az-b": "vol-b"},
			want: []Class{{VolumeZone: "a"}, {VolumeZone: "vol-b"}},
		},
		{name: "no zones listed", topology: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.compute, c.volume, c.mapping, c.topology)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestSplitZones(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{name: "empty", in: "", want: nil},
		{name: "only blanks and commas", in: " , ,", want: nil},
		{name: "trimmed, sorted, repeats dropped", in: "az2, az1 ,az2,,nova", want: []string{"az1", "az2", "nova"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := SplitZones(c.in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("SplitZones(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
