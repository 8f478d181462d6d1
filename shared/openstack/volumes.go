package openstack

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
)

// VolumeState is what Cinder says of one volume: what an administrator needs to see to unstick
// an attachment.
type VolumeState struct {
	// Found is false when Cinder has no volume of that ID.
	Found bool
	// Status is Cinder's status: available, reserved, attaching, in-use, detaching, error, ...
	Status string
	// Zone is the volume's availability zone.
	Zone string
	// Servers are the IDs of the servers Cinder has the volume attached to, sorted.
	Servers []string
}

// VolumeReader reads single volumes. Client implements it; tests use small fakes.
type VolumeReader interface {
	Volume(ctx context.Context, id string) (VolumeState, error)
	Close()
}

var _ VolumeReader = (*Client)(nil)

// Volume reads one volume (GET <volume>/volumes/{id}) within the client's timeout. A volume
// Cinder does not know is a VolumeState with Found false, not an error. Errors are *Error.
func (c *Client) Volume(ctx context.Context, id string) (VolumeState, error) {
	const op = "reading a volume"
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	v, err := volumes.Get(ctx, c.volume, id).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		observe("volume", "get_volume", start, nil)
		return VolumeState{}, nil
	}
	observe("volume", "get_volume", start, err)
	if err != nil {
		return VolumeState{}, newError(op, ReasonNone, err, c.secrets...)
	}
	st := VolumeState{Found: true, Status: v.Status, Zone: v.AvailabilityZone}
	for _, a := range v.Attachments {
		if a.ServerID != "" && !slices.Contains(st.Servers, a.ServerID) {
			st.Servers = append(st.Servers, a.ServerID)
		}
	}
	slices.Sort(st.Servers)
	return st, nil
}
