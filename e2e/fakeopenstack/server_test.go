package fakeopenstack

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func newTestServer(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Logger = testr.New(t)
	s, err := New(opts)
	if err != nil {
		t.Fatalf("starting fake: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// httpClient trusts only the fake's CA and keeps no idle connections, so every request dials.
func httpClient(s *Server) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}
}

func token(t *testing.T, g Gomega, s *Server) string {
	t.Helper()
	body := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"demo","domain":{"name":"Default"},"password":"` +
		DefaultPassword + `"}}},"scope":{"project":{"id":"` + DefaultProjectID + `"}}}}`
	resp, err := httpClient(s).Post(s.AuthURL()+"/auth/tokens", "application/json", strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated))
	g.Expect(resp.Header.Get("X-Subject-Token")).NotTo(BeEmpty())
	return resp.Header.Get("X-Subject-Token")
}

func getZones(g Gomega, s *Server, tok string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, s.URL()+"/compute/v2.1/os-availability-zone", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-Auth-Token", tok)
	return httpClient(s).Do(req)
}

func TestServer(t *testing.T) {
	t.Parallel()

	t.Run("When a token is issued, it should list the zones as JSON", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{ComputeZones: []Zone{{Name: "az1", Available: true}, {Name: "az2"}}})
		resp, err := getZones(g, s, token(t, g, s))
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
		var body struct {
			Info []struct {
				ZoneName  string `json:"zoneName"`
				ZoneState struct {
					Available bool `json:"available"`
				} `json:"zoneState"`
			} `json:"availabilityZoneInfo"`
		}
		g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
		g.Expect(body.Info).To(HaveLen(2))
		g.Expect(body.Info[1].ZoneName).To(Equal("az2"))
		g.Expect(body.Info[1].ZoneState.Available).To(BeFalse())
	})

	t.Run("When tokens are expired, it should answer 401", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		s.ExpireTokens()
		resp, err := getZones(g, s, tok)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	})

	t.Run("When the refuse fault is set, it should reset the connection without an HTTP answer", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		s.SetFault(EndpointCompute, FaultRefuse)
		_, err := getZones(g, s, tok) //nolint:bodyclose // the request fails: there is no body to close
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)).To(BeTrue(), "error: %v", err)
	})

	t.Run("When a fault is set for one request, it should apply once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		s.SetFaultN(EndpointCompute, FaultServerError, 1)
		for _, want := range []int{http.StatusInternalServerError, http.StatusOK} {
			resp, err := getZones(g, s, tok)
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(want))
		}
	})

	t.Run("When the server is stopped, it should refuse connections and serve again on the same port after Start", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		url := s.URL()

		s.Stop()
		g.Expect(s.Running()).To(BeFalse())
		_, err := getZones(g, s, tok) //nolint:bodyclose // the request fails: there is no body to close
		g.Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "error: %v", err)

		g.Expect(s.Start()).To(Succeed())
		g.Expect(s.URL()).To(Equal(url))
		resp, err := getZones(g, s, tok)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	})

	t.Run("When a request hangs, it should be released by Stop", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		s.SetFault(EndpointCompute, FaultHang)
		done := make(chan error, 1)
		go func() {
			_, err := getZones(g, s, tok) //nolint:bodyclose // the request fails: there is no body to close
			done <- err
		}()
		g.Eventually(func() int { return s.Count(EndpointCompute) }).Should(Equal(1))
		s.Stop()
		g.Eventually(done).Should(Receive(HaveOccurred()))
	})

	t.Run("When the server stops while requests are in flight, it should stop promptly and serve again after Start", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		for range 5 {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if resp, err := getZones(g, s, tok); err == nil {
						_ = resp.Body.Close()
					}
				})
				wg.Go(func() {
					if resp, err := httpClient(s).Get(s.VersionlessAuthURL() + "/"); err == nil {
						_ = resp.Body.Close()
					}
				})
			}
			stopped := make(chan struct{})
			go func() {
				s.Stop()
				close(stopped)
			}()
			g.Eventually(stopped).WithTimeout(5 * time.Second).Should(BeClosed())
			wg.Wait()
			g.Expect(s.Start()).To(Succeed())
		}
	})

	t.Run("When the password is wrong, it should answer 401 and record the method", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		body := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"u-demo","password":"nope"}}}}}`
		resp, err := httpClient(s).Post(s.AuthURL()+"/auth/tokens", "application/json", strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
		reqs := s.Requests()
		g.Expect(reqs).To(HaveLen(1))
		g.Expect(reqs[0].AuthMethod).To(Equal(AuthMethodPassword))
		g.Expect(reqs[0].Status).To(Equal(http.StatusUnauthorized))
	})

	t.Run("When many clients call at once, it should record every request", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		tok := token(t, g, s)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if resp, err := getZones(g, s, tok); err == nil {
					_ = resp.Body.Close()
				}
			})
		}
		wg.Wait()
		g.Expect(s.Count(EndpointCompute)).To(Equal(10))
		g.Expect(s.CountTokenRequests()).To(Equal(1))
	})
}

func TestWriteCloudsYAML(t *testing.T) {
	t.Parallel()
	t.Run("When clouds.yaml is written, it should name the CA file and the fake's auth URL", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		path, err := s.WriteCloudsYAML(t.TempDir(), CloudOptions{Versionless: true})
		g.Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())

		var doc struct {
			Clouds map[string]struct {
				CACert string `json:"cacert"`
				Auth   struct {
					AuthURL string `json:"auth_url"`
				} `json:"auth"`
			} `json:"clouds"`
		}
		g.Expect(yaml.Unmarshal(data, &doc)).To(Succeed())
		g.Expect(doc.Clouds).To(HaveKey("openstack"))
		g.Expect(doc.Clouds["openstack"].Auth.AuthURL).To(Equal(s.VersionlessAuthURL()))
		ca, err := os.ReadFile(doc.Clouds["openstack"].CACert)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ca).To(Equal(s.CACertPEM()))
	})
}
