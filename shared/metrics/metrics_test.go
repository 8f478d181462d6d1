package metrics

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestNames(t *testing.T) {
	for _, c := range []prometheus.Collector{openStackRequests, openStackDuration, condition, stuckAttachments, nodesAtLimit, zones, topologyEnabled, lastListing, volumes} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestRecording(t *testing.T) {
	t.Run("When OpenStack calls succeed and fail, it should count each by outcome and time both", func(t *testing.T) {
		g := NewWithT(t)
		ObserveOpenStack("volume", "get_volume", OutcomeSuccess, 40*time.Millisecond)
		ObserveOpenStack("volume", "get_volume", "Timeout", 30*time.Second)
		g.Expect(testutil.ToFloat64(openStackRequests.WithLabelValues("volume", "get_volume", OutcomeSuccess))).To(BeNumerically(">=", 1))
		g.Expect(testutil.ToFloat64(openStackRequests.WithLabelValues("volume", "get_volume", "Timeout"))).To(BeNumerically(">=", 1))
		g.Expect(testutil.CollectAndCount(openStackDuration)).To(BeNumerically(">=", 1))
	})
	t.Run("When conditions are written, it should show 1 for True and 0 otherwise", func(t *testing.T) {
		g := NewWithT(t)
		SetConditions([]operatorv1.OperatorCondition{
			{Type: "OpenStackCinderVolumeAttachmentWarning", Status: operatorv1.ConditionTrue},
			{Type: "OpenStackCinderControllerDegraded", Status: operatorv1.ConditionFalse},
		})
		g.Expect(testutil.ToFloat64(condition.WithLabelValues("OpenStackCinderVolumeAttachmentWarning"))).To(Equal(1.0))
		g.Expect(testutil.ToFloat64(condition.WithLabelValues("OpenStackCinderControllerDegraded"))).To(Equal(0.0))
	})
	t.Run("When attachments are stuck and a listing succeeds, it should show them", func(t *testing.T) {
		g := NewWithT(t)
		SetAttachments(2, 1, 3)
		SetListing(2, 3, time.Unix(1700000000, 0))
		SetTopology(true)
		g.Expect(testutil.CollectAndCompare(stuckAttachments, strings.NewReader(`
# HELP cinder_csi_operator_stuck_volume_attachments VolumeAttachments of the driver attaching or detaching for longer than attachment_warning_after, by phase.
# TYPE cinder_csi_operator_stuck_volume_attachments gauge
cinder_csi_operator_stuck_volume_attachments{phase="attaching"} 2
cinder_csi_operator_stuck_volume_attachments{phase="detaching"} 1
`))).To(Succeed())
		g.Expect(testutil.ToFloat64(nodesAtLimit)).To(Equal(3.0))
		g.Expect(testutil.ToFloat64(zones.WithLabelValues("volume"))).To(Equal(3.0))
		g.Expect(testutil.ToFloat64(lastListing)).To(Equal(1700000000.0))
		g.Expect(testutil.ToFloat64(topologyEnabled)).To(Equal(1.0))
	})
}

func TestSetVolumes(t *testing.T) {
	g := NewWithT(t)
	SetVolumes(map[string]int{"az-1": 2, "az-2": 1, "": 1})
	SetVolumes(map[string]int{"az-1": 3})
	g.Expect(testutil.CollectAndCompare(volumes, strings.NewReader(`
# HELP cinder_csi_operator_volumes PersistentVolumes of the driver, by the availability zone their node affinity requires ("" for none; "other" for the zones past the first 32 in name order).
# TYPE cinder_csi_operator_volumes gauge
cinder_csi_operator_volumes{zone=""} 0
cinder_csi_operator_volumes{zone="az-1"} 3
cinder_csi_operator_volumes{zone="az-2"} 0
`))).To(Succeed(), "a zone once counted stays, at 0")

	// Zones that come and go leave at most MaxVolumeZones+1 series: those at 0 go first.
	for i := range 3 * MaxVolumeZones {
		SetVolumes(map[string]int{fmt.Sprintf("zone-%03d", i): 1, "az-1": 3})
		g.Expect(testutil.CollectAndCount(volumes)).To(BeNumerically("<=", MaxVolumeZones+1))
	}
	g.Expect(testutil.ToFloat64(volumes.WithLabelValues("az-1"))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(volumes.WithLabelValues(fmt.Sprintf("zone-%03d", 3*MaxVolumeZones-1)))).To(Equal(1.0))
}

// BenchmarkSeriesMemory reports the heap that every series the operator's own metrics can
// hold costs once all exist: each OpenStack call's outcomes (success and five failures, each
// service's operations), every condition type, the attachments, zones, topology and listing.
// It is an upper bound of what the metrics add to the operator's memory at rest, which
// holds only the series of the calls it made.
func BenchmarkSeriesMemory(b *testing.B) {
	calls := map[string][]string{"identity": {"authenticate"}, "compute": {"list_availability_zones"},
		"volume": {"list_availability_zones", "list_services", "get_volume"}}
	outcomes := []string{OutcomeSuccess, "Timeout", "Unreachable", "AuthenticationFailed", "PermissionDenied", "ServerError"}
	var conds []operatorv1.OperatorCondition
	for i := range 20 {
		conds = append(conds, operatorv1.OperatorCondition{Type: fmt.Sprintf("OpenStackCinderCondition%dDegraded", i)})
	}
	series := 0
	var used uint64
	for b.Loop() {
		reset()
		before := heap()
		series = 0
		for service, ops := range calls {
			for _, op := range ops {
				for _, outcome := range outcomes {
					ObserveOpenStack(service, op, outcome, time.Second)
					series++
				}
				series += 12 // the histogram's buckets, sum and count
			}
		}
		SetConditions(conds)
		SetAttachments(1, 1, 1)
		SetListing(2, 2, time.Now())
		SetTopology(true)
		// Volumes in three zones and without one.
		SetVolumes(map[string]int{"az-1": 3, "az-2": 2, "az-3": 1, "": 1})
		series += len(conds) + 3 + 2 + 2 + 4
		used = heap() - before
	}
	b.ReportMetric(float64(used), "B/all-series")
	b.ReportMetric(float64(series), "series")
}

// reset drops every series of the operator's metrics.
func reset() {
	for _, v := range []interface{ Reset() }{openStackRequests, openStackDuration, condition, stuckAttachments, zones, volumes} {
		v.Reset()
	}
	volumesMu.Lock()
	volumesSeen = map[string]bool{}
	volumesMu.Unlock()
}

// heap is the live heap after a collection.
func heap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLabelsNotSetByScrapes checks that no label of the operator's metrics is one that
// prometheus-operator's scrape configuration sets on every target: Prometheus would rename the
// metric's own to exported_<name>, and queries by it would group by the target's instead.
func TestLabelsNotSetByScrapes(t *testing.T) {
	g := NewWithT(t)
	ObserveOpenStack("volume", "get_volume", OutcomeSuccess, time.Millisecond)
	SetConditions([]operatorv1.OperatorCondition{{Type: "OpenStackCinderControllerAvailable"}})
	SetListing(1, 1, time.Now())
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	seen := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), Prefix) {
			continue
		}
		seen++
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				g.Expect(l.GetName()).NotTo(BeElementOf("namespace", "service", "pod", "job", "instance", "endpoint", "container"), f.GetName())
			}
		}
	}
	g.Expect(seen).To(BeNumerically(">=", 5))
}
