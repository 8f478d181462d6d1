package controlplane

import (
	"fmt"
	"slices"
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// This file judges the driver's VolumeAttachments, purely: which have been attaching or detaching
// for longer than the bound, what Cinder says of their volumes and what to do about each, and
// which nodes have as many volumes as their node plugin says they can attach. The monitor
// (attachment_monitor.go) gathers what it judges: the guest's objects from the caches, and
// Cinder's view of a stuck attachment's volume only while it is stuck.

// maxListed bounds the stuck attachments and the nodes one message names.
const maxListed = 8

// attachmentPhase is what a stuck VolumeAttachment has not finished.
type attachmentPhase string

const (
	phaseAttaching attachmentPhase = "attaching"
	phaseDetaching attachmentPhase = "detaching"
)

// stuckAttachment is one of the driver's VolumeAttachments that has been attaching or detaching
// for longer than the bound.
type stuckAttachment struct {
	// Name is the VolumeAttachment's; Node and PV are what it attaches where.
	Name, Node, PV string
	Phase          attachmentPhase
	// Since is when it began: its creation, or its deletion for a detach.
	Since time.Time
	// Error is the attacher's last error of this phase, as it recorded it ("" for none).
	Error string
}

// key identifies one stuck episode: a detach after an attach of the same VolumeAttachment is
// another one, and Cinder is asked again for it.
func (s stuckAttachment) key() string {
	return s.Name + "/" + string(s.Phase) + "/" + s.Since.UTC().Format(time.RFC3339)
}

// findStuck returns the driver's VolumeAttachments among vas that have been attaching or
// detaching for at least bound at now, sorted by name, and when the next of the others would
// pass the bound (zero when no other is attaching or detaching).
func findStuck(vas []storagev1.VolumeAttachment, now time.Time, bound time.Duration) ([]stuckAttachment, time.Time) {
	var stuck []stuckAttachment
	var next time.Time
	for i := range vas {
		va := &vas[i]
		if va.Spec.Attacher != names.DriverName {
			continue
		}
		s := stuckAttachment{Name: va.Name, Node: va.Spec.NodeName}
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			s.PV = *pv
		}
		switch {
		case va.DeletionTimestamp != nil:
			s.Phase, s.Since = phaseDetaching, va.DeletionTimestamp.Time
			if e := va.Status.DetachError; e != nil {
				s.Error = e.Message
			}
		case !va.Status.Attached:
			s.Phase, s.Since = phaseAttaching, va.CreationTimestamp.Time
			if e := va.Status.AttachError; e != nil {
				s.Error = e.Message
			}
		default:
			continue
		}
		due := s.Since.Add(bound)
		if !now.Before(due) {
			stuck = append(stuck, s)
		} else if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	slices.SortFunc(stuck, func(a, b stuckAttachment) int { return strings.Compare(a.Name, b.Name) })
	return stuck, next
}

// attachmentFacts is what is known of a stuck attachment beyond the VolumeAttachment.
type attachmentFacts struct {
	// VolumeID is the Cinder volume of its PV ("" when the PV is gone).
	VolumeID string
	// Server is the node's server, as the node plugin registered it ("" when unknown).
	Server string
	// Cinder is Cinder's view of the volume, nil until it was read; CinderError says why it
	// could not be read.
	Cinder      *openstack.VolumeState
	CinderError string
}

// explain says, in one sentence, what holds a stuck attachment and what to do. It holds no time,
// so that a condition's message changes only when what it explains does.
func explain(s stuckAttachment, f attachmentFacts) string {
	head := fmt.Sprintf("%s (node %s) is stuck %s", s.Name, s.Node, s.Phase)
	if f.VolumeID == "" {
		return head + fmt.Sprintf(": its PersistentVolume %s is gone or names no volume; delete the VolumeAttachment's pod", s.PV)
	}
	head = strings.Replace(head, " (node ", fmt.Sprintf(" (volume %s, node ", f.VolumeID), 1)
	var why string
	switch c := f.Cinder; {
	case f.CinderError != "":
		why = "Cinder could not be asked about the volume: " + f.CinderError
	case c == nil:
		why = "Cinder is being asked about the volume"
	case !c.Found:
		why = "Cinder has no such volume: it was deleted outside the cluster; delete the pod and the PersistentVolume"
	default:
		why = cinderAdvice(s, f, c)
	}
	if s.Error != "" {
		why += fmt.Sprintf(". The attacher's last error: %q", lastError(s.Error))
	}
	return head + ": " + why
}

// cinderAdvice says what to do from Cinder's view of the volume of a stuck attachment.
func cinderAdvice(s stuckAttachment, f attachmentFacts, c *openstack.VolumeState) string {
	onNode := f.Server != "" && slices.Contains(c.Servers, f.Server)
	others := slices.DeleteFunc(slices.Clone(c.Servers), func(id string) bool { return id == f.Server })
	nodeServer := "the node's server"
	if f.Server != "" {
		nodeServer = "the node's server " + f.Server
	}
	state := fmt.Sprintf("Cinder has it %s", c.Status)
	if len(c.Servers) > 0 {
		state += " on server " + strings.Join(c.Servers, ", ")
	}
	switch s.Phase {
	case phaseAttaching:
		switch {
		case len(others) > 0 && !onNode:
			return fmt.Sprintf("%s, not on %s: detach it from %s (openstack server remove volume %s %s) once nothing there uses it",
				state, nodeServer, others[0], others[0], f.VolumeID)
		case onNode:
			return fmt.Sprintf("%s, %s: Nova attached it but the attacher has not seen it; check the CSI controller's csi-attacher log", state, nodeServer)
		case c.Status == "available":
			return state + ": the attach was refused or never asked for; see the attacher's error, and check nova-compute on the node's host"
		default:
			return state + ": the attach did not finish; check nova-compute on the node's host and the volume's service in Cinder"
		}
	default:
		switch {
		case onNode:
			return fmt.Sprintf("%s, still %s: Nova has not detached it; check nova-compute and the instance, or detach it (openstack server remove volume %s %s) once the node no longer uses it",
				state, nodeServer, f.Server, f.VolumeID)
		case len(c.Servers) == 0:
			return state + ": Cinder has it detached but the attacher has not finished; check the CSI controller's csi-attacher log"
		default:
			return state + ": not on the node's server; check the CSI controller's csi-attacher log"
		}
	}
}

// lastError keeps the start of an attacher's error: its messages hold the gRPC chain of the
// driver, which can be long.
func lastError(msg string) string {
	const most = 200
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) <= most {
		return msg
	}
	return strings.ToValidUTF8(msg[:most], "") + "..."
}

// attachmentWarning is the VolumeAttachmentWarning's verdict on the stuck attachments, explained
// with what is known of each (facts by stuckAttachment.key).
func attachmentWarning(stuck []stuckAttachment, facts map[string]attachmentFacts, bound time.Duration) desired.Warning {
	w := desired.Warning{Type: names.ConditionVolumeAttachmentWarning}
	if len(stuck) == 0 {
		w.Reason = names.ReasonAsExpected
		w.Message = fmt.Sprintf("No volume of the driver has been attaching or detaching for %s or more.", bound)
		return w
	}
	lines := make([]string, 0, min(len(stuck), maxListed))
	for _, s := range stuck[:min(len(stuck), maxListed)] {
		lines = append(lines, explain(s, facts[s.key()])+".")
	}
	more := ""
	if len(stuck) > maxListed {
		more = fmt.Sprintf(" And %d more.", len(stuck)-maxListed)
	}
	w.On, w.Reason = true, names.ReasonVolumeAttachmentsStuck
	count := fmt.Sprintf("%d VolumeAttachments of %s have", len(stuck), names.DriverName)
	if len(stuck) == 1 {
		count = fmt.Sprintf("1 VolumeAttachment of %s has", names.DriverName)
	}
	w.Message = fmt.Sprintf("%s been attaching or detaching for %s or more. %s%s", count, bound, strings.Join(lines, " "), more)
	return w
}

// nodeLoad is a node's count of the driver's volumes against the attach limit its node plugin
// reported.
type nodeLoad struct {
	Node           string
	Volumes, Limit int
}

// nodesAtLimit returns the nodes whose VolumeAttachments of the driver (attached or attaching,
// not detaching) reach the attach limit of their CSINode, sorted by name. Nodes whose node plugin
// reports no limit are never at it.
func nodesAtLimit(vas []storagev1.VolumeAttachment, csiNodes []storagev1.CSINode) []nodeLoad {
	limits := map[string]int{}
	for _, n := range csiNodes {
		for _, d := range n.Spec.Drivers {
			if d.Name == names.DriverName && d.Allocatable != nil && d.Allocatable.Count != nil && *d.Allocatable.Count > 0 {
				limits[n.Name] = int(*d.Allocatable.Count)
			}
		}
	}
	counts := map[string]int{}
	for _, va := range vas {
		if va.Spec.Attacher == names.DriverName && va.DeletionTimestamp == nil {
			counts[va.Spec.NodeName]++
		}
	}
	var out []nodeLoad
	for node, limit := range limits {
		if counts[node] >= limit {
			out = append(out, nodeLoad{Node: node, Volumes: counts[node], Limit: limit})
		}
	}
	slices.SortFunc(out, func(a, b nodeLoad) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// nodeAttachLimitWarning is the NodeAttachLimitWarning's verdict on the nodes at their limit.
func nodeAttachLimitWarning(full []nodeLoad) desired.Warning {
	w := desired.Warning{Type: names.ConditionNodeAttachLimitWarning}
	if len(full) == 0 {
		w.Reason, w.Message = names.ReasonAsExpected, "No node has as many volumes of the driver as it can attach."
		return w
	}
	items := make([]string, 0, len(full))
	for _, n := range full {
		items = append(items, fmt.Sprintf("%s (%d of %d)", n.Node, n.Volumes, n.Limit))
	}
	w.On, w.Reason = true, names.ReasonNodesAtAttachLimit
	w.Message = fmt.Sprintf("Nodes with as many volumes of %s as their node plugin reports they can attach: %s. "+
		"A pod scheduled there with another volume stays Pending until one is detached: add nodes, or spread the pods with volumes.",
		names.DriverName, conditions.JoinSome(items, maxListed))
	return w
}
