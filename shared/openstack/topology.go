package openstack

import (
	"context"
	"fmt"
	"slices"
)

// ZoneLister lists the names of the available availability zones of Nova and Cinder, sorted and
// de-duplicated: what DetectTopology needs of a Lister.
type ZoneLister interface {
	// ComputeZones lists Nova's available availability zones.
	ComputeZones(ctx context.Context) ([]string, error)
	// VolumeZones lists Cinder's available availability zones.
	VolumeZones(ctx context.Context) ([]string, error)
}

// TopologyEnabled reports whether topology should be enabled: iff every compute AZ name is also a
// volume AZ name. Both lists are expected to hold only available zones. Edge cases:
//
//   - No compute AZ (after ignoring empty names): false. There is nothing to match, and enabling
//     topology would make nodes register without a zone.
//   - More volume AZs than compute AZs: true if the compute AZs are among them; the extra volume
//     AZs are simply never requested.
//   - csi-operator also requires len(compute) <= len(volume). That follows from the subset test
//     once duplicates are ignored, and on raw lists with repeated compute names it would wrongly
//     disable topology, so it is not checked separately.
//   - Duplicates and order do not matter. Names compare exactly (case-sensitive), as Nova, Cinder
//     and the driver's topology key compare them.
//   - Empty names are ignored on both sides; neither API reports one for a real zone.
func TopologyEnabled(computeZones, volumeZones []string) bool {
	volume := make(map[string]struct{}, len(volumeZones))
	for _, z := range volumeZones {
		if z != "" {
			volume[z] = struct{}{}
		}
	}
	matched := 0
	for _, z := range computeZones {
		if z == "" {
			continue
		}
		if _, ok := volume[z]; !ok {
			return false
		}
		matched++
	}
	return matched > 0
}

// TopologyDecision is the outcome of one detection, with the zone lists it was made from so that
// logs and conditions can show why.
type TopologyDecision struct {
	// Enabled is the value for --with-topology.
	Enabled bool
	// ComputeZones are the available compute AZs, sorted and de-duplicated.
	ComputeZones []string
	// VolumeZones are the available volume AZs, sorted and de-duplicated.
	VolumeZones []string
}

// DetectTopology lists both services' zones and applies TopologyEnabled. If either list is empty it
// returns an
// *Error with ReasonNoAvailableZones, together with the lists, instead of a decision: Nova marks a
// zone unavailable when all of its compute services are down, so an empty list is usually a
// transient outage, and flipping topology off (or on) because of it would make the driver flap.
// Callers keep their last decision on any error.
func DetectTopology(ctx context.Context, lister ZoneLister) (TopologyDecision, error) {
	compute, err := lister.ComputeZones(ctx)
	if err != nil {
		return TopologyDecision{}, fmt.Errorf("detecting topology: %w", err)
	}
	volume, err := lister.VolumeZones(ctx)
	if err != nil {
		return TopologyDecision{}, fmt.Errorf("detecting topology: %w", err)
	}
	d := TopologyDecision{ComputeZones: normalise(compute), VolumeZones: normalise(volume)}
	if len(d.ComputeZones) == 0 || len(d.VolumeZones) == 0 {
		return d, &Error{
			Reason: ReasonNoAvailableZones,
			Op:     "detecting topology",
			detail: fmt.Sprintf("%d available compute and %d available volume availability zones",
				len(d.ComputeZones), len(d.VolumeZones)),
		}
	}
	d.Enabled = TopologyEnabled(d.ComputeZones, d.VolumeZones)
	return d, nil
}

// normalise returns the non-empty names sorted and de-duplicated, never nil.
func normalise(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
