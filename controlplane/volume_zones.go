package controlplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// This file counts the driver's PersistentVolumes by the zone their node affinity requires, for
// the volumes gauge: from a watch of the guest's PersistentVolumes, so that the count costs no
// read at rest, through a cache that keeps of each volume only what the count needs.

// volumeZone returns the zone a PersistentVolume requires of its node through the driver's
// topology key ("" for none; the lowest of several), and whether the volume is the driver's.
func volumeZone(pv *corev1.PersistentVolume) (zone string, ours bool) {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != names.DriverName {
		return "", false
	}
	var zones []string
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for _, term := range na.Required.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key == names.TopologyKey && e.Operator == corev1.NodeSelectorOpIn {
					zones = append(zones, e.Values...)
				}
			}
		}
	}
	if len(zones) == 0 {
		return "", true
	}
	return slices.Min(zones), true
}

// volumeZoneOnly is the cache transform of the guest's PersistentVolumes: a volume of the driver
// keeps its name, its driver and the zone volumeZone finds; any other only its name. A cluster
// with many volumes then costs little memory. Any other object (a tombstone) passes unchanged.
func volumeZoneOnly(obj any) (any, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return obj, nil
	}
	out := &corev1.PersistentVolume{
		TypeMeta:   pv.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion},
	}
	zone, ours := volumeZone(pv)
	if !ours {
		return out, nil
	}
	out.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: names.DriverName}
	if zone != "" {
		out.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: names.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
			}}},
		}}
	}
	return out, nil
}

// volumeCache caches the guest's PersistentVolumes as volumeZoneOnly leaves them.
var volumeCache = cache.ByObject{Transform: volumeZoneOnly}

// volumeCounter keeps the count of the driver's PersistentVolumes by zone from the events of
// their informer, and records it in the volumes gauge after each. The informer is started by
// watch, once the operator may list and watch PersistentVolumes.
type volumeCounter struct {
	// gate starts the informer once the operator may list and watch PersistentVolumes.
	gate access.Gate
	// set records the counts (metrics.SetVolumes).
	set func(map[string]int)

	mu sync.Mutex
	// zoneOf is the zone of each of the driver's volumes, by name; count the volumes by zone,
	// only zones that have some.
	zoneOf map[string]string
	count  map[string]int
}

func newVolumeCounter() *volumeCounter {
	return &volumeCounter{set: metrics.SetVolumes, zoneOf: map[string]string{}, count: map[string]int{}}
}

// watch starts the PersistentVolume informer of c and counts from its events, unless it runs
// already. Where the operator may not list and watch PersistentVolumes it says so once and
// returns when to ask again; the gauge then has no series.
func (v *volumeCounter) watch(ctx context.Context, guest client.Client, c cache.Cache) (recheck time.Duration, err error) {
	may, err := v.gate.Open(ctx, guest, "", "", "persistentvolumes", func() error {
		// The informer starts at once on the started cache; the reconcile does not wait for
		// its first listing, whose events count the volumes as they come.
		inf, err := c.GetInformer(ctx, &corev1.PersistentVolume{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching PersistentVolumes: %w", err)
		}
		if _, err := inf.AddEventHandler(v); err != nil {
			return fmt.Errorf("counting PersistentVolumes: %w", err)
		}
		return nil
	}, "PersistentVolumes may not be listed and watched: the volumes gauge stays empty")
	if err != nil || may {
		return 0, err
	}
	return v.gate.Access.Recheck(), nil
}

// OnAdd, OnUpdate and OnDelete make volumeCounter the informer's event handler.
func (v *volumeCounter) OnAdd(obj any, _ bool) { v.update(obj, false) }

func (v *volumeCounter) OnUpdate(_, obj any) { v.update(obj, false) }

func (v *volumeCounter) OnDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	v.update(obj, true)
}

// update counts a PersistentVolume in the zone it now requires, or no longer once it is gone or
// not the driver's, and records the counts when they changed.
func (v *volumeCounter) update(obj any, gone bool) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	zone, ours := volumeZone(pv)
	ours = ours && !gone
	v.mu.Lock()
	defer v.mu.Unlock()
	old, had := v.zoneOf[pv.Name]
	if !had && !ours || had && ours && old == zone {
		return
	}
	if had {
		delete(v.zoneOf, pv.Name)
		if v.count[old]--; v.count[old] == 0 {
			delete(v.count, old)
		}
	}
	if ours {
		v.zoneOf[pv.Name] = zone
		v.count[zone]++
	}
	v.publishLocked()
}

// publishLocked records the counts: the zones in name order up to metrics.MaxVolumeZones keep
// their name, the volumes of the others are counted under metrics.OtherZones.
func (v *volumeCounter) publishLocked() {
	zones := slices.Sorted(maps.Keys(v.count))
	out := map[string]int{}
	for i, z := range zones {
		label := z
		if i >= metrics.MaxVolumeZones {
			label = metrics.OtherZones
		}
		out[label] += v.count[z]
	}
	v.set(out)
}
