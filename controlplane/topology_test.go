package controlplane

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/topology"
)

// fakeOpenStack stands in for Nova and Cinder: it serves zone lists or fails, and counts how often
// a client was built, which is once per detection.
type fakeOpenStack struct {
	mu sync.Mutex
	// compute and volume are the zones listed; clientErr, computeErr fail the step they name.
	compute, volume []string
	clientErr       error
	computeErr      error
	// detections counts NewZoneLister calls; configs records what each was given.
	detections int
	configs    []topology.Config
}

func (f *fakeOpenStack) newZoneLister(_ context.Context, cfg topology.Config) (topology.ZoneLister, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detections++
	f.configs = append(f.configs, cfg)
	if f.clientErr != nil {
		return nil, f.clientErr
	}
	return f, nil
}

// ComputeZones implements topology.ZoneLister.
func (f *fakeOpenStack) ComputeZones(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.compute, f.computeErr
}

// VolumeZones implements topology.ZoneLister.
func (f *fakeOpenStack) VolumeZones(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.volume, nil
}

// set changes what the fake serves.
func (f *fakeOpenStack) set(compute, volume []string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compute, f.volume, f.clientErr = compute, volume, err
}

func (f *fakeOpenStack) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.detections
}

// fakeClock is a settable time source for Reconciler.now.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)} }
func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// reconciler returns a Reconciler that detects through f and tells time by c.
func (c *fakeClock) reconciler(f *fakeOpenStack, interval time.Duration) *Reconciler {
	return &Reconciler{
		Config: Config{
			TopologyRecheckInterval: interval,
			OpenStackTimeout:        5 * time.Second,
			NewZoneLister:           f.newZoneLister,
		},
		topology: newTopologyCache(),
		now:      c.now,
	}
}

// decideInputs are the detection inputs of one set of credentials and the decision in the live
// cloud-conf.
type decideInputs struct {
	detectionInputs
	lastKnown *bool
}

// detectionCreds are the detection inputs of one set of credentials.
func detectionCreds(password string) decideInputs {
	return decideInputs{detectionInputs: detectionInputs{
		CloudsYAML: []byte("clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n      password: " + password + "\n"),
		CloudName:  "openstack",
		CAPEM:      []byte(testCA),
	}}
}

func withLastKnown(in decideInputs, v bool) decideInputs {
	in.lastKnown = &v
	return in
}

// decide is the reconciler's path from its inputs to a topology decision: a listing unless the
// user overrides, then chooseTopology.
func (r *Reconciler) decide(ctx context.Context, override *bool, in decideInputs) topologyDecision {
	var det Detection
	if override == nil {
		det = r.detection(ctx, in.detectionInputs)
	}
	return chooseTopology(override, det, in.lastKnown)
}

// errUnreachable is what dialling a Keystone that is down returns.
var errUnreachable error = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func TestDecide(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Minute
	matching := []string{"az1", "az2"}

	t.Run("When the user overrides topology, it should use the override without calling OpenStack", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		for _, override := range []bool{true, false} {
			d := r.decide(t.Context(), &override, withLastKnown(detectionCreds("a"), !override))
			g.Expect(d.Enabled).To(Equal(override))
			g.Expect(d.Source).To(Equal(sourceOverride))
			g.Expect(d.Failure).To(BeEmpty())
			g.Expect(d.RecheckIn).To(BeZero(), "an override needs no recheck")
		}
		g.Expect(cloud.count()).To(BeZero())
	})

	t.Run("When detecting, it should pass the credentials, cloud, CA and timeout to the OpenStack client", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		in := detectionCreds("a")
		r.decide(t.Context(), nil, in)
		g.Expect(cloud.configs).To(HaveLen(1))
		g.Expect(cloud.configs[0].CloudsYAML).To(Equal(in.CloudsYAML))
		g.Expect(cloud.configs[0].CloudName).To(Equal("openstack"))
		g.Expect(cloud.configs[0].CACertPEM).To(Equal(in.CAPEM))
		g.Expect(cloud.configs[0].Timeout).To(Equal(5 * time.Second))
	})

	t.Run("When every compute zone is a volume zone, it should enable topology and recheck after the interval", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: []string{"az2", "az1"}, volume: []string{"az1", "az2", "az3"}}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d).To(Equal(topologyDecision{
			Enabled: true, Source: sourceDetected,
			ComputeZones: []string{"az1", "az2"}, VolumeZones: []string{"az1", "az2", "az3"},
			RecheckIn: interval,
		}))
	})

	t.Run("When asked again within the recheck interval, it should reuse the detection", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))
		cloud.set([]string{"az1", "other"}, matching, nil)
		for _, step := range []time.Duration{time.Second, 4 * time.Minute, interval - 4*time.Minute - 2*time.Second} {
			c.advance(step)
			d := r.decide(t.Context(), nil, detectionCreds("a"))
			g.Expect(d.Enabled).To(BeTrue())
			g.Expect(d.Source).To(Equal(sourceDetected))
		}
		g.Expect(cloud.count()).To(Equal(1))
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d.RecheckIn).To(Equal(time.Second), "one second is left of the interval")
	})

	t.Run("When the recheck interval has passed, it should detect again and follow the zones", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		g.Expect(r.decide(t.Context(), nil, detectionCreds("a")).Enabled).To(BeTrue())
		cloud.set([]string{"az1", "other"}, matching, nil)
		c.advance(interval)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(2))
		g.Expect(d.Enabled).To(BeFalse())
		g.Expect(d.Source).To(Equal(sourceDetected))
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When the credentials change, it should detect again at once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))
		c.advance(time.Second)
		r.decide(t.Context(), nil, detectionCreds("b"))
		g.Expect(cloud.count()).To(Equal(2))

		in := detectionCreds("b")
		in.CloudName = "other"
		r.decide(t.Context(), nil, in)
		g.Expect(cloud.count()).To(Equal(3), "a different cloud name is a different detection")
		in.CAPEM = nil
		r.decide(t.Context(), nil, in)
		g.Expect(cloud.count()).To(Equal(4), "a different CA is a different detection")
		r.decide(t.Context(), nil, withLastKnown(in, true))
		g.Expect(cloud.count()).To(Equal(4), "the last known decision is not part of what is detected")
	})

	t.Run("When detection fails and cloud-conf holds a decision, it should keep that decision and be degraded", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, withLastKnown(detectionCreds("a"), true))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.Source).To(Equal(sourceLastKnown))
		g.Expect(d.Failure).To(Equal(topology.ReasonUnreachable))
		g.Expect(d.RecheckIn).To(Equal(time.Minute))
	})

	t.Run("When detection fails after a success, it should prefer cloud-conf's decision over the last success", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		g.Expect(r.decide(t.Context(), nil, detectionCreds("a")).Enabled).To(BeTrue())

		cloud.set(nil, nil, errUnreachable)
		c.advance(interval)
		d := r.decide(t.Context(), nil, withLastKnown(detectionCreds("a"), false))
		g.Expect(d.Enabled).To(BeFalse())
		g.Expect(d.Source).To(Equal(sourceLastKnown))
		g.Expect(d.Failure).To(Equal(topology.ReasonUnreachable))
	})

	t.Run("When detection fails after a success and cloud-conf holds no decision, it should keep the last success", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))

		cloud.set(nil, nil, errUnreachable)
		c.advance(interval)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(2))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.Source).To(Equal(sourceLastKnown))
		g.Expect(d.Failure).To(Equal(topology.ReasonUnreachable))
	})

	t.Run("When detection fails with no decision anywhere, it should disable topology", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, computeErr: context.DeadlineExceeded, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d.Enabled).To(BeFalse())
		g.Expect(d.Source).To(Equal(sourceDefault))
		g.Expect(d.Failure).To(Equal(topology.ReasonTimeout))
	})

	t.Run("When OpenStack reports no available zone, it should treat it as a failure, not as a decision", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: []string{}}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, withLastKnown(detectionCreds("a"), true))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.Source).To(Equal(sourceLastKnown))
		g.Expect(d.Failure).To(Equal(topology.ReasonNoAvailableZones))
	})

	t.Run("When detection failed, it should retry after a minute and recover", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))

		c.advance(59 * time.Second)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(1), "no retry before a minute")
		g.Expect(d.RecheckIn).To(Equal(time.Second))

		cloud.set(matching, matching, nil)
		c.advance(time.Second)
		d = r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(2))
		g.Expect(d.Failure).To(BeEmpty())
		g.Expect(d.Source).To(Equal(sourceDetected))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When the recheck interval is shorter than a minute, it should retry a failure after the interval", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		c := newFakeClock()
		r := c.reconciler(cloud, 20*time.Second)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d.RecheckIn).To(Equal(20 * time.Second))
		c.advance(19 * time.Second)
		r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(1))
		c.advance(time.Second)
		r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(2))
	})
}

// proxied returns in with a proxy set.
func proxied(in decideInputs, p configv1.ProxyStatus) decideInputs {
	in.Proxy = p
	return in
}

// lastProxy returns the proxy the last detection's client would use for u, or "" for direct.
func (f *fakeOpenStack) lastProxy(ctx context.Context, g Gomega, u string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	g.Expect(f.configs).NotTo(BeEmpty())
	proxy := f.configs[len(f.configs)-1].Proxy
	if proxy == nil {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := proxy(req)
	g.Expect(err).NotTo(HaveOccurred())
	if p == nil {
		return ""
	}
	return p.String()
}

func TestDecideProxy(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Minute
	matching := []string{"az1", "az2"}
	const keystone = "https://keystone.example:5000/v3"
	proxy := configv1.ProxyStatus{
		HTTPProxy:  "http://proxy.example.com:3128",
		HTTPSProxy: "http://user:pa55@proxy.example.com:3129",
		NoProxy:    ".cluster.local,.svc",
	}

	t.Run("When a proxy is set, it should list the zones through it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, proxied(detectionCreds("a"), proxy))
		g.Expect(d.Source).To(Equal(sourceDetected))
		g.Expect(cloud.lastProxy(t.Context(), g, keystone)).To(Equal(proxy.HTTPSProxy))
		g.Expect(cloud.lastProxy(t.Context(), g, "http://keystone.example:5000/v3")).To(Equal(proxy.HTTPProxy))
	})

	t.Run("When noProxy names the OpenStack host, it should list the zones directly", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		p := proxy
		p.NoProxy += ",keystone.example"
		r.decide(t.Context(), nil, proxied(detectionCreds("a"), p))
		g.Expect(cloud.lastProxy(t.Context(), g, keystone)).To(BeEmpty())
	})

	t.Run("When no proxy is set, it should connect directly", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.lastProxy(t.Context(), g, keystone)).To(BeEmpty())
	})

	t.Run("When the proxy changes, it should detect again at once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))
		steps := []configv1.ProxyStatus{
			{HTTPSProxy: proxy.HTTPSProxy},
			{HTTPSProxy: proxy.HTTPSProxy, NoProxy: ".example"},
			{HTTPSProxy: proxy.HTTPSProxy, NoProxy: ".example", HTTPProxy: proxy.HTTPProxy},
			{},
		}
		for i, p := range steps {
			c.advance(time.Second)
			r.decide(t.Context(), nil, proxied(detectionCreds("a"), p))
			g.Expect(cloud.count()).To(Equal(i+2), "proxy %+v", p)
		}
		r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(len(steps)+1), "an unchanged proxy is the same detection")
	})

	t.Run("When the proxy setting is not a URL, it should fail with InvalidProxy without calling OpenStack", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, withLastKnown(proxied(detectionCreds("a"), configv1.ProxyStatus{HTTPSProxy: "ftp://user:s3cret@proxy.example.com"}), true))
		g.Expect(cloud.count()).To(BeZero())
		g.Expect(d.Failure).To(Equal(topology.ReasonInvalidProxy))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.Source).To(Equal(sourceLastKnown))
		g.Expect(d.FailureMessage).To(Equal(topology.Message(topology.ReasonInvalidProxy)))
		g.Expect(d.FailureMessage).NotTo(ContainSubstring("s3cret"))
	})

	t.Run("When the proxy refuses, it should name the proxy in the condition, then clear it once the proxy lets OpenStack through", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: &topology.ProxyError{Proxy: "proxy.example.com:3129", StatusCode: http.StatusForbidden}}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, proxied(detectionCreds("a"), proxy))
		g.Expect(d.Failure).To(Equal(topology.ReasonProxyFailure))
		s := testutil.NewSet(c.now())
		setTopologyCondition(s, d)
		cond := testutil.Conditions(s)[names.ConditionTopologyDegraded]
		g.Expect(cond.Status).To(Equal(operatorv1.ConditionTrue))
		g.Expect(cond.Reason).To(Equal(names.ReasonOpenStackUnavailable))
		g.Expect(cond.Message).To(HavePrefix("Listing the OpenStack availability zones failed: The HTTP proxy proxy.example.com:3129 refused"))
		g.Expect(cond.Message).To(ContainSubstring("403 Forbidden"))
		g.Expect(cond.Message).To(HaveSuffix(". Topology stays disabled (no decision could be made yet); the operator retries."))
		g.Expect(cond.Message).NotTo(ContainSubstring("pa55"))

		// Until the retry, the cached failure keeps its message.
		c.advance(time.Second)
		g.Expect(r.decide(t.Context(), nil, proxied(detectionCreds("a"), proxy)).FailureMessage).To(Equal(d.FailureMessage))

		cloud.set(matching, matching, nil)
		c.advance(failedDetectionRetry)
		d = r.decide(t.Context(), nil, proxied(detectionCreds("a"), proxy))
		g.Expect(d.Failure).To(BeEmpty())
		g.Expect(d.FailureMessage).To(BeEmpty())
	})
}
