// Package metrics holds the operator's own Prometheus metrics, registered with controller-runtime's
// registry, which every manager's authenticated /metrics endpoint serves beside controller-runtime's
// (reconciles, work queues, clients) and Go's. Names start with cinder_csi_operator_ and end with
// their unit; every label takes a few fixed values, so that hundreds of operators (one per hosted
// cluster) cost Prometheus a bounded number of series each.
package metrics

import (
	"strconv"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prefix starts every name of the operator's own metrics.
const Prefix = "cinder_csi_operator_"

// OutcomeSuccess is the outcome of an OpenStack request that succeeded; a failed one's is its
// openstack.Reason.
const OutcomeSuccess = "success"

var (
	openStackRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Prefix + "openstack_requests_total",
		Help: "OpenStack calls the operator made (authentication, zone and service listings, volume reads), " +
			"by OpenStack service (identity, compute, volume), operation and outcome (success, or why it failed).",
	}, []string{"openstack_service", "operation", "outcome"})
	openStackDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    Prefix + "openstack_request_duration_seconds",
		Help:    "Time the operator's OpenStack calls took, failed ones included, by service and operation.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"openstack_service", "operation"})
	condition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: Prefix + "condition",
		Help: "1 while the ClusterCSIDriver condition the operator writes is True, 0 otherwise, by condition type.",
	}, []string{"condition"})
	stuckAttachments = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: Prefix + "stuck_volume_attachments",
		Help: "VolumeAttachments of the driver attaching or detaching for longer than attachment_warning_after, by phase.",
	}, []string{"phase"})
	nodesAtLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: Prefix + "nodes_at_attach_limit",
		Help: "Nodes whose volumes of the driver reach the attach limit their node plugin reports.",
	})
	zones = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: Prefix + "availability_zones",
		Help: "Available availability zones of the last successful listing, by OpenStack service (compute, volume).",
	}, []string{"openstack_service"})
	topologyEnabled = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: Prefix + "topology_enabled",
		Help: "1 while the driver runs with topology (--with-topology=true), 0 otherwise.",
	})
	volumes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: Prefix + "volumes",
		Help: "PersistentVolumes of the driver, by the availability zone their node affinity requires " +
			"(\"\" for none; \"" + OtherZones + "\" for the zones past the first " + strconv.Itoa(MaxVolumeZones) + " in name order).",
	}, []string{"zone"})
	lastListing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: Prefix + "openstack_last_successful_listing_timestamp_seconds",
		Help: "When the availability zones were last listed successfully, in seconds since the epoch; 0 before the first.",
	})
)

var (
	volumesMu sync.Mutex
	// volumesSeen are the zones the volumes gauge has a series of.
	volumesSeen = map[string]bool{}
)

func init() {
	ctrlmetrics.Registry.MustRegister(openStackRequests, openStackDuration, condition, stuckAttachments, nodesAtLimit,
		zones, topologyEnabled, lastListing, volumes)
	for _, phase := range []string{"attaching", "detaching"} {
		stuckAttachments.WithLabelValues(phase)
	}
}

// ObserveOpenStack records one OpenStack call: its service, operation, outcome and time.
func ObserveOpenStack(service, operation, outcome string, took time.Duration) {
	openStackRequests.WithLabelValues(service, operation, outcome).Inc()
	openStackDuration.WithLabelValues(service, operation).Observe(took.Seconds())
}

// SetConditions records the status of each condition in conds.
func SetConditions(conds []operatorv1.OperatorCondition) {
	for _, c := range conds {
		v := 0.0
		if c.Status == operatorv1.ConditionTrue {
			v = 1
		}
		condition.WithLabelValues(c.Type).Set(v)
	}
}

// SetAttachments records the stuck attachments by phase and the nodes at their attach limit.
func SetAttachments(attaching, detaching, fullNodes int) {
	stuckAttachments.WithLabelValues("attaching").Set(float64(attaching))
	stuckAttachments.WithLabelValues("detaching").Set(float64(detaching))
	nodesAtLimit.Set(float64(fullNodes))
}

// SetListing records a successful zone listing at when.
func SetListing(computeZones, volumeZones int, when time.Time) {
	zones.WithLabelValues("compute").Set(float64(computeZones))
	zones.WithLabelValues("volume").Set(float64(volumeZones))
	lastListing.Set(float64(when.UnixNano()) / 1e9)
}

// MaxVolumeZones bounds the zone label of the volumes gauge: a PersistentVolume may name any
// zone in its node affinity (a static one, written by hand), so past this many distinct zones the
// rest are counted under OtherZones.
const MaxVolumeZones = 32

// OtherZones is the zone label of the volumes in zones past MaxVolumeZones.
const OtherZones = "other"

// SetVolumes records the number of the driver's PersistentVolumes in each zone of byZone ("": no
// zone), which holds at most MaxVolumeZones zones and OtherZones. A zone that had volumes stays,
// at 0, so that a graph of it drops to zero rather than ending; but zones come and go (a static
// volume may name any), so past MaxVolumeZones+1 series those at 0 are dropped: the gauge never
// has more.
func SetVolumes(byZone map[string]int) {
	volumesMu.Lock()
	defer volumesMu.Unlock()
	for z, n := range byZone {
		volumesSeen[z] = true
		volumes.WithLabelValues(z).Set(float64(n))
	}
	for z := range volumesSeen {
		if _, ok := byZone[z]; ok {
			continue
		}
		if len(volumesSeen) > MaxVolumeZones+1 {
			volumes.DeleteLabelValues(z)
			delete(volumesSeen, z)
			continue
		}
		volumes.WithLabelValues(z).Set(0)
	}
}

// SetTopology records the topology decision in force.
func SetTopology(enabled bool) {
	v := 0.0
	if enabled {
		v = 1
	}
	topologyEnabled.Set(v)
}
