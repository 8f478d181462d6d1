package realcloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	volservices "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// The services StopService and StartService take: the names of their supervised processes.
const (
	// ServiceKeystone is Keystone's uwsgi: while it is stopped nobody authenticates, and the
	// other services refuse every token they have not cached a validation of.
	ServiceKeystone = string(svcKeystone)
	// ServiceCinderAPI is Cinder's API: while it is stopped the public endpoint answers 502.
	ServiceCinderAPI = "cinder-api"
	// ServiceCinderBackup is Cinder's backup service: os-services calls it down once its last
	// heartbeat is older than service_down_time (cinderHeartbeat: 15 to 25 s after it stopped).
	ServiceCinderBackup = "cinder-backup"
	// ServiceNovaAPI is Nova's API and its metadata API: while it is stopped the public compute
	// endpoint answers 502, so no volume is attached or detached and no zone listed.
	ServiceNovaAPI = "nova-api"
)

// restartGrace is how long StopService gives a service to end after SIGTERM, as Stop does.
const restartGrace = 10 * time.Second

// StopService stops the service name (ServiceKeystone, ServiceCinderAPI, ServiceCinderBackup,
// ServiceNovaAPI)
// gracefully, as Stop does, and returns once its processes have ended; stopping a stopped
// service does nothing. StartService starts it again; Stop ends the cloud either way.
func (c *Cloud) StopService(name string) error {
	if c.serving(name) == nil {
		return fmt.Errorf("stopping %q: not a service StopService handles (%s, %s, %s, %s)", name,
			ServiceKeystone, ServiceCinderAPI, ServiceCinderBackup, ServiceNovaAPI)
	}
	c.svcMu.Lock()
	defer c.svcMu.Unlock()
	p, err := c.proc(name)
	if err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	if p.Exited() {
		return nil
	}
	start := time.Now()
	p.Stop(restartGrace)
	c.logf("Real OpenStack: %s stopped in %s", name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// StartService starts the service name again after StopService, with the same command,
// environment and log file (appended to), and returns once it serves: for the APIs, once their
// internal endpoint answers; for cinder-backup, once Cinder's os-services lists it up with a
// heartbeat of the new process. For a service that runs it only waits for that.
func (c *Cloud) StartService(ctx context.Context, name string) error {
	serving := c.serving(name)
	if serving == nil {
		return fmt.Errorf("starting %q: not a service StartService handles (%s, %s, %s, %s)", name,
			ServiceKeystone, ServiceCinderAPI, ServiceCinderBackup, ServiceNovaAPI)
	}
	c.svcMu.Lock()
	defer c.svcMu.Unlock()
	p, err := c.proc(name)
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	start := time.Now()
	// What cinder-backup's new heartbeat must be newer than, read while the old process's last
	// one is the newest there is.
	var before time.Time
	if p.Exited() {
		if name == ServiceCinderBackup {
			if s, err := c.backupService(ctx); err == nil {
				before = s.UpdatedAt
			}
		}
		if p, err = c.restart(name); err != nil {
			return err
		}
	}
	if err := serving(ctx, p, before); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.logf("Real OpenStack: %s serving again after %s", name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// restart starts an ended process of the cloud again, in its place in the list Stop works
// through, unless Stop has begun.
func (c *Cloud) restart(name string) (*procs.Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return nil, fmt.Errorf("starting %s: %w", name, errStopping)
	}
	i := slices.IndexFunc(c.procs, func(p *procs.Process) bool { return p.Name() == name })
	p, err := c.procs[i].Restart()
	if err != nil {
		return nil, fmt.Errorf("starting %s again: %w", name, err)
	}
	c.procs[i] = p
	return p, nil
}

// proc finds the process named name; restart keeps one per name.
func (c *Cloud) proc(name string) (*procs.Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return nil, errStopping
	}
	i := slices.IndexFunc(c.procs, func(p *procs.Process) bool { return p.Name() == name })
	if i < 0 {
		return nil, errors.New("the cloud runs no such process")
	}
	return c.procs[i], nil
}

// serving returns what StartService waits for once name runs, nil for a service it does not
// handle. before is the newest heartbeat of the process before, for cinder-backup.
func (c *Cloud) serving(name string) func(ctx context.Context, p *procs.Process, before time.Time) error {
	switch name {
	case ServiceKeystone:
		return func(ctx context.Context, p *procs.Process, _ time.Time) error {
			return c.waitHTTP(ctx, name, c.internalURL(c.ports.keystone)+"/", p)
		}
	case ServiceCinderAPI:
		return func(ctx context.Context, p *procs.Process, _ time.Time) error {
			return c.waitHTTP(ctx, name, c.internalURL(c.ports.cinder)+"/", p)
		}
	case ServiceCinderBackup:
		return c.waitBackupUp
	case ServiceNovaAPI:
		return func(ctx context.Context, p *procs.Process, _ time.Time) error {
			if err := c.waitHTTP(ctx, name, c.internalURL(c.ports.nova)+"/", p); err != nil {
				return err
			}
			return c.waitHTTP(ctx, "nova-api's metadata API", c.internalURL(c.ports.metadata)+"/", p)
		}
	}
	return nil
}

// waitBackupUp waits up to two minutes for os-services to list cinder-backup up with a heartbeat
// newer than the one before its restart: a service stopped for less than service_down_time is
// still listed up on its old process's last heartbeat.
func (c *Cloud) waitBackupUp(ctx context.Context, p *procs.Process, before time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	return procs.Poll(ctx, procs.Wait{What: "os-services to list cinder-backup up", Interval: time.Second, Log: p.LogPath(),
		Alive: func() error { return procs.FirstExit(p) }, Last: func() error { return last }},
		func() (bool, error) {
			s, err := c.backupService(ctx)
			switch {
			case err != nil:
				last = err
			case s.State != "up":
				last = fmt.Errorf("cinder-backup is %s (heartbeat %s)", s.State, s.UpdatedAt.Format(time.RFC3339Nano))
			case !s.UpdatedAt.After(before):
				last = fmt.Errorf("no heartbeat of the new process yet (the last at %s)", s.UpdatedAt.Format(time.RFC3339Nano))
			default:
				return true, nil
			}
			return false, nil
		})
}

// backupService is cinder-backup's entry in Cinder's os-services, as the admin sees it.
func (c *Cloud) backupService(ctx context.Context) (volservices.Service, error) {
	admin, err := c.adminClient(ctx)
	if err != nil {
		return volservices.Service{}, err
	}
	volume, err := openstack.NewBlockStorageV3(admin, gophercloud.EndpointOpts{Region: c.opts.Region})
	if err != nil {
		return volservices.Service{}, err
	}
	pages, err := volservices.List(volume, volservices.ListOpts{Binary: ServiceCinderBackup}).AllPages(ctx)
	if err != nil {
		return volservices.Service{}, fmt.Errorf("listing Cinder's services: %w", err)
	}
	list, err := volservices.ExtractServices(pages)
	if err != nil {
		return volservices.Service{}, fmt.Errorf("listing Cinder's services: %w", err)
	}
	for _, s := range list {
		if s.Host == volumeHost {
			return s, nil
		}
	}
	return volservices.Service{}, fmt.Errorf("os-services lists no cinder-backup on %s", volumeHost)
}

// apiError is an OpenStack API's refusal, told by the message in its answer's body.
type apiError struct {
	status  int
	message string
	err     error
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.message) }

func (e *apiError) Unwrap() error { return e.err }

// refusal returns err as an apiError when it is an API's answer whose body carries a message
// (Nova's and Cinder's {"badRequest": {"message": ...}}, Keystone's {"error": {...}}), so that an
// error says what the service said rather than quoting the whole request; err otherwise.
func refusal(err error) error {
	var unexpected gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &unexpected) {
		return err
	}
	var body map[string]struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(unexpected.Body, &body) != nil {
		return err
	}
	for _, v := range body {
		if v.Message != "" {
			return &apiError{status: unexpected.Actual, message: v.Message, err: err}
		}
	}
	return err
}
