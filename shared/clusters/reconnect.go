package clusters

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// redialInterval is how often a request that found no API server dials it again.
const redialInterval = 250 * time.Millisecond

// awaitAPIServer returns a copy of cfg whose bodiless GET requests (every list and watch of the
// informers) wait for an API server that refuses connections, or that accepts them but does not
// finish the TLS handshake (a kube-apiserver just started on a busy host), dialling it again every
// redialInterval until it answers or the request's context ends, instead of failing.
//
// client-go's reflector backs off after every failed list or watch, doubling from 0.8 s to
// 30 s plus up to as much again of jitter (tools/cache/reflector.go, not configurable through
// controller-runtime), and resets only after two minutes without failure. After a minute of
// "connection refused" an informer would try again only 30 to 60 s after the API server is
// back, and miss until then what changes there. A request that waits instead is, to the
// reflector, a slow success: it accumulates no backoff and completes as soon as the API server
// listens again. Requests with a body (writes) still fail at once, and so does everything when
// the context ends, so a manager shuts down as promptly as before. Nothing is sent while the
// API server is there, so the wrapper costs no request at rest.
//
// With onlyManaged, a request waits only when its context carries the mark Manager.Start puts
// on the manager's context (see withManagerContext).
func awaitAPIServer(cfg *rest.Config, log logr.Logger, onlyManaged bool) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	host := cfg.Host
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &awaitTransport{next: rt, log: log.WithValues("server", host), onlyManaged: onlyManaged, interval: redialInterval}
	})
	return cfg
}

// awaitTransport is the http.RoundTripper of awaitAPIServer.
type awaitTransport struct {
	next        http.RoundTripper
	log         logr.Logger
	onlyManaged bool
	interval    time.Duration
	// absent is set while requests wait for the API server, so that an outage is logged once
	// when it is noticed and once when it ends, not for every waiting request.
	absent atomic.Bool
}

// RoundTrip implements http.RoundTripper.
func (t *awaitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.mayWait(req) {
		return t.next.RoundTrip(req)
	}
	var timer *time.Timer
	for {
		var handshake handshakeTrace
		resp, err := t.next.RoundTrip(handshake.traced(req))
		// An answer ends the wait even when a connection dialled for the request failed its
		// handshake: net/http sends a request on whichever connection is ready first, and an
		// idle one freed meanwhile may have carried it.
		if err == nil || (!serverAbsent(err) && !handshake.interrupted()) {
			if t.absent.CompareAndSwap(true, false) {
				t.log.Info("The API server accepts connections again")
			}
			return resp, err
		}
		if t.absent.CompareAndSwap(false, true) {
			t.log.Info("The API server does not answer; reads wait for it", "retryInterval", t.interval, "err", err.Error())
		}
		if timer == nil {
			timer = time.NewTimer(t.interval)
			defer timer.Stop()
		} else {
			timer.Reset(t.interval)
		}
		select {
		case <-req.Context().Done():
			return nil, err
		case <-timer.C:
		}
	}
}

// WrappedRoundTripper lets client-go's utilities (closing idle connections) reach the transport
// underneath.
func (t *awaitTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// mayWait reports whether req may be sent again after a refused dial: a GET without a body,
// which nothing reached, and, with onlyManaged, one sent on behalf of a running manager.
func (t *awaitTransport) mayWait(req *http.Request) bool {
	if req.Method != http.MethodGet || (req.Body != nil && req.Body != http.NoBody) {
		return false
	}
	return !t.onlyManaged || req.Context().Value(managerContextKey{}) != nil
}

// serverAbsent reports whether err means that nothing listens at the API server's address (the
// process is stopped or restarting, a Service has no ready endpoint) or that there is no route
// to it: the dial failed, so the request was not sent.
func serverAbsent(err error) bool {
	return err != nil && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH))
}

// handshakeTrace records how the TLS handshake of a connection dialled for one request ended.
type handshakeTrace struct {
	err atomic.Pointer[error]
}

// traced returns req with a trace that records into h. The handshake may run on the transport's
// dialling goroutine, hence the atomic.
func (h *handshakeTrace) traced(req *http.Request) *http.Request {
	trace := &httptrace.ClientTrace{TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
		if err != nil {
			h.err.Store(&err)
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// interrupted reports whether the request's connection failed in its TLS handshake because the
// server did not complete it in time or closed the connection: the request was not sent. A
// kube-apiserver that has just started on a loaded host listens before it keeps up with
// handshakes, and net/http gives up on one after 10 s. A certificate the client rejects, or an
// alert from the server, is a configuration error and is not waited out.
func (h *handshakeTrace) interrupted() bool {
	p := h.err.Load()
	if p == nil {
		return false
	}
	err := *p
	var timeout net.Error
	return (errors.As(err, &timeout) && timeout.Timeout()) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// managerContextKey marks the context of a running manager.
type managerContextKey struct{}

// withManagerContext marks ctx as the context of a running manager. controller-runtime runs
// leader election on a context that keeps ctx's values, so the lease lock's reads for acquiring
// and renewing the lease carry the mark and may wait for the API server, while the read that
// releases the lease at shutdown runs on a fresh context (client-go's LeaderElector.release)
// and fails at once: a manager stopped during an outage still exits promptly.
func withManagerContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, managerContextKey{}, true)
}
