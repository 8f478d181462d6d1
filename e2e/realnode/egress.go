package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// egressProxy is the HTTP CONNECT proxy behind the API servers' "cluster" egress selection
// (localcluster.RealNodes.EgressSocket). The API servers run on the host and cannot route to
// node or pod addresses, which exist only inside node network namespaces; for every CONNECT the
// proxy finds the namespace that owns the requested address and dials from inside it.
//
// Only addresses of this run's namespaces and the host's loopback (for URL-addressed webhooks
// on 127.0.0.1) are dialled; any other target is refused, so nothing reaches beyond the machine.
type egressProxy struct {
	ln     net.Listener
	routes func(ip net.IP) (netnsPath string, ok bool)
	logf   func(format string, args ...any)
	set    connSet
}

// newEgressProxy serves the proxy on a unix socket at path. routes maps a target IP to the
// network namespace it lives in.
func newEgressProxy(path string, routes func(net.IP) (string, bool), logf func(string, ...any)) (*egressProxy, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on egress socket %s: %w", path, err)
	}
	// Only the API servers, running as the same user, connect.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("restricting egress socket %s: %w", path, err)
	}
	p := &egressProxy{ln: ln, routes: routes, logf: logf}
	p.set.init()
	p.set.serve(ln, p.handle)
	return p, nil
}

// Close stops the proxy and ends every tunnel through it.
func (p *egressProxy) Close() error { return p.set.close(p.ln) }

// handle serves one tunnel: it reads the CONNECT request, dials the target, answers 200 and
// splices the two connections.
func (p *egressProxy) handle(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(forwardDialTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		p.logf("Egress proxy: reading a CONNECT request: %v", err)
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = fmt.Fprint(c, "HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n")
		p.logf("Egress proxy: refusing a %s request: only CONNECT is served", req.Method)
		return
	}
	target, err := p.dial(p.set.ctx, req.Host)
	if err != nil {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n%v", err)
		p.logf("Egress proxy: %v", err)
		return
	}
	if !p.set.track(target) {
		return
	}
	defer p.set.untrack(target)
	if _, err := fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	splice(&bufferedConn{Conn: c, r: br}, target)
}

// dial connects to hostport from the namespace that owns its address, or from the host for a
// loopback address.
func (p *egressProxy) dial(ctx context.Context, hostport string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("CONNECT target %q: %w", hostport, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("CONNECT target %q is not an IP address", hostport)
	}
	ctx, cancel := context.WithTimeout(ctx, forwardDialTimeout)
	defer cancel()
	if ip.IsLoopback() {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", hostport)
	}
	ns, ok := p.routes(ip)
	if !ok {
		return nil, fmt.Errorf("CONNECT target %s is not an address of any real node of this run", hostport)
	}
	return DialIn(ctx, ns, "tcp", hostport)
}

// bufferedConn is the client side of a tunnel: reads first drain what the request reader
// buffered beyond the CONNECT request.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads the tunnelled bytes, including any read ahead with the request.
func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying connection when it supports that.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("half-close unsupported")
}
