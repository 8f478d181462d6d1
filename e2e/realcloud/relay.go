package realcloud

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// newTransport is the transport of every host-side client of the cloud (HTTPClient).
func (c *Cloud) newTransport() (*http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.opts.CAPEM) {
		return nil, errors.New("realcloud: Options.CAPEM holds no certificate")
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		// The cloud is on this host: a proxy from the environment must not intervene.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, c.hostAddr(addr))
		},
		// The handshake still verifies the address in the URL, PublicIP: the dial mapping
		// changes where the bytes go, not whom the client believes it talks to.
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

// hostAddr maps a dial to PublicIP at a public endpoint's port to the TLS proxy on the host's
// loopback behind it; any other address is dialled as it is. On the host, PublicIP is usually
// nobody's address (in a node's namespace a relay holds it), or, for a loopback PublicIP, one
// where a test's relay may listen: either way the proxy itself is the shorter way.
func (c *Cloud) hostAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.Equal(c.opts.PublicIP) {
		return addr
	}
	if n, err := strconv.Atoi(port); err != nil || !c.proxies.isPublicPort(n) {
		return addr
	}
	return net.JoinHostPort(proxyHost, port)
}

// HTTPClient is an HTTP client for the cloud's public endpoints from the host, on which
// gophercloud clients outside this package are built (ProviderClient.HTTPClient) as Client
// builds its own: it trusts the cloud's CA, ignores proxies from the environment, and dials
// PublicIP at a public endpoint's port on the host's loopback, where the TLS proxies listen,
// so that it works whatever address the catalog names and without any relay. The clients
// share one transport, and with it their idle connections.
func (c *Cloud) HTTPClient() *http.Client {
	return &http.Client{Transport: c.transport}
}

// RelayPublic opens, with listen, a listener at PublicIP on the port of every public endpoint
// (Keystone, Placement, Nova, Cinder and the Neutron and Glance stub), and relays each
// connection it accepts, byte for byte, to the endpoint's TLS proxy on the host's loopback: TLS
// runs end to end between the client and the proxy. listen is how the caller reaches another
// network namespace, a real node's (realnode's Node.Listen), whose clients cannot reach the
// host's loopback; the listeners are served from this process, in the host's namespace.
//
// It may be called once per namespace. stop closes this call's listeners and the connections
// they relay, and returns once its goroutines have ended: a node's namespace can go away while
// the cloud serves other nodes, and an open listener would keep it referenced. Stop of the cloud
// closes what no stop closed; stop after it, or a second time, does nothing. A failed listen
// closes what this call opened.
func (c *Cloud) RelayPublic(listen func(network, addr string) (net.Listener, error)) (stop func() error, err error) {
	if c.proxies == nil {
		return nil, errors.New("relaying the public endpoints: the cloud has not started")
	}
	var opened []net.Listener
	var backends []string
	for _, svc := range publicServices {
		port := strconv.Itoa(c.proxies.ports[svc])
		addr := net.JoinHostPort(c.opts.PublicIP.String(), port)
		l, err := listen("tcp", addr)
		if err != nil {
			for _, o := range opened {
				_ = o.Close()
			}
			return nil, fmt.Errorf("listening at %s for %s's public endpoint: %w", addr, svc, err)
		}
		opened = append(opened, l)
		backends = append(backends, net.JoinHostPort(proxyHost, port))
	}
	g, err := c.relays.serve(opened, backends, c.proxies.log)
	if err != nil {
		return nil, fmt.Errorf("relaying the public endpoints: %w", err)
	}
	return g.close, nil
}

// relays are what RelayPublic and ServeMetadata serve: one relayGroup per RelayPublic call, and
// metadata servers. Stop closes them all. The zero value is ready for use.
type relays struct {
	mu      sync.Mutex
	closed  bool
	groups  map[*relayGroup]struct{}
	servers map[*http.Server]struct{}
}

// relayGroup is one RelayPublic call's listeners and the connections they relay; its close is
// the call's stop.
type relayGroup struct {
	parent *relays
	errLog *log.Logger
	done   chan struct{} // closed by close: ends an accept loop's pause

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup // accept loops and relayed connections

	closeOnce sync.Once
	closeErr  error
}

// errStopping refuses what would start after Stop began.
var errStopping = errors.New("the cloud is stopping")

// serve relays each listener's connections to the backend of the same index, as a new group;
// once close has begun, it closes the listeners and refuses.
func (r *relays) serve(ls []net.Listener, backends []string, errLog *log.Logger) (*relayGroup, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, l := range ls {
			_ = l.Close()
		}
		return nil, errStopping
	}
	g := &relayGroup{parent: r, errLog: errLog, done: make(chan struct{}), listeners: ls, conns: map[net.Conn]struct{}{}}
	if r.groups == nil {
		r.groups = map[*relayGroup]struct{}{}
	}
	r.groups[g] = struct{}{}
	for i, l := range ls {
		g.wg.Go(func() { g.accept(l, backends[i]) })
	}
	return g, nil
}

// accept relays l's connections until l closes. Other accept errors (out of file descriptors)
// are retried after a pause that doubles up to a second, as net/http's server does.
func (g *relayGroup) accept(l net.Listener, backend string) {
	var pause time.Duration
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			g.errLog.Printf("relay %s -> %s: accepting: %v; retrying in %s", l.Addr(), backend, err, pause)
			select {
			case <-g.done:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		if !g.track(conn) {
			_ = conn.Close()
			return
		}
		// The accept loop is counted in wg while it adds: Add never races close's Wait at zero.
		g.wg.Go(func() {
			defer g.untrack(conn)
			g.relay(conn, backend)
		})
	}
}

// relay copies between client and a new connection to backend until both directions end.
func (g *relayGroup) relay(client net.Conn, backend string) {
	defer func() { _ = client.Close() }()
	server, err := net.DialTimeout("tcp", backend, 10*time.Second)
	if err != nil {
		g.errLog.Printf("relay %s -> %s: %v", client.RemoteAddr(), backend, err)
		return
	}
	if !g.track(server) {
		_ = server.Close()
		return
	}
	defer g.untrack(server)
	defer func() { _ = server.Close() }()
	var wg sync.WaitGroup
	wg.Go(func() { copyHalf(server, client) })
	wg.Go(func() { copyHalf(client, server) })
	wg.Wait()
}

// copyHalf copies one direction. At its end of stream it passes the half-close on, so that a
// client that shuts down its write side still gets its answer; after an error it closes both
// connections, which ends the other direction too.
func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
		return
	}
	_ = dst.Close()
	_ = src.Close()
}

// track records a relayed connection for close; false once close has begun.
func (g *relayGroup) track(conn net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.conns[conn] = struct{}{}
	return true
}

func (g *relayGroup) untrack(conn net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.conns, conn)
}

// close closes the group's listeners and relayed connections, waits for its goroutines and
// returns the listeners' close errors; later calls return the same.
func (g *relayGroup) close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed = true
		close(g.done)
		var errs []error
		for _, l := range g.listeners {
			// Closed already: by the cloud's Stop, or from under the relay by its namespace.
			if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, fmt.Errorf("closing relay listener %s: %w", l.Addr(), err))
			}
		}
		for conn := range g.conns {
			_ = conn.Close()
		}
		g.mu.Unlock()
		g.wg.Wait()
		g.parent.mu.Lock()
		delete(g.parent.groups, g)
		g.parent.mu.Unlock()
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

// addServer records a metadata server for close; errStopping once close has begun.
func (r *relays) addServer(srv *http.Server) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errStopping
	}
	if r.servers == nil {
		r.servers = map[*http.Server]struct{}{}
	}
	r.servers[srv] = struct{}{}
	return nil
}

func (r *relays) removeServer(srv *http.Server) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.servers, srv)
}

// close closes every relay group and metadata server, and waits for the relays' goroutines to
// end. Later calls do nothing.
func (r *relays) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	groups := slices.Collect(maps.Keys(r.groups))
	for srv := range r.servers {
		_ = srv.Close()
	}
	r.mu.Unlock()
	for _, g := range groups {
		_ = g.close()
	}
}
