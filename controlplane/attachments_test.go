package controlplane

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

var attachNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// va returns a VolumeAttachment of attacher for pv on node, created age before attachNow.
func va(name, attacher, node, pv string, age time.Duration, attached bool) storagev1.VolumeAttachment {
	return storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(attachNow.Add(-age))},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: attacher, NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)}},
		Status:     storagev1.VolumeAttachmentStatus{Attached: attached},
	}
}

func deleting(v storagev1.VolumeAttachment, age time.Duration) storagev1.VolumeAttachment {
	v.DeletionTimestamp = ptr.To(metav1.NewTime(attachNow.Add(-age)))
	return v
}

func TestFindStuck(t *testing.T) {
	const bound = 5 * time.Minute
	withError := va("csi-err", names.DriverName, "worker-1", "pv-e", 6*time.Minute, false)
	withError.Status.AttachError = &storagev1.VolumeError{Message: "rpc error: code = Internal desc = volume in use"}
	vas := []storagev1.VolumeAttachment{
		va("csi-young", names.DriverName, "worker-0", "pv-y", 2*time.Minute, false),
		va("csi-old", names.DriverName, "worker-0", "pv-o", 10*time.Minute, false),
		va("csi-attached", names.DriverName, "worker-0", "pv-a", time.Hour, true),
		va("other-driver", "other.csi.example", "worker-0", "pv-x", time.Hour, false),
		deleting(va("csi-detach", names.DriverName, "worker-1", "pv-d", time.Hour, true), 7*time.Minute),
		deleting(va("csi-detach-young", names.DriverName, "worker-1", "pv-dy", time.Hour, true), time.Minute),
		withError,
	}
	stuck, next := findStuck(vas, attachNow, bound)

	t.Run("When attachments of the driver pass the bound attaching or detaching, it should return them by name with their errors", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(stuck).To(HaveLen(3))
		g.Expect(stuck[0]).To(Equal(stuckAttachment{Name: "csi-detach", Node: "worker-1", PV: "pv-d", Phase: phaseDetaching, Since: attachNow.Add(-7 * time.Minute)}))
		g.Expect(stuck[1]).To(Equal(stuckAttachment{Name: "csi-err", Node: "worker-1", PV: "pv-e", Phase: phaseAttaching,
			Since: attachNow.Add(-6 * time.Minute), Error: "rpc error: code = Internal desc = volume in use"}))
		g.Expect(stuck[2].Name).To(Equal("csi-old"))
	})
	t.Run("When others are still within the bound, it should say when the first of them passes it", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(next).To(Equal(attachNow.Add(3*time.Minute)), "csi-young, created 2 minutes ago")
	})
	t.Run("When nothing is attaching or detaching, it should return nothing and no time", func(t *testing.T) {
		g := NewWithT(t)
		s, n := findStuck([]storagev1.VolumeAttachment{vas[2], vas[3]}, attachNow, bound)
		g.Expect(s).To(BeEmpty())
		g.Expect(n.IsZero()).To(BeTrue())
	})
}

func TestExplain(t *testing.T) {
	since := attachNow.Add(-6 * time.Minute)
	attaching := stuckAttachment{Name: "csi-1", Node: "worker-0", PV: "pv-1", Phase: phaseAttaching, Since: since}
	detaching := attaching
	detaching.Phase = phaseDetaching
	const vol, node, other = "vol-1", "srv-node", "srv-other"
	tests := []struct {
		name string
		s    stuckAttachment
		f    attachmentFacts
		want []string
	}{
		{"When Cinder has the volume in use on another server, it should say to detach it there", attaching,
			attachmentFacts{VolumeID: vol, Server: node, Cinder: &openstack.VolumeState{Found: true, Status: "in-use", Servers: []string{other}}},
			[]string{"csi-1 (volume vol-1, node worker-0) is stuck attaching: ", "Cinder has it in-use on server srv-other, not on the node's server srv-node",
				"openstack server remove volume srv-other vol-1"}},
		{"When Cinder has it attached to the node's server, it should point at the attacher", attaching,
			attachmentFacts{VolumeID: vol, Server: node, Cinder: &openstack.VolumeState{Found: true, Status: "in-use", Servers: []string{node}}},
			[]string{"Nova attached it but the attacher has not seen it"}},
		{"When Cinder has it available, it should point at the refusal and nova-compute", attaching,
			attachmentFacts{VolumeID: vol, Server: node, Cinder: &openstack.VolumeState{Found: true, Status: "available"}},
			[]string{"Cinder has it available: the attach was refused or never asked for", "nova-compute"}},
		{"When Cinder has it attaching, it should say the attach did not finish", attaching,
			attachmentFacts{VolumeID: vol, Server: node, Cinder: &openstack.VolumeState{Found: true, Status: "attaching"}},
			[]string{"Cinder has it attaching: the attach did not finish"}},
		{"When Cinder has no such volume, it should say it was deleted outside the cluster", attaching,
			attachmentFacts{VolumeID: vol, Cinder: &openstack.VolumeState{}},
			[]string{"Cinder has no such volume"}},
		{"When a detach hangs with the volume still on the node's server, it should say Nova has not detached it", detaching,
			attachmentFacts{VolumeID: vol, Server: node, Cinder: &openstack.VolumeState{Found: true, Status: "detaching", Servers: []string{node}}},
			[]string{"is stuck detaching", "Nova has not detached it", "openstack server remove volume srv-node vol-1"}},
		{"When a detach hangs with the volume detached in Cinder, it should point at the attacher", detaching,
			attachmentFacts{VolumeID: vol, Server: node, Cinder: &openstack.VolumeState{Found: true, Status: "available"}},
			[]string{"Cinder has it detached but the attacher has not finished"}},
		{"When Cinder could not be asked, it should say why", attaching,
			attachmentFacts{VolumeID: vol, CinderError: "OpenStack did not answer in time"},
			[]string{"Cinder could not be asked about the volume: OpenStack did not answer in time"}},
		{"When Cinder has not been asked yet, it should say it is being asked", attaching,
			attachmentFacts{VolumeID: vol}, []string{"Cinder is being asked"}},
		{"When the PersistentVolume is gone, it should name it", attaching, attachmentFacts{},
			[]string{"its PersistentVolume pv-1 is gone"}},
		{"When the attacher recorded an error, it should quote its start", stuckAttachment{Name: "csi-1", Node: "worker-0", Phase: phaseAttaching, Since: since,
			Error: "rpc error:\n code = Internal " + "desc = " + longText(300)},
			attachmentFacts{VolumeID: vol, Cinder: &openstack.VolumeState{Found: true, Status: "available"}},
			[]string{`The attacher's last error: "rpc error: code = Internal desc = xxxx`, `..."`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := explain(tt.s, tt.f)
			for _, w := range tt.want {
				g.Expect(got).To(ContainSubstring(w))
			}
			g.Expect(len(got)).To(BeNumerically("<", 600), "one attachment's sentence stays short")
		})
	}
}

func longText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func TestAttachmentWarning(t *testing.T) {
	const bound = 5 * time.Minute
	t.Run("When nothing is stuck, it should be off and name the bound", func(t *testing.T) {
		g := NewWithT(t)
		w := attachmentWarning(nil, nil, bound)
		g.Expect(w.On).To(BeFalse())
		g.Expect(w.Reason).To(Equal(names.ReasonAsExpected))
		g.Expect(w.Message).To(ContainSubstring("5m0s"))
	})
	t.Run("When more attachments are stuck than a message lists, it should count the rest", func(t *testing.T) {
		g := NewWithT(t)
		var stuck []stuckAttachment
		for i := range maxListed + 3 {
			stuck = append(stuck, stuckAttachment{Name: "csi-" + string(rune('a'+i)), Node: "worker-0", Phase: phaseAttaching, Since: attachNow})
		}
		w := attachmentWarning(stuck, map[string]attachmentFacts{}, bound)
		g.Expect(w.On).To(BeTrue())
		g.Expect(w.Reason).To(Equal(names.ReasonVolumeAttachmentsStuck))
		g.Expect(w.Message).To(HavePrefix("11 VolumeAttachments of cinder.csi.openstack.org have been attaching or detaching for 5m0s or more."))
		g.Expect(w.Message).To(HaveSuffix("And 3 more."))
	})
}

func TestNodesAtLimit(t *testing.T) {
	csiNode := func(name string, limit *int32) storagev1.CSINode {
		n := storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		d := storagev1.CSINodeDriver{Name: names.DriverName, NodeID: "srv-" + name}
		if limit != nil {
			d.Allocatable = &storagev1.VolumeNodeResources{Count: limit}
		}
		n.Spec.Drivers = []storagev1.CSINodeDriver{d}
		return n
	}
	nodes := []storagev1.CSINode{csiNode("worker-0", ptr.To[int32](2)), csiNode("worker-1", ptr.To[int32](2)), csiNode("worker-2", nil)}
	vas := []storagev1.VolumeAttachment{
		va("a", names.DriverName, "worker-0", "pv-a", time.Hour, true),
		va("b", names.DriverName, "worker-0", "pv-b", time.Second, false),
		va("c", names.DriverName, "worker-1", "pv-c", time.Hour, true),
		deleting(va("d", names.DriverName, "worker-1", "pv-d", time.Hour, true), time.Second),
		va("e", "other.csi.example", "worker-1", "pv-e", time.Hour, true),
		va("f", names.DriverName, "worker-2", "pv-f", time.Hour, true),
		va("g", names.DriverName, "worker-2", "pv-g", time.Hour, true),
		va("h", names.DriverName, "worker-2", "pv-h", time.Hour, true),
	}
	g := NewWithT(t)
	full := nodesAtLimit(vas, nodes)
	g.Expect(full).To(Equal([]nodeLoad{{Node: "worker-0", Volumes: 2, Limit: 2}}),
		"attaching ones count, detaching ones and other drivers' do not, and a node without a limit is never full")
	w := nodeAttachLimitWarning(full)
	g.Expect(w.On).To(BeTrue())
	g.Expect(w.Message).To(ContainSubstring("worker-0 (2 of 2)"))
	g.Expect(nodeAttachLimitWarning(nil).On).To(BeFalse())
}

// volumeReader is a Cinder that answers from volumes, or fails with err, counting its reads.
type volumeReader struct {
	volumes map[string]openstack.VolumeState
	err     error
	reads   int
}

func (v *volumeReader) Volume(_ context.Context, id string) (openstack.VolumeState, error) {
	v.reads++
	if v.err != nil {
		return openstack.VolumeState{}, v.err
	}
	return v.volumes[id], nil
}

func (v *volumeReader) Close() {}

func TestAttachmentReads(t *testing.T) {
	in := listingRequest{CloudsYAML: []byte("clouds: {}"), CloudName: "openstack"}
	monitor := func(r *volumeReader) *AttachmentMonitor {
		return &AttachmentMonitor{r: &Reconciler{Config: Config{OpenStackTimeout: time.Second}},
			newReader: func(context.Context, openstack.Config) (openstack.VolumeReader, error) { return r, nil }}
	}
	ids := map[string]string{"a": "vol-a", "b": "vol-b", "c": "vol-c"}

	t.Run("When Cinder answers, it should give each volume's state, a volume it does not know included", func(t *testing.T) {
		g := NewWithT(t)
		r := &volumeReader{volumes: map[string]openstack.VolumeState{"vol-a": {Found: true, Status: "in-use"}, "vol-b": {Found: true, Status: "available"}}}
		out := monitor(r).read(t.Context(), in, ids)
		g.Expect(out["a"].Cinder).To(Equal(&openstack.VolumeState{Found: true, Status: "in-use"}))
		g.Expect(out["c"].Cinder).To(Equal(&openstack.VolumeState{}))
		g.Expect(r.reads).To(Equal(3))
	})
	t.Run("When Cinder fails a read, it should give up the round with that reason for every volume, after one read", func(t *testing.T) {
		g := NewWithT(t)
		r := &volumeReader{err: &openstack.Error{Reason: openstack.ReasonTimeout, Op: "reading a volume"}}
		out := monitor(r).read(t.Context(), in, ids)
		g.Expect(r.reads).To(Equal(1))
		for _, k := range []string{"a", "b", "c"} {
			g.Expect(out[k].Cinder).To(BeNil())
			g.Expect(out[k].CinderError).NotTo(BeEmpty())
		}
	})
}
