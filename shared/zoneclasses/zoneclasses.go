// Package zoneclasses decides the StorageClasses pinned to one availability zone each. The
// decision goes from the manager that lists the zones (controlplane) to the one that applies the
// classes (guest) in the node copy of cloud-conf, which shared/nodeconf encodes.
//
// A class exists for every volume zone that a compute zone can use: the volume zone of the same
// name, or the one the user's zone mapping names for it. With topology on, the class's
// allowedTopologies pin it to those compute zones, so that a claim's pod lands where the volume
// can be attached; with topology off the driver reports no zones, and the class pins only the
// volume zone it creates volumes in (its availability parameter).
package zoneclasses

import (
	"fmt"
	"slices"
	"strings"
)

// ClassPrefix is the name of a per-zone class without its zone: standard-csi-<volume zone>.
const ClassPrefix = "standard-csi-"

// Class is one per-zone StorageClass.
type Class struct {
	// VolumeZone is the Cinder availability zone the class creates volumes in.
	VolumeZone string `json:"volumeZone"`
	// ComputeZones are the compute zones whose nodes may use the class, sorted; empty when
	// topology is off (then the class is not pinned to nodes).
	ComputeZones []string `json:"computeZones,omitempty"`
}

// Name returns the StorageClass name of c.
func (c Class) Name() string { return ClassPrefix + c.VolumeZone }

// Mapping maps a compute zone to the volume zone its nodes use when the names differ.
type Mapping map[string]string

// ParseMapping parses the user's zone_mapping value: compute=volume pairs separated by commas
// or newlines, blanks around names ignored. An empty value is an empty mapping. A pair without
// "=", an empty name or a compute zone named twice is an error that says which.
func ParseMapping(s string) (Mapping, error) {
	m := Mapping{}
	for _, field := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		compute, volume, ok := strings.Cut(field, "=")
		compute, volume = strings.TrimSpace(compute), strings.TrimSpace(volume)
		if !ok || compute == "" || volume == "" {
			return nil, fmt.Errorf("%q is not a compute=volume pair", field)
		}
		if _, dup := m[compute]; dup {
			return nil, fmt.Errorf("compute zone %q is mapped twice", compute)
		}
		m[compute] = volume
	}
	return m, nil
}

// Decide returns the per-zone classes, sorted by volume zone, for the listed compute and volume
// zones. A compute zone uses the volume zone the mapping names for it, else the volume zone of
// the same name; a volume zone no compute zone can use gets no class when topology is on. With
// topology off every volume zone gets a class, unpinned, since any node can attach a volume of
// any zone then (the decision topology detection made).
func Decide(computeZones, volumeZones []string, m Mapping, topology bool) []Class {
	volumes := map[string][]string{}
	for _, v := range volumeZones {
		volumes[v] = nil
	}
	var out []Class
	if !topology {
		for v := range volumes {
			out = append(out, Class{VolumeZone: v})
		}
	} else {
		for _, c := range computeZones {
			v := c
			if mapped, ok := m[c]; ok {
				v = mapped
			}
			if zones, ok := volumes[v]; ok && !slices.Contains(zones, c) {
				volumes[v] = append(zones, c)
			}
		}
		for v, zones := range volumes {
			if len(zones) == 0 {
				continue
			}
			slices.Sort(zones)
			out = append(out, Class{VolumeZone: v, ComputeZones: zones})
		}
	}
	slices.SortFunc(out, func(a, b Class) int { return strings.Compare(a.VolumeZone, b.VolumeZone) })
	return out
}

// SplitZones parses a comma-separated zone list, as the node copy records it (volume_zones,
// compute_zones) and render takes it: Zones of its items.
func SplitZones(s string) []string {
	return Zones(strings.Split(s, ","))
}

// Zones returns zones trimmed, sorted, without blanks or repeats: the form every recorded and
// compared zone list takes. nil when none is left.
func Zones(zones []string) []string {
	var out []string
	for _, z := range zones {
		if z = strings.TrimSpace(z); z != "" {
			out = append(out, z)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
