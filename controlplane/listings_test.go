package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

// fakeOpenStack stands in for Nova and Cinder: it serves zone lists or fails, and counts how often
// a client was built, which is once per detection.
type fakeOpenStack struct {
	mu sync.Mutex
	// compute and volume are the zones listed; clientErr, computeErr fail the step they name.
	compute, volume []string
	clientErr       error
	computeErr      error
	// gate, when set, holds every compute listing until it is closed or the listing's context
	// ends (a hanging Nova); ended counts the listings whose context ended first.
	gate  chan struct{}
	ended int
	// detections counts the listings tried: the compute listings and the clients that could not
	// be made. clients counts NewLister calls; configs records what each was given.
	detections int
	clients    int
	configs    []openstack.Config
	// closed counts the clients closed.
	closed int
	// backup and backupErr are Cinder's backup services, or why listing them fails;
	// backupLists counts the listings.
	backup      []openstack.BackupService
	backupErr   error
	backupLists int
}

// BackupServices implements openstack.Lister.
func (f *fakeOpenStack) BackupServices(context.Context) ([]openstack.BackupService, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backupLists++
	return f.backup, f.backupErr
}

func (f *fakeOpenStack) newLister(_ context.Context, cfg openstack.Config) (openstack.Lister, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients++
	f.configs = append(f.configs, cfg)
	if f.clientErr != nil {
		f.detections++
		return nil, f.clientErr
	}
	return &fakeClient{f}, nil
}

// fakeClient is one client of the fake cloud: it lists what the cloud serves, and counts its
// Close.
type fakeClient struct{ *fakeOpenStack }

// Close implements the client's release of its idle connections.
func (c *fakeClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed++
}

// ComputeZones implements openstack.Lister. A cloud that cannot be reached (clientErr) fails
// a client made before as it fails a new one.
func (f *fakeOpenStack) ComputeZones(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	f.detections++
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			f.mu.Lock()
			f.ended++
			f.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clientErr != nil {
		return nil, f.clientErr
	}
	return f.compute, f.computeErr
}

// hang makes every compute listing from now on wait until the returned function is called.
func (f *fakeOpenStack) hang() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate := make(chan struct{})
	f.gate = gate
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gate == gate {
			f.gate = nil
		}
		close(gate)
	}
}

func (f *fakeOpenStack) endedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// VolumeZones implements openstack.Lister.
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
			NewLister:               f.newLister,
		},
		Decoder:  manifests.NewDecoder(scheme),
		listings: newListingCache(),
		now:      c.now,
	}
}

// scheme is the managers' scheme, for the decoder of the reconcilers the tests make.
var scheme = func() *runtime.Scheme {
	s, err := clusters.NewScheme()
	if err != nil {
		panic(err)
	}
	return s
}()

// decideInputs are the listing request of one set of credentials and the decision in the live
// cloud-conf.
type decideInputs struct {
	listingRequest
	lastKnown *bool
}

// detectionCreds is the listing request of one set of credentials, of cloud openstack in a
// clouds.yaml that also has a cloud named other.
func detectionCreds(password string) decideInputs {
	cloud := "    auth:\n      auth_url: https://keystone.example:5000\n      password: " + password + "\n"
	return decideInputs{listingRequest: listingRequest{
		CloudsYAML: []byte("clouds:\n  openstack:\n" + cloud + "  other:\n" + cloud),
		CloudName:  "openstack",
		CAPEM:      []byte(testutil.CA),
	}}
}

func withLastKnown(in decideInputs, v bool) decideInputs {
	in.lastKnown = &v
	return in
}

// decide takes the reconcile's steps from the input of a hosted cluster with in's credentials,
// proxy and live decision and the user's override, to its plan's topology decision: Resolve,
// detectionFor (a listing unless the override makes none needed), then the plan. A listing it
// starts runs to its end before the plan is made, as the reconcile its end causes would make it.
func (r *Reconciler) decide(ctx context.Context, override *bool, in decideInputs) desired.TopologyDecision {
	res := desired.Resolve(in.input(override))
	r.detectionFor(ctx, res)
	r.listings.waitIdle()
	p, err := res.Plan(r.Decoder, r.detectionFor(ctx, res))
	if err != nil {
		panic(fmt.Sprintf("planning the test's input: %v", err))
	}
	if len(p.Problems) > 0 {
		panic(fmt.Sprintf("the test's input is not valid: %v", p.ProblemMessages()))
	}
	return p.Topology
}

// input is the Input of a hosted cluster whose resolution asks for in's listing: its credentials
// and CA in the credentials Secret, its proxy the operator's own, its backup class and the
// user's override in cinder-csi-config, and its last known decision in the live cloud-conf.
func (in decideInputs) input(override *bool) desired.Input {
	user := map[string]string{names.KeyBackupSnapshotClass: strconv.FormatBool(in.Backup)}
	if override != nil {
		user[names.KeyEnableTopology] = strconv.FormatBool(*override)
	}
	i := desired.Input{
		Config: desired.Config{HyperShift: true, Namespace: "clusters-example", Proxy: in.Proxy, Images: operandimages.Controller{
			Driver: "driver", Provisioner: "provisioner", Attacher: "attacher", Resizer: "resizer", Snapshotter: "snapshotter",
			LivenessProbe: "livenessprobe", KubeRBACProxy: "kube-rbac-proxy",
		}},
		Driver: &operatorv1.ClusterCSIDriver{Spec: operatorv1.ClusterCSIDriverSpec{OperatorSpec: operatorv1.OperatorSpec{ManagementState: operatorv1.Managed}}},
		HCP: &hyperv1.HostedControlPlane{Spec: hyperv1.HostedControlPlaneSpec{InfraID: "example", Platform: hyperv1.PlatformSpec{
			OpenStack: &hyperv1.OpenStackPlatformSpec{IdentityRef: hyperv1.OpenStackIdentityReference{CloudName: in.CloudName}},
		}}},
		Credentials: &corev1.Secret{Data: map[string][]byte{
			names.KeyCloudsYAML: in.CloudsYAML, names.KeyCACert: in.CAPEM,
		}},
		UserConfig: &corev1.ConfigMap{Data: user},
	}
	if in.lastKnown != nil {
		i.CloudConf = &corev1.ConfigMap{Data: map[string]string{nodeconf.KeyEnableTopology: strconv.FormatBool(*in.lastKnown)}}
	}
	return i
}

// waitIdle waits for the listing in progress, if any, to end.
func (c *listingCache) waitIdle() {
	c.mu.Lock()
	l := c.running
	c.mu.Unlock()
	if l != nil {
		<-l.done
	}
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
			g.Expect(d.Source).To(Equal(desired.SourceOverride))
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
		g.Expect(d).To(Equal(desired.TopologyDecision{
			Enabled: true, Source: desired.SourceDetected,
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
			g.Expect(d.Source).To(Equal(desired.SourceDetected))
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
		g.Expect(d.Source).To(Equal(desired.SourceDetected))
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When listing again for the same inputs, it should reuse the client, and make a new one after new credentials or a failure", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		count := func() (clients, closed int) {
			cloud.mu.Lock()
			defer cloud.mu.Unlock()
			return cloud.clients, cloud.closed
		}
		for range 3 {
			g.Expect(r.decide(t.Context(), nil, detectionCreds("a")).Enabled).To(BeTrue())
			c.advance(interval)
		}
		g.Expect(cloud.count()).To(Equal(3))
		clients, closed := count()
		g.Expect(clients).To(Equal(1), "one client, one token, for three listings")
		g.Expect(closed).To(Equal(3), "its connections released after each listing")

		r.decide(t.Context(), nil, detectionCreds("b"))
		clients, _ = count()
		g.Expect(clients).To(Equal(2), "new credentials get a client of their own")

		cloud.set(matching, matching, errUnreachable)
		c.advance(interval)
		g.Expect(r.decide(t.Context(), nil, detectionCreds("b")).Failure).To(Equal(openstack.ReasonUnreachable))
		clients, _ = count()
		g.Expect(clients).To(Equal(2), "the failed listing used the kept client")
		cloud.set(matching, matching, nil)
		c.advance(interval)
		g.Expect(r.decide(t.Context(), nil, detectionCreds("b")).Failure).To(BeEmpty())
		clients, _ = count()
		g.Expect(clients).To(Equal(3), "the retry after the failure starts from a new client")
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
		g.Expect(d.Source).To(Equal(desired.SourceLastKnown))
		g.Expect(d.Failure).To(Equal(openstack.ReasonUnreachable))
		g.Expect(d.RecheckIn).To(Equal(firstRetry), "a failure is retried soon")
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
		g.Expect(d.Source).To(Equal(desired.SourceLastKnown))
		g.Expect(d.Failure).To(Equal(openstack.ReasonUnreachable))
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
		g.Expect(d.Source).To(Equal(desired.SourceLastKnown))
		g.Expect(d.Failure).To(Equal(openstack.ReasonUnreachable))
	})

	t.Run("When detection fails with no decision anywhere, it should disable topology", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, computeErr: context.DeadlineExceeded, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d.Enabled).To(BeFalse())
		g.Expect(d.Source).To(Equal(desired.SourceDefault))
		g.Expect(d.Failure).To(Equal(openstack.ReasonTimeout))
	})

	t.Run("When OpenStack reports no available zone, it should treat it as a failure, not as a decision", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: []string{}}
		r := newFakeClock().reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, withLastKnown(detectionCreds("a"), true))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.Source).To(Equal(desired.SourceLastKnown))
		g.Expect(d.Failure).To(Equal(openstack.ReasonNoAvailableZones))
	})

	t.Run("When detection keeps failing, it should retry after 2 s, then back off, and recover at the next retry", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		r.decide(t.Context(), nil, detectionCreds("a"))
		for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
			c.advance(wait - time.Second)
			d := r.decide(t.Context(), nil, detectionCreds("a"))
			g.Expect(cloud.count()).To(Equal(i+1), "no retry before %s", wait)
			g.Expect(d.RecheckIn).To(Equal(time.Second))
			c.advance(time.Second)
			r.decide(t.Context(), nil, detectionCreds("a"))
			g.Expect(cloud.count()).To(Equal(i+2), "a retry after %s", wait)
		}

		cloud.set(matching, matching, nil)
		c.advance(16 * time.Second)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(5))
		g.Expect(d.Failure).To(BeEmpty())
		g.Expect(d.Source).To(Equal(desired.SourceDetected))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.RecheckIn).To(Equal(interval))

		cloud.set(nil, nil, errUnreachable)
		c.advance(interval)
		d = r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d.RecheckIn).To(Equal(firstRetry), "a success resets the backoff")
	})

	t.Run("When OpenStack is back after a long outage, it should list again within 30 s and clear the failure", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		// An hour of failed listings, each retried as soon as it is due.
		for elapsed := time.Duration(0); elapsed < time.Hour; elapsed += d.RecheckIn {
			c.advance(d.RecheckIn)
			d = r.decide(t.Context(), nil, detectionCreds("a"))
		}
		g.Expect(d.Failure).To(Equal(openstack.ReasonUnreachable))
		g.Expect(d.RecheckIn).To(Equal(maxRetry), "the backoff stops at the cap, not at the 10-minute interval")
		g.Expect(cloud.count()).To(BeNumerically("<=", 4+int(time.Hour/maxRetry)+1), "a listing every 30 s at most during the outage")

		cloud.set(matching, matching, nil)
		c.advance(maxRetry)
		d = r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(d.Failure).To(BeEmpty(), "cleared 30 s after OpenStack is back")
		g.Expect(d.Source).To(Equal(desired.SourceDetected))
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When the recheck interval is shorter than the backoff, it should retry a failure after the interval", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		c := newFakeClock()
		r := c.reconciler(cloud, 3*time.Second)
		r.decide(t.Context(), nil, detectionCreds("a"))
		c.advance(2 * time.Second)
		d := r.decide(t.Context(), nil, detectionCreds("a"))
		g.Expect(cloud.count()).To(Equal(2))
		g.Expect(d.RecheckIn).To(Equal(3*time.Second), "4 s of backoff, capped at the interval")
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

func TestDetectionBackupServices(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Minute
	matching := []string{"az1", "az2"}
	backupCreds := func() listingRequest {
		in := detectionCreds("a").listingRequest
		in.Backup = true
		return in
	}
	// listOnce lists with in and returns what the reconcile after the listing sees.
	listOnce := func(r *Reconciler, in listingRequest) desired.Detection {
		r.detection(context.Background(), in)
		r.listings.waitIdle()
		return r.detection(context.Background(), in)
	}

	t.Run("When the backup class is asked for, it should list the backup services with the zone client", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching, backup: []openstack.BackupService{{Zone: "az1", Usable: true}}}
		r := newFakeClock().reconciler(cloud, interval)
		d := listOnce(r, backupCreds())
		g.Expect(cloud.count()).To(Equal(1), "one client for both")
		g.Expect(d.Backup).To(Equal(desired.BackupDetection{Listed: true, Services: []openstack.BackupService{{Zone: "az1", Usable: true}}}))
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When no backup service is usable, it should list again soon, and back at the interval once one is", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching, backup: []openstack.BackupService{{Zone: "az1"}}}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		d := listOnce(r, backupCreds())
		g.Expect(d.Failure).To(BeEmpty())
		g.Expect(d.RecheckIn).To(Equal(firstRetry))

		cloud.mu.Lock()
		cloud.backup = []openstack.BackupService{{Zone: "az1", Usable: true}}
		cloud.mu.Unlock()
		c.advance(firstRetry)
		d = listOnce(r, backupCreds())
		g.Expect(d.Backup.Services).To(Equal([]openstack.BackupService{{Zone: "az1", Usable: true}}))
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When the backup class is not asked for, it should not list the services", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		r := newFakeClock().reconciler(cloud, interval)
		d := listOnce(r, detectionCreds("a").listingRequest)
		g.Expect(cloud.backupLists).To(BeZero())
		g.Expect(d.Backup).To(BeZero())
	})

	t.Run("When the backup class is switched on, it should list again at once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		listOnce(r, detectionCreds("a").listingRequest)
		c.advance(time.Second)
		listOnce(r, backupCreds())
		g.Expect(cloud.count()).To(Equal(2))
	})

	t.Run("When Cinder's policy refuses the listing, it should report it apart from the zones and not hurry the next listing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		forbidden := gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusForbidden, Expected: []int{http.StatusOK}}
		cloud := &fakeOpenStack{compute: matching, volume: matching, backupErr: forbidden}
		r := newFakeClock().reconciler(cloud, interval)
		d := listOnce(r, backupCreds())
		g.Expect(d.Failure).To(BeEmpty(), "the zones were listed")
		g.Expect(d.Backup.Failure).To(Equal(openstack.ReasonPermissionDenied))
		g.Expect(d.Backup.Listed).To(BeFalse())
		g.Expect(d.RecheckIn).To(Equal(interval))
	})

	t.Run("When the listing of the services fails after a success, it should keep the services and retry soon", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{compute: matching, volume: matching, backup: []openstack.BackupService{{Zone: "az1", Usable: true}}}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		listOnce(r, backupCreds())
		cloud.mu.Lock()
		cloud.backupErr = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		cloud.mu.Unlock()
		c.advance(interval)
		d := listOnce(r, backupCreds())
		g.Expect(d.Backup.Listed).To(BeTrue())
		g.Expect(d.Backup.Services).To(HaveLen(1))
		g.Expect(d.Backup.Failure).To(Equal(openstack.ReasonUnreachable))
		g.Expect(d.RecheckIn).To(Equal(firstRetry))
	})

	t.Run("When OpenStack cannot be reached, it should fail the zones and the services alike", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: errUnreachable}
		r := newFakeClock().reconciler(cloud, interval)
		d := listOnce(r, backupCreds())
		g.Expect(d.Failure).To(Equal(openstack.ReasonUnreachable))
		g.Expect(d.Backup.Failure).To(Equal(openstack.ReasonUnreachable))
		g.Expect(d.Backup.FailureMessage).To(Equal(openstack.Message(openstack.ReasonUnreachable)))
	})
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		failures int
		interval time.Duration
		want     time.Duration
	}{
		{"When the first listing is still running, it should look again after 2 s", 0, 10 * time.Minute, 2 * time.Second},
		{"When one listing failed, it should retry after 2 s", 1, 10 * time.Minute, 2 * time.Second},
		{"When two failed in a row, it should retry after 4 s", 2, 10 * time.Minute, 4 * time.Second},
		{"When four failed in a row, it should retry after 16 s", 4, 10 * time.Minute, 16 * time.Second},
		{"When five failed in a row, it should retry after 30 s, not 32 s", 5, 10 * time.Minute, maxRetry},
		{"When ten failed in a row under a 10-minute interval, it should retry after 30 s", 10, 10 * time.Minute, 30 * time.Second},
		{"When a great many failed, it should retry after 30 s without overflowing", 1000, 10 * time.Minute, maxRetry},
		{"When the interval is shorter than the cap, it should retry after the interval", 5, 20 * time.Second, 20 * time.Second},
		{"When the interval is shorter than 2 s, it should retry after the interval", 1, time.Second, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(retryDelay(tt.failures, tt.interval)).To(Equal(tt.want))
		})
	}
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
		g.Expect(d.Source).To(Equal(desired.SourceDetected))
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
		g.Expect(d.Failure).To(Equal(openstack.ReasonInvalidProxy))
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(d.Source).To(Equal(desired.SourceLastKnown))
		g.Expect(d.FailureMessage).To(Equal(openstack.Message(openstack.ReasonInvalidProxy)))
		g.Expect(d.FailureMessage).NotTo(ContainSubstring("s3cret"))
	})

	t.Run("When the proxy refuses, it should name the proxy in the condition, then clear it once the proxy lets OpenStack through", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud := &fakeOpenStack{clientErr: &openstack.ProxyError{Proxy: "proxy.example.com:3129", StatusCode: http.StatusForbidden}}
		c := newFakeClock()
		r := c.reconciler(cloud, interval)
		d := r.decide(t.Context(), nil, proxied(detectionCreds("a"), proxy))
		g.Expect(d.Failure).To(Equal(openstack.ReasonProxyFailure))
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
		c.advance(firstRetry)
		d = r.decide(t.Context(), nil, proxied(detectionCreds("a"), proxy))
		g.Expect(d.Failure).To(BeEmpty())
		g.Expect(d.FailureMessage).To(BeEmpty())
	})
}

// nudged reports whether the cache nudged the controller, consuming the nudge.
func nudged(c *listingCache) bool {
	select {
	case <-c.events:
		return true
	default:
		return false
	}
}

func TestDetectionInBackground(t *testing.T) {
	t.Parallel()
	// newCase returns a fake OpenStack serving matching zones and a reconciler that waits up to
	// firstWait for a first decision.
	newCase := func(firstWait time.Duration) (*fakeOpenStack, *Reconciler) {
		cloud := &fakeOpenStack{compute: []string{"az1", "az2"}, volume: []string{"az1", "az2"}}
		r := newFakeClock().reconciler(cloud, 10*time.Minute)
		r.Config.FirstTopologyWait = firstWait
		return cloud, r
	}

	t.Run("When the credentials rotate while OpenStack hangs, it should keep the decision in force without waiting and nudge once the listing ends", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud, r := newCase(time.Hour)
		g.Expect(r.decide(t.Context(), nil, detectionCreds("a")).Enabled).To(BeTrue())
		nudged(r.listings)

		release := cloud.hang()
		cloud.set([]string{"az1", "other"}, []string{"az1", "az2"}, nil)
		done := make(chan desired.Detection)
		go func() { done <- r.detection(t.Context(), detectionCreds("b").listingRequest) }()
		var d desired.Detection
		g.Eventually(done).Should(Receive(&d), "the reconcile must not wait for the hanging listing")
		g.Expect(d.Enabled).To(HaveValue(BeTrue()), "the last decision stays in force")
		g.Expect(d.Pending).To(BeFalse())
		g.Expect(nudged(r.listings)).To(BeFalse())

		release()
		r.listings.waitIdle()
		g.Expect(nudged(r.listings)).To(BeTrue())
		d = r.detection(t.Context(), detectionCreds("b").listingRequest)
		g.Expect(d.Enabled).To(HaveValue(BeFalse()), "the new credentials' zones decide now")
		g.Expect(cloud.count()).To(Equal(2))
	})

	t.Run("When a fresh install's first listing is slow, it should wait for the decision and not nudge", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud, r := newCase(time.Hour)
		release := cloud.hang()
		time.AfterFunc(50*time.Millisecond, release)
		d := r.detection(t.Context(), detectionCreds("a").listingRequest)
		g.Expect(d.Enabled).To(HaveValue(BeTrue()))
		g.Expect(d.Pending).To(BeFalse())
		r.listings.waitIdle()
		g.Expect(nudged(r.listings)).To(BeFalse(), "the waiting reconcile took the decision")
	})

	t.Run("When a fresh install's first listing hangs, it should go on without a decision after the bound and nudge when the listing ends", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud, r := newCase(20 * time.Millisecond)
		release := cloud.hang()
		in := detectionCreds("a")
		d := r.detection(t.Context(), in.listingRequest)
		g.Expect(d.Pending).To(BeTrue())
		g.Expect(d.Enabled).To(BeNil())
		g.Expect(d.RecheckIn).To(Equal(firstRetry))
		p, err := desired.Resolve(in.input(nil)).Plan(r.Decoder, d)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Topology.Enabled).To(BeFalse())
		g.Expect(p.Topology.Source).To(Equal(desired.SourcePending))

		release()
		r.listings.waitIdle()
		g.Expect(nudged(r.listings)).To(BeTrue())
		g.Expect(r.detection(t.Context(), in.listingRequest).Enabled).To(HaveValue(BeTrue()))
		g.Expect(cloud.count()).To(Equal(1), "the reconcile the nudge causes reads the finished listing")
	})

	t.Run("When a decision is already in force, it should not wait for the first listing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud, r := newCase(time.Hour)
		release := cloud.hang()
		defer release()
		in := detectionCreds("a").listingRequest
		in.Decided = true
		done := make(chan desired.Detection)
		go func() { done <- r.detection(t.Context(), in) }()
		var d desired.Detection
		g.Eventually(done).Should(Receive(&d))
		g.Expect(d.Pending).To(BeTrue())
	})

	t.Run("When the credentials change while a listing for the old ones hangs, it should end that listing and list with the new ones", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud, r := newCase(0)
		release := cloud.hang()
		r.detection(t.Context(), detectionCreds("a").listingRequest)
		r.detection(t.Context(), detectionCreds("b").listingRequest)
		g.Eventually(cloud.endedCount).Should(Equal(1), "the listing with the old credentials ends")
		release()
		r.listings.waitIdle()
		g.Expect(cloud.count()).To(Equal(2))
		g.Expect(r.detection(t.Context(), detectionCreds("b").listingRequest).Enabled).To(HaveValue(BeTrue()))
	})

	t.Run("When the manager stops, it should end the listings in progress", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cloud, r := newCase(0)
		release := cloud.hang()
		defer release()
		ctx, stop := context.WithCancel(t.Context())
		stopped := make(chan error)
		go func() { stopped <- r.listings.Start(ctx) }()
		r.detection(t.Context(), detectionCreds("a").listingRequest)
		stop()
		g.Eventually(stopped).Should(Receive(BeNil()))
		g.Expect(cloud.endedCount()).To(Equal(1))
	})
}
