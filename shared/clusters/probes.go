package clusters

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// probes serves the kubelet's /healthz and /readyz from the moment a manager begins to be built,
// before anything asks an API server anything.
//
// controller-runtime opens its probe listener only once the manager is built, and building one
// asks the API server for its resources (the REST mapping of the caches' narrowed objects): a
// read that waits while the API server refuses connections (see awaitAPIServer). An operator
// started while it cannot reach its API server (an outage, or a NetworkPolicy that does not let
// its pod out) would then answer no probe at all, and the kubelet would kill it every minute or
// so and back off up to five minutes between starts, however soon the API server came back.
// Here the process is alive from the start (/healthz) and ready once its caches have synced
// (/readyz), so the kubelet sees a waiting operator as alive and not ready, and the operator
// carries on the moment its API server answers.
type probes struct {
	srv *http.Server
	// addr is the address the probes listen on.
	addr string
	// ready is the readiness check once the manager exists; until then /readyz says the
	// manager is being built.
	ready atomic.Pointer[func(*http.Request) error]
	done  chan struct{}
}

// probeShutdownTimeout bounds how long in-flight probes may finish at shutdown.
const probeShutdownTimeout = 5 * time.Second

// startProbes listens on addr and serves the probes until Start's context ends (or close).
func startProbes(addr string) (*probes, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for probes on %s: %w", addr, err)
	}
	p := &probes{done: make(chan struct{}), addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", p.readyz)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

func (p *probes) readyz(w http.ResponseWriter, r *http.Request) {
	check := p.ready.Load()
	if check == nil {
		http.Error(w, "not ready: the manager is being built (its API server has not answered yet)", http.StatusInternalServerError)
		return
	}
	if err := (*check)(r); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// setReady installs the readiness check of the built manager.
func (p *probes) setReady(check func(*http.Request) error) { p.ready.Store(&check) }

// close stops serving at once.
func (p *probes) close() {
	_ = p.srv.Close()
	<-p.done
}

// Start serves until ctx ends, then shuts the server down; it makes probes a manager runnable,
// so that the probes end with the manager.
func (p *probes) Start(ctx context.Context) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), probeShutdownTimeout)
	defer cancel()
	err := p.srv.Shutdown(sctx)
	<-p.done
	return err
}

// NeedLeaderElection is false: a standby replica answers its probes too.
func (p *probes) NeedLeaderElection() bool { return false }
