// Package openstackclient_test runs shared/openstack's client against the harness's fake OpenStack
// (through its CONNECT proxy where a test asks for one): authentication, discovery, zone
// listing, errors and hangs, as gophercloud meets them.
package openstackclient_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/connectproxy"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

const (
	// testTimeout is the client's timeout in the tests that do not test a timeout: a hang guard,
	// so that an error the test expects (a TLS failure, say) is not cut short as a Timeout. It
	// was 5 s, which a TLS handshake on loopback outlasted under make test's load (60 on two
	// cores beside the storage phase).
	testTimeout = 30 * time.Second
	// Hang tests use hangTimeout: the requests before the hanging one must still complete within
	// it (in CI a token took longer than 300 ms), and a call that ignored it would hang until the
	// test's own deadline, so the bound they check is hangTimeout plus hangSlack.
	hangTimeout = 2 * time.Second
	hangSlack   = 5 * time.Second

	appCredID     = "ac-0001"
	appCredName   = "csi"
	appCredSecret = "app-credential-secret-value"
)

func newFake(t *testing.T, opts fakeopenstack.Options) *fakeopenstack.Server {
	t.Helper()
	opts.Logger = testr.New(t)
	if opts.AppCredentials == nil {
		opts.AppCredentials = []fakeopenstack.AppCredential{
			{ID: appCredID, Name: appCredName, UserName: fakeopenstack.DefaultUserName, Secret: appCredSecret},
		}
	}
	s, err := fakeopenstack.New(opts)
	if err != nil {
		t.Fatalf("starting fake OpenStack: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func cloudsYAML(t *testing.T, s *fakeopenstack.Server, o fakeopenstack.CloudOptions) []byte {
	t.Helper()
	b, err := s.CloudsYAML(o)
	if err != nil {
		t.Fatalf("rendering clouds.yaml: %v", err)
	}
	return b
}

// config returns a Config with the fake's CA and the default password cloud.
func config(t *testing.T, s *fakeopenstack.Server) openstack.Config {
	t.Helper()
	return openstack.Config{
		CloudsYAML: cloudsYAML(t, s, fakeopenstack.CloudOptions{}),
		CloudName:  "openstack",
		CACertPEM:  s.CACertPEM(),
		Timeout:    testTimeout,
		UserAgent:  "cinder-csi-operator-test/0",
	}
}

func newClient(t *testing.T, cfg openstack.Config) (*openstack.Client, error) {
	t.Helper()
	c, err := openstack.NewClient(t.Context(), cfg)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

// expectNoSecret checks the error text and the user-facing message for every secret.
func expectNoSecret(g Gomega, err error, secrets ...string) {
	for _, secret := range secrets {
		g.Expect(err.Error()).NotTo(ContainSubstring(secret))
		g.Expect(openstack.Message(openstack.Classify(err))).NotTo(ContainSubstring(secret))
	}
}

func TestClientAuthentication(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cloud fakeopenstack.CloudOptions
		// extra is appended to the rendered clouds.yaml, inside the cloud entry.
		extra          string
		wantAuthMethod string
		wantDiscovery  bool
	}{
		{
			name:           "When the cloud uses a password and a versioned auth URL, it should authenticate without discovery",
			cloud:          fakeopenstack.CloudOptions{},
			wantAuthMethod: fakeopenstack.AuthMethodPassword,
		},
		{
			name:           "When the cloud uses a password and a versionless auth URL, it should discover the v3 endpoint first",
			cloud:          fakeopenstack.CloudOptions{Versionless: true},
			wantAuthMethod: fakeopenstack.AuthMethodPassword,
			wantDiscovery:  true,
		},
		{
			name: "When the cloud uses an application credential ID, it should authenticate with it",
			cloud: fakeopenstack.CloudOptions{
				AppCredential: &fakeopenstack.AppCredential{ID: appCredID, Secret: appCredSecret},
			},
			wantAuthMethod: fakeopenstack.AuthMethodApplicationCredential,
		},
		{
			name: "When the cloud uses an application credential name and a versionless auth URL, it should authenticate with it",
			cloud: fakeopenstack.CloudOptions{Versionless: true, AppCredential: &fakeopenstack.AppCredential{
				Name: appCredName, UserName: fakeopenstack.DefaultUserName, Secret: appCredSecret,
			}},
			wantAuthMethod: fakeopenstack.AuthMethodApplicationCredential,
			wantDiscovery:  true,
		},
		{
			name:           "When the cloud names a public-cloud profile, it should not look for clouds-public.yaml on disk",
			extra:          "    profile: some-public-cloud\n",
			wantAuthMethod: fakeopenstack.AuthMethodPassword,
		},
		{
			name:           "When the cloud asks for the internal interface, it should use the internal endpoints",
			cloud:          fakeopenstack.CloudOptions{Interface: "internal"},
			wantAuthMethod: fakeopenstack.AuthMethodPassword,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := newFake(t, fakeopenstack.Options{})
			cfg := config(t, s)
			cfg.CloudsYAML = append(cloudsYAML(t, s, tt.cloud), tt.extra...)

			c, err := newClient(t, cfg)
			g.Expect(err).NotTo(HaveOccurred())
			d, err := openstack.DetectTopology(t.Context(), c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d).To(Equal(openstack.TopologyDecision{Enabled: true, ComputeZones: []string{"nova"}, VolumeZones: []string{"nova"}}))

			var tokens, discovery []fakeopenstack.Request
			for _, r := range s.Requests() {
				switch {
				case r.IsTokenRequest():
					tokens = append(tokens, r)
				case r.Endpoint == fakeopenstack.EndpointIdentity:
					discovery = append(discovery, r)
				}
			}
			g.Expect(tokens).To(HaveLen(1))
			g.Expect(tokens[0].AuthMethod).To(Equal(tt.wantAuthMethod))
			g.Expect(tokens[0].Status).To(Equal(201))
			if tt.wantDiscovery {
				g.Expect(discovery).To(HaveLen(1))
				g.Expect(discovery[0].Path).To(Equal("/identity/"))
				g.Expect(discovery[0].Status).To(Equal(300))
			} else {
				g.Expect(discovery).To(BeEmpty())
			}
			g.Expect(s.Count(fakeopenstack.EndpointCompute)).To(Equal(1))
			g.Expect(s.Count(fakeopenstack.EndpointVolume)).To(Equal(1))
		})
	}
}

func TestClientCredentialErrors(t *testing.T) {
	t.Parallel()
	const wrongPassword = "wrong-password-value"
	const wrongSecret = "wrong-app-credential-secret"
	tests := []struct {
		name string
		yaml func(s *fakeopenstack.Server) []byte
		// cloud overrides the cloud name unless empty; emptyCloud sets it to "".
		cloud      string
		emptyCloud bool
		want       openstack.Reason
		secrets    []string
	}{
		{
			name: "When the password is wrong, it should fail with AuthenticationFailed and not reveal the password",
			yaml: func(s *fakeopenstack.Server) []byte {
				u := &fakeopenstack.User{Name: fakeopenstack.DefaultUserName, Password: wrongPassword}
				b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{User: u})
				return b
			},
			want:    openstack.ReasonAuthenticationFailed,
			secrets: []string{wrongPassword, fakeopenstack.DefaultPassword},
		},
		{
			name: "When the application credential secret is wrong, it should fail with AuthenticationFailed and not reveal it",
			yaml: func(s *fakeopenstack.Server) []byte {
				ac := &fakeopenstack.AppCredential{ID: appCredID, Secret: wrongSecret}
				b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{AppCredential: ac})
				return b
			},
			want:    openstack.ReasonAuthenticationFailed,
			secrets: []string{wrongSecret, appCredSecret},
		},
		{
			name: "When the application credential is unknown, it should fail with AuthenticationFailed",
			yaml: func(s *fakeopenstack.Server) []byte {
				ac := &fakeopenstack.AppCredential{ID: "ac-unknown", Secret: appCredSecret}
				b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{AppCredential: ac})
				return b
			},
			want:    openstack.ReasonAuthenticationFailed,
			secrets: []string{appCredSecret},
		},
		{
			name:    "When the cloud name is not in clouds.yaml, it should fail with CloudNotFound",
			yaml:    func(s *fakeopenstack.Server) []byte { b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{}); return b },
			cloud:   "elsewhere",
			want:    openstack.ReasonCloudNotFound,
			secrets: []string{fakeopenstack.DefaultPassword},
		},
		{
			name:       "When the cloud name is empty, it should fail with CloudNotFound",
			yaml:       func(s *fakeopenstack.Server) []byte { b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{}); return b },
			emptyCloud: true,
			want:       openstack.ReasonCloudNotFound,
		},
		{
			name: "When clouds.yaml is not YAML, it should fail with InvalidCloudsYAML",
			yaml: func(*fakeopenstack.Server) []byte {
				return []byte("clouds:\n  openstack:\n    auth: {auth_url: https://x, password: leaked-pw\n")
			},
			want:    openstack.ReasonInvalidCloudsYAML,
			secrets: []string{"leaked-pw"},
		},
		{
			name: "When a value has the wrong type, it should fail with InvalidCloudsYAML and not quote the value",
			yaml: func(*fakeopenstack.Server) []byte {
				return []byte("clouds:\n  openstack:\n    auth: pw-hunter2\n")
			},
			want:    openstack.ReasonInvalidCloudsYAML,
			secrets: []string{"pw-hunter2"},
		},
		{
			name: "When a value with a backtick has the wrong type, it should fail with InvalidCloudsYAML and quote no part of it",
			yaml: func(*fakeopenstack.Server) []byte {
				// the YAML decoder quotes the first seven bytes: "pw`hunt".
				return []byte("clouds:\n  openstack:\n    auth: \"pw`hunter2-long\"\n")
			},
			want:    openstack.ReasonInvalidCloudsYAML,
			secrets: []string{"hunt"},
		},
		{
			name: "When a value with backticks cannot have its explicit tag, it should fail with InvalidCloudsYAML and quote no part of it",
			yaml: func(*fakeopenstack.Server) []byte {
				return []byte("clouds:\n  openstack:\n    verify: !!bool \"x`hu3`y\"\n")
			},
			want:    openstack.ReasonInvalidCloudsYAML,
			secrets: []string{"hu3"},
		},
		{
			name:  "When the cloud name holds a newline and is not in clouds.yaml, it should fail with CloudNotFound on one line",
			yaml:  func(s *fakeopenstack.Server) []byte { b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{}); return b },
			cloud: "open\nstack",
			want:  openstack.ReasonCloudNotFound,
		},
		{
			name:  "When clouds.yaml is empty, it should fail with InvalidCloudsYAML",
			yaml:  func(*fakeopenstack.Server) []byte { return nil },
			want:  openstack.ReasonInvalidCloudsYAML,
			cloud: "openstack",
		},
		{
			name:  "When clouds.yaml has no clouds map, it should fail with InvalidCloudsYAML",
			yaml:  func(*fakeopenstack.Server) []byte { return []byte("something: else\n") },
			want:  openstack.ReasonInvalidCloudsYAML,
			cloud: "openstack",
		},
		{
			name: "When auth_url is missing, it should fail with MissingAuthFields",
			yaml: func(*fakeopenstack.Server) []byte {
				return []byte(`
clouds:
  openstack:
    auth:
      username: demo
      password: pw-123456
      user_domain_name: Default
`)
			},
			want:    openstack.ReasonMissingAuthFields,
			secrets: []string{"pw-123456"},
		},
		{
			name: "When the password is missing, it should fail with MissingAuthFields",
			yaml: func(s *fakeopenstack.Server) []byte {
				return []byte(`
clouds:
  openstack:
    auth:
      auth_url: ` + s.AuthURL() + `
      username: demo
      user_domain_name: Default
`)
			},
			want: openstack.ReasonMissingAuthFields,
		},
		{
			name: "When the application credential secret is missing, it should fail with MissingAuthFields",
			yaml: func(s *fakeopenstack.Server) []byte {
				return []byte(`
clouds:
  openstack:
    auth:
      auth_url: ` + s.AuthURL() + `
      application_credential_id: ` + appCredID + `
`)
			},
			want: openstack.ReasonMissingAuthFields,
		},
		{
			name: "When the cloud has no auth section, it should fail with MissingAuthFields",
			yaml: func(*fakeopenstack.Server) []byte {
				return []byte("clouds:\n  openstack:\n    region_name: RegionOne\n")
			},
			want:  openstack.ReasonMissingAuthFields,
			cloud: "openstack",
		},
		{
			name: "When auth_url is not an http(s) URL, it should fail with InvalidCloudsYAML and not echo it",
			yaml: func(*fakeopenstack.Server) []byte {
				return []byte(`
clouds:
  openstack:
    auth:
      auth_url: "keystone:5000/v3"
      application_credential_id: a
      application_credential_secret: s3cr3t-in-url
`)
			},
			want:    openstack.ReasonInvalidCloudsYAML,
			secrets: []string{"s3cr3t-in-url"},
		},
		{
			name: "When region_name matches no catalog endpoint, it should fail with EndpointNotFound",
			yaml: func(s *fakeopenstack.Server) []byte {
				b, _ := s.CloudsYAML(fakeopenstack.CloudOptions{Region: "NoSuchRegion"})
				return b
			},
			want:    openstack.ReasonEndpointNotFound,
			secrets: []string{fakeopenstack.DefaultPassword},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := newFake(t, fakeopenstack.Options{})
			cfg := config(t, s)
			cfg.CloudsYAML = tt.yaml(s)
			if tt.cloud != "" {
				cfg.CloudName = tt.cloud
			}
			if tt.emptyCloud {
				cfg.CloudName = ""
			}

			_, err := newClient(t, cfg)
			g.Expect(err).To(HaveOccurred())
			g.Expect(openstack.Classify(err)).To(Equal(tt.want), "error: %v", err)
			g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
			expectNoSecret(g, err, tt.secrets...)
		})
	}
}

func TestClientCA(t *testing.T) {
	t.Parallel()

	t.Run("When the CA is passed explicitly, it should trust the server", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.VolumeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
	})

	t.Run("When clouds.yaml names a cacert file that does not exist, it should still use the explicit CA", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		cfg := config(t, s)
		cfg.CloudsYAML = cloudsYAML(t, s, fakeopenstack.CloudOptions{
			CACertPath: "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
		})
		c, err := newClient(t, cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.ComputeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
	})

	t.Run("When clouds.yaml names a readable cacert but no CA is passed, it should not trust the file", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		path, err := s.WriteCloudsYAML(t.TempDir(), fakeopenstack.CloudOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(ContainSubstring("cacert: " + filepath.Join(filepath.Dir(path), "ca.pem")))

		cfg := config(t, s)
		cfg.CloudsYAML = data
		cfg.CACertPEM = nil
		_, err = newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonTLSFailure), "error: %v", err)
	})

	t.Run("When no CA is passed, it should fail with TLSFailure", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		cfg := config(t, s)
		cfg.CACertPEM = nil
		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonTLSFailure), "error: %v", err)
		expectNoSecret(g, err, fakeopenstack.DefaultPassword)
	})

	t.Run("When another server's CA is passed, it should fail with TLSFailure", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		other := newFake(t, fakeopenstack.Options{})
		cfg := config(t, s)
		cfg.CACertPEM = other.CACertPEM()
		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonTLSFailure), "error: %v", err)
		g.Expect(s.CountTokenRequests()).To(BeZero())
	})

	t.Run("When the CA bundle holds no certificate, it should fail with InvalidCACert", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		cfg := config(t, s)
		cfg.CACertPEM = []byte("not a certificate")
		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonInvalidCACert), "error: %v", err)
	})
}

func TestClientZones(t *testing.T) {
	t.Parallel()
	az := func(name string, available bool) fakeopenstack.Zone {
		return fakeopenstack.Zone{Name: name, Available: available}
	}
	tests := []struct {
		name            string
		compute, volume []fakeopenstack.Zone
		want            openstack.TopologyDecision
		wantReason      openstack.Reason
	}{
		{
			name:    "When every compute zone is also a volume zone, it should enable topology",
			compute: []fakeopenstack.Zone{az("az2", true), az("az1", true)},
			volume:  []fakeopenstack.Zone{az("az1", true), az("az2", true), az("az3", true)},
			want: openstack.TopologyDecision{
				Enabled: true, ComputeZones: []string{"az1", "az2"}, VolumeZones: []string{"az1", "az2", "az3"},
			},
		},
		{
			name:    "When a compute zone has no volume zone, it should disable topology",
			compute: []fakeopenstack.Zone{az("az1", true), az("az2", true)},
			volume:  []fakeopenstack.Zone{az("nova", true)},
			want:    openstack.TopologyDecision{Enabled: false, ComputeZones: []string{"az1", "az2"}, VolumeZones: []string{"nova"}},
		},
		{
			name:    "When the unmatched compute zone is unavailable, it should ignore it and enable topology",
			compute: []fakeopenstack.Zone{az("az1", true), az("az2", false)},
			volume:  []fakeopenstack.Zone{az("az1", true)},
			want:    openstack.TopologyDecision{Enabled: true, ComputeZones: []string{"az1"}, VolumeZones: []string{"az1"}},
		},
		{
			name:    "When the only matching volume zone is unavailable, it should disable topology",
			compute: []fakeopenstack.Zone{az("az1", true)},
			volume:  []fakeopenstack.Zone{az("az1", false), az("nova", true)},
			want:    openstack.TopologyDecision{Enabled: false, ComputeZones: []string{"az1"}, VolumeZones: []string{"nova"}},
		},
		{
			name:       "When every compute zone is unavailable, it should return NoAvailableZones",
			compute:    []fakeopenstack.Zone{az("az1", false)},
			volume:     []fakeopenstack.Zone{az("az1", true)},
			want:       openstack.TopologyDecision{ComputeZones: []string{}, VolumeZones: []string{"az1"}},
			wantReason: openstack.ReasonNoAvailableZones,
		},
		{
			name:    "When a zone is reported twice, it should list it once",
			compute: []fakeopenstack.Zone{az("az1", true), az("az1", true)},
			volume:  []fakeopenstack.Zone{az("az1", true)},
			want:    openstack.TopologyDecision{Enabled: true, ComputeZones: []string{"az1"}, VolumeZones: []string{"az1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := newFake(t, fakeopenstack.Options{ComputeZones: tt.compute, VolumeZones: tt.volume})
			c, err := newClient(t, config(t, s))
			g.Expect(err).NotTo(HaveOccurred())
			d, err := openstack.DetectTopology(t.Context(), c)
			g.Expect(openstack.Classify(err)).To(Equal(tt.wantReason), "error: %v", err)
			g.Expect(d).To(Equal(tt.want))
		})
	}

	t.Run("When the zones change at runtime, it should report the new decision on the next detection", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		d, err := openstack.DetectTopology(t.Context(), c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Enabled).To(BeTrue())

		s.SetComputeZones(az("az1", true), az("az2", true))
		d, err = openstack.DetectTopology(t.Context(), c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Enabled).To(BeFalse())

		s.SetVolumeZones(az("az1", true), az("az2", true))
		d, err = openstack.DetectTopology(t.Context(), c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Enabled).To(BeTrue())
		g.Expect(s.CountTokenRequests()).To(Equal(1))
	})
}

func TestClientFaults(t *testing.T) {
	t.Parallel()

	t.Run("When compute refuses connections, it should fail with Unreachable", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())

		s.SetFault(fakeopenstack.EndpointCompute, fakeopenstack.FaultRefuse)
		_, err = c.ComputeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonUnreachable), "error: %v", err)
		for _, r := range s.Requests() {
			if r.Endpoint == fakeopenstack.EndpointCompute {
				g.Expect(r.Status).To(BeZero(), "a refused request must get no HTTP answer")
			}
		}
	})

	t.Run("When Keystone refuses connections, it should fail to create the client with Unreachable", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		s.SetFault(fakeopenstack.EndpointIdentity, fakeopenstack.FaultRefuse)
		_, err := newClient(t, config(t, s))
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonUnreachable), "error: %v", err)
		expectNoSecret(g, err, fakeopenstack.DefaultPassword)
	})

	t.Run("When compute hangs, it should fail with Timeout within the timeout", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		cfg := config(t, s)
		cfg.Timeout = hangTimeout
		c, err := newClient(t, cfg)
		g.Expect(err).NotTo(HaveOccurred())

		s.SetFault(fakeopenstack.EndpointCompute, fakeopenstack.FaultHang)
		start := time.Now()
		_, err = c.ComputeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonTimeout), "error: %v", err)
		g.Expect(time.Since(start)).To(BeNumerically("<", hangTimeout+hangSlack))
	})

	t.Run("When Keystone hangs, it should fail to create the client with Timeout within the timeout", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		s.SetFault(fakeopenstack.EndpointIdentity, fakeopenstack.FaultHang)
		cfg := config(t, s)
		cfg.Timeout = hangTimeout
		start := time.Now()
		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonTimeout), "error: %v", err)
		g.Expect(time.Since(start)).To(BeNumerically("<", hangTimeout+hangSlack))
		expectNoSecret(g, err, fakeopenstack.DefaultPassword)
	})

	t.Run("When volume is slow but answers within the timeout, it should succeed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{HangFor: 50 * time.Millisecond})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		s.SetFault(fakeopenstack.EndpointVolume, fakeopenstack.FaultHang)
		zones, err := c.VolumeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(zones).To(Equal([]string{"nova"}))
	})

	t.Run("When volume answers 500, it should fail with ServerError", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		s.SetFault(fakeopenstack.EndpointVolume, fakeopenstack.FaultServerError)
		_, err = c.VolumeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonServerError), "error: %v", err)
	})

	t.Run("When compute answers 500 once, it should fail once and then succeed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		s.SetFaultN(fakeopenstack.EndpointCompute, fakeopenstack.FaultServerError, 1)
		_, err = c.ComputeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonServerError), "error: %v", err)
		zones, err := c.ComputeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(zones).To(Equal([]string{"nova"}))
	})

	t.Run("When Keystone answers 500, it should fail to create the client with ServerError", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		s.SetFault(fakeopenstack.EndpointIdentity, fakeopenstack.FaultServerError)
		_, err := newClient(t, config(t, s))
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonServerError), "error: %v", err)
	})

	t.Run("When the token expires, it should re-authenticate once and succeed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.CountTokenRequests()).To(Equal(1))

		s.ExpireTokens()
		zones, err := c.ComputeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(zones).To(Equal([]string{"nova"}))
		g.Expect(s.CountTokenRequests()).To(Equal(2))

		var statuses []int
		for _, r := range s.Requests() {
			if r.Endpoint == fakeopenstack.EndpointCompute {
				statuses = append(statuses, r.Status)
			}
		}
		g.Expect(statuses).To(Equal([]int{401, 200}))

		// The new token is kept: the next call needs no further authentication.
		_, err = c.VolumeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.CountTokenRequests()).To(Equal(2))
	})

	t.Run("When compute keeps answering 401, it should re-authenticate once and fail with AuthenticationFailed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())

		s.SetFault(fakeopenstack.EndpointCompute, fakeopenstack.FaultUnauthorized)
		_, err = c.ComputeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonAuthenticationFailed), "error: %v", err)
		g.Expect(s.CountTokenRequests()).To(Equal(2))
		g.Expect(s.Count(fakeopenstack.EndpointCompute)).To(Equal(2))
		expectNoSecret(g, err, fakeopenstack.DefaultPassword)
	})

	t.Run("When the token expires and the credentials are no longer accepted, it should fail with AuthenticationFailed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())

		s.ExpireTokens()
		s.SetFault(fakeopenstack.EndpointIdentity, fakeopenstack.FaultUnauthorized)
		_, err = c.VolumeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonAuthenticationFailed), "error: %v", err)
		expectNoSecret(g, err, fakeopenstack.DefaultPassword)
	})

	t.Run("When the whole server is down and comes back, it should fail with Unreachable and then recover", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		url := s.URL()

		s.Stop()
		_, err = c.ComputeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonUnreachable), "error: %v", err)
		g.Expect(strings.ToLower(err.Error())).To(ContainSubstring("refused"))

		g.Expect(s.Start()).To(Succeed())
		g.Expect(s.URL()).To(Equal(url))
		zones, err := c.ComputeZones(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(zones).To(Equal([]string{"nova"}))
	})

	t.Run("When the server is down at start, it should fail to create the client with Unreachable", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		cfg := config(t, s)
		s.Stop()
		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonUnreachable), "error: %v", err)
	})

	t.Run("When the caller's context is canceled, it should fail with Canceled", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newFake(t, fakeopenstack.Options{})
		c, err := newClient(t, config(t, s))
		g.Expect(err).NotTo(HaveOccurred())
		s.SetFault(fakeopenstack.EndpointVolume, fakeopenstack.FaultHang)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err = c.VolumeZones(ctx)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonCanceled), "error: %v", err)
	})
}

// TestClientIgnoresEnvironment is not parallel: t.Setenv changes the whole process.
func TestClientIgnoresEnvironment(t *testing.T) {
	s := newFake(t, fakeopenstack.Options{})
	other := newFake(t, fakeopenstack.Options{})
	dir := t.TempDir()
	otherCA := filepath.Join(dir, "other-ca.pem")
	if err := os.WriteFile(otherCA, other.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("When OS_* variables point elsewhere, it should use only the explicit inputs", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv("OS_CLOUD", "elsewhere")
		t.Setenv("OS_REGION_NAME", "NoSuchRegion")
		t.Setenv("OS_INTERFACE", "admin")
		t.Setenv("OS_CLIENT_CONFIG_FILE", filepath.Join(dir, "missing-clouds.yaml"))
		t.Setenv("OS_CACERT", otherCA)
		t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "missing"))
		t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")

		cfg := config(t, s)
		cfg.CloudsYAML = cloudsYAML(t, s, fakeopenstack.CloudOptions{Versionless: true})
		c, err := newClient(t, cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = openstack.DetectTopology(t.Context(), c)
		g.Expect(err).NotTo(HaveOccurred())
	})

	// Documents the one variable gophercloud v2.15.0 reads with no opt-out (see parseCloud).
	t.Run("When OS_CACERT names a missing file, it should fail with InvalidCloudsYAML", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv("OS_CACERT", filepath.Join(dir, "missing-ca.pem"))
		_, err := newClient(t, config(t, s))
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonInvalidCloudsYAML), "error: %v", err)
	})
}

// proxyOnlyHost names the fake OpenStack in the proxy tests. Only the test's proxy resolves it:
// .onion names are never looked up in DNS (RFC 7686; Go's resolver refuses them without sending
// a query), so a client that reaches it went through the proxy, and one that tries directly fails
// at once, without any traffic leaving loopback.
const proxyOnlyHost = "openstack.onion"

// proxiedFake starts a fake OpenStack that clouds.yaml names by proxyOnlyHost, and a CONNECT
// proxy that resolves that name to the fake.
func proxiedFake(t *testing.T) (*fakeopenstack.Server, *connectproxy.Proxy, openstack.Config) {
	t.Helper()
	s := newFake(t, fakeopenstack.Options{ExtraHosts: []string{proxyOnlyHost}})
	p, err := connectproxy.Start(connectproxy.Options{Hosts: map[string]string{proxyOnlyHost: "127.0.0.1"}})
	if err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	t.Cleanup(p.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.URL(), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, s)
	cfg.CloudsYAML = cloudsYAML(t, s, fakeopenstack.CloudOptions{BaseURL: "https://" + net.JoinHostPort(proxyOnlyHost, port)})
	return s, p, cfg
}

// withProxy sets cfg.Proxy from settings or fails the test.
func withProxy(t *testing.T, cfg openstack.Config, settings openstack.ProxySettings) openstack.Config {
	t.Helper()
	proxy, err := openstack.ProxyFunc(settings)
	if err != nil {
		t.Fatalf("building the proxy function: %v", err)
	}
	cfg.Proxy = proxy
	return cfg
}

func TestClientProxy(t *testing.T) {
	t.Parallel()
	const proxyPassword = "proxy-pa55word"

	t.Run("When HTTPS_PROXY is set, it should reach OpenStack through the proxy with the proxy's credentials", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s, p, cfg := proxiedFake(t)
		cfg = withProxy(t, cfg, openstack.ProxySettings{HTTPSProxy: "http://csi:" + proxyPassword + "@" + p.Addr()})

		c, err := newClient(t, cfg)
		g.Expect(err).NotTo(HaveOccurred())
		d, err := openstack.DetectTopology(t.Context(), c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Enabled).To(BeTrue())

		connects := p.Connects()
		g.Expect(connects).NotTo(BeEmpty())
		for _, cn := range connects {
			g.Expect(cn.Target).To(HavePrefix(proxyOnlyHost+":"), "every request goes to the OpenStack host, through the proxy")
			g.Expect(cn.Status).To(Equal(http.StatusOK))
			g.Expect(cn.User).To(Equal("csi"))
		}
		g.Expect(s.CountTokenRequests()).To(Equal(1))
		g.Expect(s.Count(fakeopenstack.EndpointCompute)).To(Equal(1))
		g.Expect(s.Count(fakeopenstack.EndpointVolume)).To(Equal(1))
	})

	t.Run("When NO_PROXY names the OpenStack host's domain, it should connect directly and not use the proxy", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		_, p, cfg := proxiedFake(t)
		cfg = withProxy(t, cfg, openstack.ProxySettings{HTTPSProxy: p.URL(), NoProxy: "example.com,.onion"})

		// Directly, the name cannot be resolved: that failure proves the proxy was bypassed.
		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonUnreachable), "error: %v", err)
		g.Expect(err.Error()).To(ContainSubstring(proxyOnlyHost))
		g.Expect(err.Error()).NotTo(ContainSubstring("proxyconnect"))
		g.Expect(p.Connects()).To(BeEmpty())
	})

	for _, status := range []int{http.StatusForbidden, http.StatusBadGateway} {
		t.Run(fmt.Sprintf("When the proxy answers CONNECT with %d, it should fail with ProxyFailure naming the proxy but not its credentials", status), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s, p, cfg := proxiedFake(t)
			cfg = withProxy(t, cfg, openstack.ProxySettings{HTTPSProxy: "http://csi:" + proxyPassword + "@" + p.Addr()})
			p.Refuse(status)

			_, err := newClient(t, cfg)
			g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonProxyFailure), "error: %v", err)
			msg := openstack.Describe(err)
			g.Expect(msg).To(ContainSubstring("The HTTP proxy " + p.Addr() + " refused"))
			g.Expect(msg).To(ContainSubstring(fmt.Sprintf("%d %s", status, http.StatusText(status))))
			g.Expect(msg).NotTo(ContainSubstring("\n"))
			expectNoSecret(g, err, proxyPassword, fakeopenstack.DefaultPassword)
			g.Expect(msg).NotTo(ContainSubstring(proxyPassword))
			g.Expect(s.Requests()).To(BeEmpty(), "nothing reached OpenStack")
		})
	}

	t.Run("When the proxy refuses only after the client was created, it should fail listing zones with ProxyFailure", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		_, p, cfg := proxiedFake(t)
		cfg = withProxy(t, cfg, openstack.ProxySettings{HTTPSProxy: p.URL()})
		c, err := newClient(t, cfg)
		g.Expect(err).NotTo(HaveOccurred())
		c.Close()
		p.Refuse(http.StatusForbidden)

		_, err = c.ComputeZones(t.Context())
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonProxyFailure), "error: %v", err)
		g.Expect(openstack.Describe(err)).To(ContainSubstring(p.Addr()))
	})

	t.Run("When the proxy is down, it should fail with ProxyFailure saying it cannot be reached", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s, p, cfg := proxiedFake(t)
		cfg = withProxy(t, cfg, openstack.ProxySettings{HTTPSProxy: "http://csi:" + proxyPassword + "@" + p.Addr()})
		p.Close()

		_, err := newClient(t, cfg)
		g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonProxyFailure), "error: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("connection refused"))
		msg := openstack.Describe(err)
		g.Expect(msg).To(HavePrefix("The HTTP proxy " + p.Addr() + " cannot be reached"))
		expectNoSecret(g, err, proxyPassword)
		g.Expect(msg).NotTo(ContainSubstring(proxyPassword))
		g.Expect(s.Requests()).To(BeEmpty())
	})
}
