package controlplane

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// firstRetry is how soon a failed listing is tried again the first time; each further failure
// doubles it, up to maxRetry (retryDelay).
const firstRetry = 2 * time.Second

// maxRetry caps the wait between listings while they fail, whatever the recheck interval, so
// that conditions clear within about maxRetry plus one listing after OpenStack answers again,
// however long the outage lasted. A listing every 30 s during an outage is a token and two GETs
// (three with backup_snapshot_class): no load for a Keystone that is coming back.
const maxRetry = 30 * time.Second

// retryDelay returns how long to wait before listing again after the given number of
// consecutive failed listings (none: a first listing still running): 2 s, then doubling up to
// maxRetry, and never more than interval. Listings that fail or find no usable backup service
// share the count, so the cap bounds the clearing of BackupWarning as well.
func retryDelay(failures int, interval time.Duration) time.Duration {
	limit := min(maxRetry, interval)
	d := firstRetry
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// listingCache remembers the last listing of the zones (the topology detection) and of the
// backup services, and keeps the OpenStack client they were made with, so that reconciles
// triggered by Kubernetes events do not call OpenStack each time: they are listed again only
// when the credentials change or the recheck interval has passed. It is per reconciler, never a package global.
//
// Listing runs beside the reconcile, never inside it: a reconcile that finds a listing due starts
// one in the background and goes on with what the cache knows, so a credential rotation reaches
// the controller's pod template at once even when OpenStack hangs. A finished listing nudges the
// controller through events, and the reconcile it causes applies the new decision. Only the very
// first decision of an install, with no decision in force yet, is waited for, up to
// Config.FirstTopologyWait: so that a healthy cloud gets a fresh install rolled out once, with
// the right topology, and a hung one delays it by that bound at most.
type listingCache struct {
	mu      sync.Mutex
	key     string
	checked time.Time
	// done is whether any listing has finished; ok whether one succeeded.
	done    bool
	ok      bool
	enabled bool
	failure openstack.Reason
	message string
	compute []string
	volume  []string
	// failures counts the listings that failed in a row, for retryDelay.
	failures int
	// backup is what the latest listings of the backup services said.
	backup desired.BackupDetection

	// running is the listing in progress, nil when none is.
	running *zoneListing
	// client is the OpenStack client of the last successful listing, for inputs of clientKey:
	// the next listing for the same inputs reuses it, and its token with it (it authenticates
	// again on a 401), instead of asking Keystone for a new token at every recheck. Its
	// connections are released after each listing (detect). A failed listing drops it, so that
	// a retry starts from a new token and a fresh catalog, and so do new inputs.
	client    openstack.Lister
	clientKey string
	// awaited is set while a reconcile waits for the first decision: the result then goes to
	// it, not through events.
	awaited bool
	// events nudges the controller when a listing finished.
	events chan event.GenericEvent
	// ctx ends every listing when the manager stops; wg counts the listings still running.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// zoneListing is one listing in the background.
type zoneListing struct {
	key    string
	done   chan struct{}
	cancel context.CancelFunc
}

func newListingCache() *listingCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &listingCache{events: make(chan event.GenericEvent, 1), ctx: ctx, cancel: cancel}
}

// Start implements manager.Runnable: it only waits for the manager to stop, then ends the
// listings in progress and waits for them.
func (c *listingCache) Start(ctx context.Context) error {
	<-ctx.Done()
	c.cancel()
	c.wg.Wait()
	return nil
}

// keptClient returns the client kept for inputs of key, nil when there is none.
func (c *listingCache) keptClient(key string) openstack.Lister {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clientKey != key {
		return nil
	}
	return c.client
}

// closeClient releases a client's idle connections, when it has any to release.
func closeClient(l openstack.Lister) {
	if c, ok := l.(interface{ Close() }); ok {
		c.Close()
	}
}

// listingRequest is what a listing of the zones (and of the backup services) is made with: the
// plan's desired.Listing, to which it converts.
type listingRequest struct {
	CloudsYAML []byte
	CloudName  string
	CAPEM      []byte
	// Proxy is what OpenStack is reached through: the cluster-wide Proxy in standalone mode,
	// the proxy of the operator's own environment on HyperShift. Empty connects directly.
	Proxy configv1.ProxyStatus
	// Decided is whether a decision is already in force (the live cloud-conf's, or the user's):
	// then there is nothing to wait for.
	Decided bool
	// Backup also lists Cinder's backup services, with the same client, for the backup class.
	Backup bool
}

// key is everything a listing depends on, so that a change of any of them lists again at once:
// new credentials, or a proxy that now lets OpenStack through.
func (in listingRequest) key() string {
	return confighash.Data(map[string]string{
		"clouds.yaml": string(in.CloudsYAML),
		"cloud":       in.CloudName,
		"ca":          string(in.CAPEM),
		"http-proxy":  in.Proxy.HTTPProxy,
		"https-proxy": in.Proxy.HTTPSProxy,
		"no-proxy":    in.Proxy.NoProxy,
		"backup":      strconv.FormatBool(in.Backup),
	}, nil)
}

// detectionFor returns what the zone listings said so far for the listing res asks for (see
// desired.Resolution.Listing), or nothing when its plan uses none.
func (r *Reconciler) detectionFor(ctx context.Context, res *desired.Resolution) desired.Detection {
	l, ok := res.Listing()
	if !ok {
		return desired.Detection{}
	}
	return r.detection(ctx, listingRequest(l))
}

// detection returns what the zone listings said for in so far, starting a listing in the
// background when one is due: when the credentials changed, when the recheck interval passed
// since the last success, or a shorter retry (retryDelay) since the last failure. It waits only
// for the first decision of an install (see listingCache).
func (r *Reconciler) detection(ctx context.Context, in listingRequest) desired.Detection {
	c := r.listings
	c.mu.Lock()
	defer c.mu.Unlock()

	key := in.key()
	now := r.now()
	interval := r.Config.TopologyRecheckInterval
	next := interval
	if c.failures > 0 || !c.done {
		next = retryDelay(c.failures, interval)
	}
	due := key != c.key || c.checked.IsZero() || now.Sub(c.checked) >= next
	if due {
		if key != c.key {
			// New credentials (or proxy) are no retry of the old ones' failures.
			c.failures = 0
		}
		c.key, c.checked = key, now
		r.startListing(ctx, in, key)
	}
	if !c.done && !in.Decided && c.running != nil && r.Config.FirstTopologyWait > 0 {
		running := c.running
		c.awaited = true
		c.mu.Unlock()
		wait := time.NewTimer(r.Config.FirstTopologyWait)
		select {
		case <-running.done:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
		c.mu.Lock()
		c.awaited = false
	}

	d := desired.Detection{Failure: c.failure, FailureMessage: c.message, ComputeZones: c.compute, VolumeZones: c.volume, Pending: !c.done}
	if c.ok {
		d.Enabled = ptr.To(c.enabled)
	}
	if in.Backup {
		d.Backup = c.backup
		d.Backup.Services = slices.Clone(c.backup.Services)
	}
	next = interval
	if c.failures > 0 || !c.done {
		next = retryDelay(c.failures, interval)
	}
	d.RecheckIn = max(c.checked.Add(next).Sub(now), time.Second)
	return d
}

// startListing lists the zones for in in the background, ending a listing for other inputs that
// is still running: its answer would be for credentials no longer in use. c.mu is held.
func (r *Reconciler) startListing(ctx context.Context, in listingRequest, key string) {
	c := r.listings
	if c.running != nil {
		if c.running.key == key {
			return
		}
		c.running.cancel()
	}
	lctx, cancel := context.WithCancel(ctrl.LoggerInto(c.ctx, ctrl.LoggerFrom(ctx)))
	l := &zoneListing{key: key, done: make(chan struct{}), cancel: cancel}
	c.running = l
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		defer close(l.done)
		res, client := r.detect(lctx, in, key)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.running != l {
			return // ended for newer inputs
		}
		c.running = nil
		c.done = true
		c.failure, c.message = res.failure, res.message
		if res.failure == "" {
			c.ok, c.enabled, c.compute, c.volume = true, res.enabled, res.compute, res.volume
		}
		c.backup = backupAfter(res.backup, c.backup)
		// A refused listing of the backup services is an answer (Cinder's policy), not an
		// outage: it does not shorten the next listing. No usable backup service does, as an
		// outage of the zones does, so that BackupWarning clears within seconds of one starting.
		failed := res.failure != "" || (res.backup.Failure != "" && res.backup.Failure != openstack.ReasonPermissionDenied)
		if failed || noneUsable(res.backup) {
			c.failures++
		} else {
			c.failures = 0
		}
		// The client of a successful listing serves the next one; a failed listing's is dropped.
		// Neither holds connections: detect released them.
		if failed {
			c.client, c.clientKey = nil, ""
		} else {
			c.client, c.clientKey = client, key
		}
		if !c.awaited {
			c.nudge()
		}
	}()
}

// nudge makes the controller reconcile; one pending nudge is enough.
func (c *listingCache) nudge() {
	select {
	case c.events <- event.GenericEvent{Object: &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}}:
	default:
	}
}

// listingResult is what one listing found.
type listingResult struct {
	enabled         bool
	compute, volume []string
	failure         openstack.Reason
	message         string
	// backup is the listing of the backup services; zero when not asked for.
	backup desired.BackupDetection
}

// failed returns a result in which the zones and, when asked for, the backup services failed
// for the same reason.
func failed(in listingRequest, failure openstack.Reason, message string) listingResult {
	res := listingResult{failure: failure, message: message}
	if in.Backup {
		res.backup = desired.BackupDetection{Failure: failure, FailureMessage: message}
	}
	return res
}

// noneUsable reports a successful listing that found no backup service up and enabled.
func noneUsable(b desired.BackupDetection) bool {
	return b.Listed && !slices.ContainsFunc(b.Services, func(s openstack.BackupService) bool { return s.Usable })
}

// backupAfter returns what the backup services are known to be after listing b, prev being what
// they were: a failed listing keeps the services of the last success.
func backupAfter(b, prev desired.BackupDetection) desired.BackupDetection {
	if b.Failure == "" {
		return b
	}
	prev.Failure, prev.FailureMessage = b.Failure, b.FailureMessage
	return prev
}

// detect lists the zones once, and the backup services when in asks for them, within the
// configured timeout, through the proxy the inputs name. It uses the client kept for inputs of
// key, or makes one; it returns the client it listed with (nil when none could be made), for
// startListing to keep or close.
func (r *Reconciler) detect(ctx context.Context, in listingRequest, key string) (listingResult, openstack.Lister) {
	ctx, cancel := context.WithTimeout(ctx, r.Config.OpenStackTimeout)
	defer cancel()
	lister := r.listings.keptClient(key)
	if lister == nil {
		made, res := r.newClient(ctx, in)
		if made == nil {
			return res, nil
		}
		lister = made
	}
	// The client is kept for its token, not its connections: every listing dials anew, so that
	// it proves the route as it is now (a proxy that has begun to refuse, a changed address)
	// rather than through a connection kept alive from an earlier listing.
	defer closeClient(lister)
	var res listingResult
	if d, err := openstack.DetectTopology(ctx, lister); err != nil {
		res.failure, res.message = detectionFailed(ctx, err)
	} else {
		res.enabled, res.compute, res.volume = d.Enabled, d.ComputeZones, d.VolumeZones
		metrics.SetListing(len(d.ComputeZones), len(d.VolumeZones), time.Now())
	}
	if in.Backup {
		res.backup = listBackupServices(ctx, lister)
	}
	return res, lister
}

// newClient authenticates to OpenStack with in's credentials, through the proxy in names. When
// it cannot, it returns nil and the failed result.
func (r *Reconciler) newClient(ctx context.Context, in listingRequest) (openstack.Lister, listingResult) {
	cfg, err := in.openStackConfig(r.Config.OpenStackTimeout)
	if err != nil {
		failure, message := detectionFailed(ctx, err)
		return nil, failed(in, failure, message)
	}
	lister, err := r.Config.NewLister(ctx, cfg)
	if err != nil {
		failure, message := detectionFailed(ctx, err)
		return nil, failed(in, failure, message)
	}
	return lister, listingResult{}
}

// openStackConfig is the client configuration of in: its credentials, CA and proxy, each call
// bounded by timeout.
func (in listingRequest) openStackConfig(timeout time.Duration) (openstack.Config, error) {
	proxy, err := openstack.ProxyFunc(openstack.ProxySettings{
		HTTPProxy: in.Proxy.HTTPProxy, HTTPSProxy: in.Proxy.HTTPSProxy, NoProxy: in.Proxy.NoProxy,
	})
	if err != nil {
		return openstack.Config{}, err
	}
	return openstack.Config{
		CloudsYAML: in.CloudsYAML,
		CloudName:  in.CloudName,
		CACertPEM:  in.CAPEM,
		Timeout:    timeout,
		UserAgent:  "cinder-csi-operator",
		Proxy:      proxy,
	}, nil
}

// listBackupServices lists Cinder's backup services with lister's client. A refusal by Cinder's
// policy is logged at V(2) only: it is the default for a project member, and the condition says
// it.
func listBackupServices(ctx context.Context, lister openstack.Lister) desired.BackupDetection {
	services, err := lister.BackupServices(ctx)
	if err == nil {
		return desired.BackupDetection{Listed: true, Services: services}
	}
	if openstack.Classify(err) == openstack.ReasonPermissionDenied {
		ctrl.LoggerFrom(ctx).V(2).Info("Cinder refused to list its services", "error", err.Error())
		return desired.BackupDetection{Failure: openstack.ReasonPermissionDenied, FailureMessage: openstack.Describe(err)}
	}
	failure, message := detectionFailed(ctx, err)
	return desired.BackupDetection{Failure: failure, FailureMessage: message}
}

// detectionFailed logs why a detection failed, classifies the error and describes it. The
// condition gets only the reason's stable sentence (naming the proxy, for a proxy failure), so
// the log is the one place with the detail (which address, which TLS error); the topology
// package's errors are already scrubbed of the credentials.
func detectionFailed(ctx context.Context, err error) (openstack.Reason, string) {
	reason := openstack.Classify(err)
	log := ctrl.LoggerFrom(ctx)
	if errors.Is(ctx.Err(), context.Canceled) {
		// Ended on purpose: for newer credentials, or the manager is stopping. Its result is
		// dropped, so it is no failure.
		log.V(2).Info("Zone listing ended before OpenStack answered", "reason", reason)
	} else {
		log.Error(err, "Listing the OpenStack availability zones failed", "reason", reason)
	}
	return reason, openstack.Describe(err)
}
