package openstack

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestEnabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		compute []string
		volume  []string
		want    bool
	}{
		{name: "When both services have the same single zone, it should enable topology",
			compute: []string{"nova"}, volume: []string{"nova"}, want: true},
		{name: "When both services have the same zones in a different order, it should enable topology",
			compute: []string{"az2", "az1", "az3"}, volume: []string{"az1", "az3", "az2"}, want: true},
		{name: "When the volume zones are a strict superset of the compute zones, it should enable topology",
			compute: []string{"az1"}, volume: []string{"az1", "az2"}, want: true},
		{name: "When a compute zone has no volume zone of the same name, it should disable topology",
			compute: []string{"az1", "az2"}, volume: []string{"az1"}, want: false},
		{name: "When the compute zones and the volume zone differ completely, it should disable topology",
			compute: []string{"az1", "az2", "az3"}, volume: []string{"nova"}, want: false},
		{name: "When there are more compute zones than volume zones only through duplicates, it should enable topology",
			compute: []string{"az1", "az1", "az1"}, volume: []string{"az1"}, want: true},
		{name: "When the compute zone list is empty, it should disable topology",
			compute: nil, volume: []string{"nova"}, want: false},
		{name: "When the compute zone list has only empty names, it should disable topology",
			compute: []string{""}, volume: []string{""}, want: false},
		{name: "When the volume zone list is empty, it should disable topology",
			compute: []string{"nova"}, volume: nil, want: false},
		{name: "When both lists are empty, it should disable topology",
			compute: nil, volume: nil, want: false},
		{name: "When names differ only in case, it should disable topology",
			compute: []string{"AZ1"}, volume: []string{"az1"}, want: false},
		{name: "When an empty compute name sits next to a matching one, it should ignore the empty name",
			compute: []string{"", "az1"}, volume: []string{"az1"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(TopologyEnabled(tt.compute, tt.volume)).To(Equal(tt.want))
		})
	}
}

// staticLister is a ZoneLister with canned answers.
type staticLister struct {
	compute, volume       []string
	computeErr, volumeErr error
}

func (l staticLister) ComputeZones(context.Context) ([]string, error) { return l.compute, l.computeErr }
func (l staticLister) VolumeZones(context.Context) ([]string, error)  { return l.volume, l.volumeErr }

func TestDetect(t *testing.T) {
	t.Parallel()
	listErr := &Error{Reason: ReasonTimeout, Op: "listing compute availability zones"}
	tests := []struct {
		name       string
		lister     staticLister
		want       TopologyDecision
		wantReason Reason
	}{
		{
			name:   "When the zones match, it should enable topology and report sorted, de-duplicated lists",
			lister: staticLister{compute: []string{"az2", "az1", "az1"}, volume: []string{"az1", "az2", "az3"}},
			want:   TopologyDecision{Enabled: true, ComputeZones: []string{"az1", "az2"}, VolumeZones: []string{"az1", "az2", "az3"}},
		},
		{
			name:   "When a compute zone has no volume zone, it should disable topology",
			lister: staticLister{compute: []string{"az1", "az2"}, volume: []string{"nova"}},
			want:   TopologyDecision{Enabled: false, ComputeZones: []string{"az1", "az2"}, VolumeZones: []string{"nova"}},
		},
		{
			name:       "When no compute zone is available, it should return NoAvailableZones and no decision",
			lister:     staticLister{compute: nil, volume: []string{"nova"}},
			want:       TopologyDecision{ComputeZones: []string{}, VolumeZones: []string{"nova"}},
			wantReason: ReasonNoAvailableZones,
		},
		{
			name:       "When no volume zone is available, it should return NoAvailableZones and no decision",
			lister:     staticLister{compute: []string{"nova"}, volume: []string{}},
			want:       TopologyDecision{ComputeZones: []string{"nova"}, VolumeZones: []string{}},
			wantReason: ReasonNoAvailableZones,
		},
		{
			name:       "When listing compute zones fails, it should return the classified error",
			lister:     staticLister{computeErr: listErr},
			wantReason: ReasonTimeout,
		},
		{
			name: "When listing volume zones fails, it should return the classified error",
			lister: staticLister{
				compute:   []string{"nova"},
				volumeErr: &Error{Reason: ReasonServerError, Op: "listing volume availability zones"},
			},
			wantReason: ReasonServerError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := DetectTopology(t.Context(), tt.lister)
			if tt.wantReason == ReasonNone {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(HaveOccurred())
				g.Expect(Classify(err)).To(Equal(tt.wantReason))
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}

	t.Run("When listing fails, it should keep the lister's error in the chain", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		_, err := DetectTopology(t.Context(), staticLister{computeErr: listErr})
		g.Expect(errors.Is(err, listErr)).To(BeTrue())
	})
}
