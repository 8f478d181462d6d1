package openstack

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"
)

// BackupBinary is the binary name Cinder lists its backup services under.
const BackupBinary = "cinder-backup"

// BackupService is one cinder-backup service as Cinder's os-services API lists it.
type BackupService struct {
	// Zone is the service's availability zone.
	Zone string
	// Usable is whether the service is up (state "up") and enabled (status "enabled"): only
	// then does Cinder schedule backups to it.
	Usable bool
}

// Lister is everything the operator lists: the zones of Nova and Cinder and Cinder's backup
// services, all with one authentication and the same timeouts. Client implements it; tests use
// small fakes.
//
// Cinder's default policy (volume_extension:services:index) lets administrators only list
// services: a project member gets a 403, which Classify reports as ReasonPermissionDenied.
type Lister interface {
	ZoneLister
	// BackupServices lists Cinder's backup services.
	BackupServices(ctx context.Context) ([]BackupService, error)
}

var _ Lister = (*Client)(nil)

// BackupServices lists the cinder-backup services (GET <volume>/os-services?binary=cinder-backup),
// sorted by zone, usable ones first. The binary is checked on the answer too, in case a Cinder
// ignores the filter. Errors are *Error.
func (c *Client) BackupServices(ctx context.Context) ([]BackupService, error) {
	const op = "listing the block-storage services"
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	page, err := services.List(c.volume, services.ListOpts{Binary: BackupBinary}).AllPages(ctx)
	observe("volume", "list_services", start, err)
	if err != nil {
		return nil, newError(op, ReasonNone, err, c.secrets...)
	}
	listed, err := services.ExtractServices(page)
	if err != nil {
		return nil, newError(op, ReasonUnexpectedResponse, err, c.secrets...)
	}
	return backupServices(listed), nil
}

// backupServices keeps the cinder-backup services of listed, sorted.
func backupServices(listed []services.Service) []BackupService {
	out := make([]BackupService, 0, len(listed))
	for _, s := range listed {
		if s.Binary != BackupBinary {
			continue
		}
		out = append(out, BackupService{
			Zone:   s.Zone,
			Usable: strings.EqualFold(s.State, "up") && strings.EqualFold(s.Status, "enabled"),
		})
	}
	slices.SortFunc(out, func(a, b BackupService) int {
		if c := strings.Compare(a.Zone, b.Zone); c != 0 {
			return c
		}
		switch {
		case a.Usable == b.Usable:
			return 0
		case a.Usable:
			return -1
		default:
			return 1
		}
	})
	return out
}
