package controlplane

import (
	"context"
	"errors"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/topology"
)

// failedDetectionRetry is how soon a failed detection is tried again (capped by the recheck
// interval): soon enough to pick up a recovered cloud quickly, slow enough not to hammer a
// struggling Keystone.
const failedDetectionRetry = time.Minute

// Topology decision sources, reported in logs and conditions.
const (
	sourceOverride  = "override"
	sourceDetected  = "detected"
	sourceLastKnown = "last-known"
	sourceDefault   = "default"
	sourcePending   = "pending"
)

// topologyDecision is what the driver gets as --with-topology, and why.
type topologyDecision struct {
	Enabled bool
	Source  string
	// OverrideFrom names the ConfigMap whose enable_topology overrides (sourceOverride).
	OverrideFrom string
	// Failure is the classified reason the last detection failed, empty when it succeeded or
	// was not needed; FailureMessage is its user-facing sentence (topology.Describe), which
	// names the proxy when the proxy failed.
	Failure        topology.Reason
	FailureMessage string
	// Zones are the zones the decision was made from, for logs.
	ComputeZones, VolumeZones []string
	// RecheckIn is when the zones should be listed again; zero when no detection is needed.
	RecheckIn time.Duration
}

// topologyCache remembers the last detection so that reconciles triggered by Kubernetes events do
// not call OpenStack each time: zones are listed again only when the credentials change or the
// recheck interval has passed. It is per reconciler, never a package global.
//
// Listing runs beside the reconcile, never inside it: a reconcile that finds a listing due starts
// one in the background and goes on with what the cache knows, so a credential rotation reaches
// the controller's pod template at once even when OpenStack hangs. A finished listing nudges the
// controller through events, and the reconcile it causes applies the new decision. Only the very
// first decision of an install, with no decision in force yet, is waited for, up to
// Config.FirstTopologyWait: so that a healthy cloud gets a fresh install rolled out once, with
// the right topology, and a hung one delays it by that bound at most.
type topologyCache struct {
	mu      sync.Mutex
	key     string
	checked time.Time
	// done is whether any listing has finished; ok whether one succeeded.
	done    bool
	ok      bool
	enabled bool
	failure topology.Reason
	message string
	compute []string
	volume  []string

	// running is the listing in progress, nil when none is.
	running *zoneListing
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

func newTopologyCache() *topologyCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &topologyCache{events: make(chan event.GenericEvent, 1), ctx: ctx, cancel: cancel}
}

// Start implements manager.Runnable: it only waits for the manager to stop, then ends the
// listings in progress and waits for them.
func (c *topologyCache) Start(ctx context.Context) error {
	<-ctx.Done()
	c.cancel()
	c.wg.Wait()
	return nil
}

// detectionInputs are what a detection depends on.
type detectionInputs struct {
	CloudsYAML []byte
	CloudName  string
	CAPEM      []byte
	// Proxy is what OpenStack is reached through: the cluster-wide Proxy in standalone mode,
	// the proxy of the operator's own environment on HyperShift. Empty connects directly.
	Proxy configv1.ProxyStatus
	// Decided is whether a decision is already in force (the live cloud-conf's): then there is
	// nothing to wait for.
	Decided bool
}

// key is everything a listing depends on, so that a change of any of them lists again at once:
// new credentials, or a proxy that now lets OpenStack through.
func (in detectionInputs) key() string {
	return confighash.Data(map[string]string{
		"clouds.yaml": string(in.CloudsYAML),
		"cloud":       in.CloudName,
		"ca":          string(in.CAPEM),
		"http-proxy":  in.Proxy.HTTPProxy,
		"https-proxy": in.Proxy.HTTPSProxy,
		"no-proxy":    in.Proxy.NoProxy,
	}, nil)
}

// detection returns what the zone listings said for in so far, starting a listing in the
// background when one is due: when the credentials changed, when the recheck interval passed
// since the last success, or a shorter retry since the last failure. It waits only for the first
// decision of an install (see topologyCache).
func (r *Reconciler) detection(ctx context.Context, in detectionInputs) Detection {
	c := r.topology
	c.mu.Lock()
	defer c.mu.Unlock()

	key := in.key()
	now := r.now()
	interval := r.Config.TopologyRecheckInterval
	retry := min(failedDetectionRetry, interval)
	due := key != c.key || c.checked.IsZero() ||
		(c.failure == "" && now.Sub(c.checked) >= interval) ||
		(c.failure != "" && now.Sub(c.checked) >= retry)
	if due {
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

	d := Detection{Failure: c.failure, FailureMessage: c.message, ComputeZones: c.compute, VolumeZones: c.volume, Pending: !c.done}
	if c.ok {
		d.Enabled = ptrTo(c.enabled)
	}
	next := interval
	if c.failure != "" || !c.done {
		next = retry
	}
	d.RecheckIn = max(c.checked.Add(next).Sub(now), time.Second)
	return d
}

// startListing lists the zones for in in the background, ending a listing for other inputs that
// is still running: its answer would be for credentials no longer in use. c.mu is held.
func (r *Reconciler) startListing(ctx context.Context, in detectionInputs, key string) {
	c := r.topology
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
		enabled, compute, volume, failure, message := r.detect(lctx, in)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.running != l {
			return // ended for newer inputs
		}
		c.running = nil
		c.done = true
		c.failure, c.message = failure, message
		if failure == "" {
			c.ok, c.enabled, c.compute, c.volume = true, enabled, compute, volume
		}
		if !c.awaited {
			c.nudge()
		}
	}()
}

// nudge makes the controller reconcile; one pending nudge is enough.
func (c *topologyCache) nudge() {
	select {
	case c.events <- event.GenericEvent{Object: &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}}:
	default:
	}
}

// detect lists the zones once, within the configured timeout, through the proxy the inputs name.
func (r *Reconciler) detect(ctx context.Context, in detectionInputs) (enabled bool, compute, volume []string, failure topology.Reason, message string) {
	ctx, cancel := context.WithTimeout(ctx, r.Config.OpenStackTimeout)
	defer cancel()
	proxy, err := topology.ProxyFunc(topology.ProxySettings{
		HTTPProxy: in.Proxy.HTTPProxy, HTTPSProxy: in.Proxy.HTTPSProxy, NoProxy: in.Proxy.NoProxy,
	})
	if err != nil {
		failure, message = detectionFailed(ctx, err)
		return false, nil, nil, failure, message
	}
	lister, err := r.Config.NewZoneLister(ctx, topology.Config{
		CloudsYAML: in.CloudsYAML,
		CloudName:  in.CloudName,
		CACertPEM:  in.CAPEM,
		Timeout:    r.Config.OpenStackTimeout,
		UserAgent:  "cinder-csi-operator",
		Proxy:      proxy,
	})
	if err != nil {
		failure, message = detectionFailed(ctx, err)
		return false, nil, nil, failure, message
	}
	// A client per detection, so rotated credentials are always the ones used; its idle
	// connections are released right after.
	if c, ok := lister.(interface{ Close() }); ok {
		defer c.Close()
	}
	d, err := topology.Detect(ctx, lister)
	if err != nil {
		failure, message = detectionFailed(ctx, err)
		return false, nil, nil, failure, message
	}
	return d.Enabled, d.ComputeZones, d.VolumeZones, "", ""
}

// detectionFailed logs why a detection failed, classifies the error and describes it. The
// condition gets only the reason's stable sentence (naming the proxy, for a proxy failure), so
// the log is the one place with the detail (which address, which TLS error); the topology
// package's errors are already scrubbed of the credentials.
func detectionFailed(ctx context.Context, err error) (topology.Reason, string) {
	reason := topology.Classify(err)
	log := ctrl.LoggerFrom(ctx)
	if errors.Is(ctx.Err(), context.Canceled) {
		// Ended on purpose: for newer credentials, or the manager is stopping. Its result is
		// dropped, so it is no failure.
		log.V(2).Info("Zone listing ended before OpenStack answered", "reason", reason)
	} else {
		log.Error(err, "Listing the OpenStack availability zones failed", "reason", reason)
	}
	return reason, topology.Describe(err)
}

// failureMessage is the user-facing sentence of the failure: the one detection described, else the
// reason's own.
func (d topologyDecision) failureMessage() string {
	if d.FailureMessage != "" {
		return d.FailureMessage
	}
	return topology.Message(d.Failure)
}
