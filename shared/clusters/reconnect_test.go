package clusters

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// refusingTransport refuses the first refusals dials, as a stopped API server does, and then
// answers 200.
type refusingTransport struct {
	refusals int32
	attempts atomic.Int32
}

func (f *refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	if f.attempts.Add(1) <= f.refusals {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

func TestAwaitTransport(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Millisecond
	managed := withManagerContext(context.Background())

	for _, tc := range []struct {
		name        string
		method      string
		body        io.Reader
		ctx         context.Context
		onlyManaged bool
		// wantAttempts is how many dials the request makes; wantOK whether it succeeds.
		wantAttempts int32
		wantOK       bool
	}{
		{name: "When a GET finds the API server down, it should dial again until it answers",
			method: http.MethodGet, ctx: context.Background(), wantAttempts: 4, wantOK: true},
		{name: "When a request with a body finds the API server down, it should fail at once",
			method: http.MethodPut, body: strings.NewReader("{}"), ctx: context.Background(), wantAttempts: 1},
		{name: "When a POST without a body finds the API server down, it should fail at once",
			method: http.MethodPost, ctx: context.Background(), wantAttempts: 1},
		{name: "When only a manager's requests wait and a GET comes from a fresh context, it should fail at once",
			method: http.MethodGet, ctx: context.Background(), onlyManaged: true, wantAttempts: 1},
		{name: "When only a manager's requests wait and a GET comes from the manager's context, it should dial again until it answers",
			method: http.MethodGet, ctx: managed, onlyManaged: true, wantAttempts: 4, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			next := &refusingTransport{refusals: 3}
			rt := &awaitTransport{next: next, log: logr.Discard(), onlyManaged: tc.onlyManaged, interval: interval}
			req, err := http.NewRequestWithContext(tc.ctx, tc.method, "https://127.0.0.1:6443/api/v1/configmaps", tc.body)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := rt.RoundTrip(req)
			if tc.wantOK {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
				_ = resp.Body.Close()
			} else {
				g.Expect(serverAbsent(err)).To(BeTrue(), "the dial error is returned as it was")
			}
			g.Expect(next.attempts.Load()).To(Equal(tc.wantAttempts))
		})
	}

	t.Run("When the request's context ends while the API server is down, it should return the dial error promptly", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		next := &refusingTransport{refusals: 1 << 30}
		rt := &awaitTransport{next: next, log: logr.Discard(), interval: time.Hour}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:6443/api/v1/configmaps", nil)
		g.Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		g.Expect(serverAbsent(err)).To(BeTrue())
		g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	})

	t.Run("When the API server starts listening while a client's list waits, it should return the list", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		// A free port nothing listens on yet: dials to it are refused.
		var lc net.ListenConfig
		l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		g.Expect(l.Close()).To(Succeed())

		cfg := awaitAPIServer(&rest.Config{Host: "http://" + addr}, logr.Discard(), false)
		cs, err := kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`)
		})}
		t.Cleanup(func() { _ = srv.Close() })
		go func() {
			time.Sleep(3 * redialInterval)
			ln, err := lc.Listen(context.Background(), "tcp", addr)
			if err != nil {
				t.Errorf("listening on %s again: %v", addr, err)
				return
			}
			_ = srv.Serve(ln)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, listErr := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		g.Expect(listErr).NotTo(HaveOccurred())
		g.Expect(list.ResourceVersion).To(Equal("7"))
	})
}

// stallingListener accepts the first stalls connections and never answers on them, as a
// kube-apiserver that listens but does not keep up with handshakes yet; later connections go to
// the server. accepted counts every connection.
type stallingListener struct {
	net.Listener
	stalls   int32
	accepted atomic.Int32
	mu       sync.Mutex
	held     []net.Conn
}

func (l *stallingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.accepted.Add(1) > l.stalls {
			return c, nil
		}
		l.mu.Lock()
		l.held = append(l.held, c)
		l.mu.Unlock()
	}
}

func (l *stallingListener) Close() error {
	l.mu.Lock()
	for _, c := range l.held {
		_ = c.Close()
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// answeringAfterFailedDial is a transport on which the connection dialled for each request fails
// its TLS handshake, as on an API server that is slow to handshake, while an idle connection
// freed meanwhile carries the request, which gets its answer.
type answeringAfterFailedDial struct{ attempts atomic.Int32 }

func (f *answeringAfterFailedDial) RoundTrip(req *http.Request) (*http.Response, error) {
	f.attempts.Add(1)
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.TLSHandshakeDone != nil {
		trace.TLSHandshakeDone(tls.ConnectionState{}, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

func TestAwaitTransportAnswerAfterFailedHandshake(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	next := &answeringAfterFailedDial{}
	rt := &awaitTransport{next: next, log: logr.Discard(), interval: 10 * time.Millisecond}
	req, err := http.NewRequestWithContext(withManagerContext(t.Context()), http.MethodGet, "https://api.example/api", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := rt.RoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	_ = resp.Body.Close()
	g.Expect(next.attempts.Load()).To(Equal(int32(1)), "the answer is the request's, whatever became of the connection dialled for it")
}

func TestAwaitTransportHandshake(t *testing.T) {
	t.Parallel()
	// serve starts a TLS server whose first stalls connections get no handshake, and returns
	// its listener, URL and a client transport that trusts it and gives up on a handshake after a
	// second: soon, yet long enough for a real handshake under the race detector on a busy machine.
	serve := func(t *testing.T, stalls int32) (*stallingListener, string, *http.Transport) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "{}")
		}))
		l := &stallingListener{Listener: srv.Listener, stalls: stalls}
		srv.Listener = l
		srv.StartTLS()
		t.Cleanup(srv.Close)
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSHandshakeTimeout = time.Second
		t.Cleanup(tr.CloseIdleConnections)
		return l, srv.URL, tr
	}

	t.Run("When the API server accepts connections but times out their handshakes, a GET should dial again until it answers", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		l, url, tr := serve(t, 2)
		rt := &awaitTransport{next: tr, log: logr.Discard(), interval: 10 * time.Millisecond}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/api", nil)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := rt.RoundTrip(req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		_ = resp.Body.Close()
		g.Expect(l.accepted.Load()).To(Equal(int32(3)), "two stalled handshakes, then the answer")
	})

	t.Run("When the handshake times out on a write, it should fail at once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		l, url, tr := serve(t, 1)
		rt := &awaitTransport{next: tr, log: logr.Discard(), interval: 10 * time.Millisecond}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/api", strings.NewReader("{}"))
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		g.Expect(err).To(MatchError(ContainSubstring("TLS handshake timeout")))
		g.Expect(l.accepted.Load()).To(Equal(int32(1)))
	})

	t.Run("When the client rejects the API server's certificate, a GET should fail at once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		l, url, _ := serve(t, 0)
		// A transport that does not trust the test server's certificate authority.
		tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}, TLSHandshakeTimeout: time.Second}
		t.Cleanup(tr.CloseIdleConnections)
		rt := &awaitTransport{next: tr, log: logr.Discard(), interval: 10 * time.Millisecond}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/api", nil)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		var verify *tls.CertificateVerificationError
		g.Expect(errors.As(err, &verify)).To(BeTrue(), "got %v", err)
		g.Expect(l.accepted.Load()).To(Equal(int32(1)))
	})
}
