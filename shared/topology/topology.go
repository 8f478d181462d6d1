// Package topology decides whether the Cinder CSI driver runs with --with-topology, from the
// availability zones that Nova and Cinder report, and holds the gophercloud v2 client that lists
// them.
//
// The rule is openshift/csi-operator's: topology is enabled iff every available compute AZ is also
// a volume AZ. When it does not hold, the node plugin would advertise a compute AZ that Cinder
// cannot create volumes in, and provisioning fails (kubernetes/cloud-provider-openstack#1735,
// #1300). Unlike csi-operator, which computes the decision once per process and degrades on any
// API error, callers here re-detect on an interval and keep the last decision when detection fails;
// Classify and Message turn every failure into a stable, secret-free condition reason and message.
package topology

import (
	"context"
	"fmt"
	"slices"
)

// ZoneLister lists the names of the available availability zones of Nova and Cinder, sorted and
// de-duplicated. Client implements it; tests use small fakes.
type ZoneLister interface {
	// ComputeZones lists Nova's available availability zones.
	ComputeZones(ctx context.Context) ([]string, error)
	// VolumeZones lists Cinder's available availability zones.
	VolumeZones(ctx context.Context) ([]string, error)
}

// Enabled reports whether topology should be enabled: iff every compute AZ name is also a volume AZ
// name. Both lists are expected to hold only available zones. Edge cases:
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
func Enabled(computeZones, volumeZones []string) bool {
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

// Decision is the outcome of one detection, with the zone lists it was made from so that logs and
// conditions can show why.
type Decision struct {
	// Enabled is the value for --with-topology.
	Enabled bool
	// ComputeZones are the available compute AZs, sorted and de-duplicated.
	ComputeZones []string
	// VolumeZones are the available volume AZs, sorted and de-duplicated.
	VolumeZones []string
}

// Detect lists both services' zones and applies Enabled. If either list is empty it returns an
// *Error with ReasonNoAvailableZones, together with the lists, instead of a decision: Nova marks a
// zone unavailable when all of its compute services are down, so an empty list is usually a
// transient outage, and flipping topology off (or on) because of it would make the driver flap.
// Callers keep their last decision on any error.
func Detect(ctx context.Context, lister ZoneLister) (Decision, error) {
	compute, err := lister.ComputeZones(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("detecting topology: %w", err)
	}
	volume, err := lister.VolumeZones(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("detecting topology: %w", err)
	}
	d := Decision{ComputeZones: normalise(compute), VolumeZones: normalise(volume)}
	if len(d.ComputeZones) == 0 || len(d.VolumeZones) == 0 {
		return d, &Error{
			Reason: ReasonNoAvailableZones,
			Op:     "detecting topology",
			detail: fmt.Sprintf("%d available compute and %d available volume availability zones",
				len(d.ComputeZones), len(d.VolumeZones)),
		}
	}
	d.Enabled = Enabled(d.ComputeZones, d.VolumeZones)
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
