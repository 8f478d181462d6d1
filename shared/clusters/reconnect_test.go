package clusters

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
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
