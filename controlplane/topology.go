package controlplane

import (
	"context"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
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
)

// topologyDecision is what the driver gets as --with-topology, and why.
type topologyDecision struct {
	Enabled bool
	Source  string
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
type topologyCache struct {
	mu      sync.Mutex
	key     string
	checked time.Time
	ok      bool
	enabled bool
	failure topology.Reason
	message string
	compute []string
	volume  []string
}

func newTopologyCache() *topologyCache { return &topologyCache{} }

// detectionInputs are what a detection depends on.
type detectionInputs struct {
	CloudsYAML []byte
	CloudName  string
	CAPEM      []byte
	// Proxy is what OpenStack is reached through: the cluster-wide Proxy in standalone mode,
	// the proxy of the operator's own environment on HyperShift. Empty connects directly.
	Proxy configv1.ProxyStatus
}

// detection returns what the zone listing says for in, listing the zones again only when due: when
// the credentials changed, when the recheck interval passed since the last success, or a shorter
// retry since the last failure.
func (r *Reconciler) detection(ctx context.Context, in detectionInputs) Detection {
	c := r.topology
	c.mu.Lock()
	defer c.mu.Unlock()

	// Everything detection depends on, so that a change of any of them detects again at once:
	// new credentials, or a proxy that now lets OpenStack through.
	key := confighash.Data(map[string]string{
		"clouds.yaml": string(in.CloudsYAML),
		"cloud":       in.CloudName,
		"ca":          string(in.CAPEM),
		"http-proxy":  in.Proxy.HTTPProxy,
		"https-proxy": in.Proxy.HTTPSProxy,
		"no-proxy":    in.Proxy.NoProxy,
	}, nil)
	now := r.now()
	interval := r.Config.TopologyRecheckInterval
	retry := min(failedDetectionRetry, interval)
	due := key != c.key || c.checked.IsZero() ||
		(c.failure == "" && now.Sub(c.checked) >= interval) ||
		(c.failure != "" && now.Sub(c.checked) >= retry)

	if due {
		c.key, c.checked = key, now
		enabled, compute, volume, failure, message := r.detect(ctx, in)
		c.failure, c.message = failure, message
		if failure == "" {
			c.ok, c.enabled, c.compute, c.volume = true, enabled, compute, volume
		}
	}

	d := Detection{Failure: c.failure, FailureMessage: c.message, ComputeZones: c.compute, VolumeZones: c.volume}
	if c.ok {
		d.Enabled = ptrTo(c.enabled)
	}
	next := interval
	if c.failure != "" {
		next = retry
	}
	d.RecheckIn = max(c.checked.Add(next).Sub(now), time.Second)
	return d
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
	ctrl.LoggerFrom(ctx).Error(err, "Listing the OpenStack availability zones failed", "reason", reason)
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
