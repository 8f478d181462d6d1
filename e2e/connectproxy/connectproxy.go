// Package connectproxy is a small HTTP CONNECT proxy for tests, listening on loopback. It resolves
// only the host names it is given, to the addresses it is given, so that a client reaching such a
// name proves that it went through the proxy (nothing else can resolve it), and so that the proxy
// never dials anything the test did not name. It records every CONNECT, and can be told to refuse
// them, as a proxy whose policy forbids a destination does.
package connectproxy

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configure a Proxy.
type Options struct {
	// Hosts maps the host names the proxy can reach to the IP address it dials for them, for
	// example "openstack.onion" to "127.0.0.1". A CONNECT to any other host is answered
	// 502 Bad Gateway, as a proxy answers for a name it cannot resolve.
	Hosts map[string]string
}

// Connect is one CONNECT request the proxy received.
type Connect struct {
	// Target is the host:port the client asked for.
	Target string
	// User is the user name of the request's Proxy-Authorization (basic), empty without one.
	// The password is never kept.
	User string
	// Status is what the proxy answered: 200 when it opened the tunnel.
	Status int
}

// Proxy is a running CONNECT proxy. Its methods are safe for concurrent use.
type Proxy struct {
	hosts map[string]string
	ln    net.Listener

	mu       sync.Mutex
	refuse   int
	connects []Connect
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// Start listens on a free loopback port and serves until Close.
func Start(o Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p := &Proxy{hosts: map[string]string{}, ln: ln, conns: map[net.Conn]struct{}{}}
	for name, ip := range o.Hosts {
		p.hosts[strings.ToLower(name)] = ip
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's URL, http://<Addr>.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Refuse makes the proxy answer every following CONNECT with status (for example 403, a
// destination its policy forbids); zero opens tunnels again.
func (p *Proxy) Refuse(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = status
}

// Connects returns the CONNECT requests received so far, in order.
func (p *Proxy) Connects() []Connect {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Connect(nil), p.connects...)
}

// Close stops listening, so that new connections are refused, closes every open connection and
// tunnel, and waits for them. It is safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers an open connection, or reports false when the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serve(c)
		}()
	}
}

// serve handles one client connection: one CONNECT request, then the tunnel.
func (p *Proxy) serve(client net.Conn) {
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(client)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = client.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		answer(client, http.StatusMethodNotAllowed)
		return
	}
	target := req.Host
	status, upstream := p.open(target)
	p.mu.Lock()
	p.connects = append(p.connects, Connect{Target: target, User: basicUser(req.Header.Get("Proxy-Authorization")), Status: status})
	p.mu.Unlock()
	if upstream == nil {
		answer(client, status)
		return
	}
	if !p.track(upstream) {
		_ = upstream.Close()
		return
	}
	defer p.untrack(upstream)
	answer(client, http.StatusOK)

	// The client speaks first (a TLS ClientHello), but anything it sent early is in br.
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(upstream, br)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upstream)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

// open decides the answer to a CONNECT to target and, for 200, dials the tunnel's far end.
func (p *Proxy) open(target string) (int, net.Conn) {
	p.mu.Lock()
	refuse := p.refuse
	p.mu.Unlock()
	if refuse != 0 {
		return refuse, nil
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return http.StatusBadRequest, nil
	}
	ip, ok := p.hosts[strings.ToLower(host)]
	if !ok {
		return http.StatusBadGateway, nil
	}
	upstream, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), 5*time.Second)
	if err != nil {
		return http.StatusBadGateway, nil
	}
	return http.StatusOK, upstream
}

// answer writes a bodiless response to a CONNECT request.
func answer(c net.Conn, status int) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(status))
}

// closeWrite half-closes a TCP connection, so the other side sees the end of the stream.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// basicUser returns the user name of a basic Proxy-Authorization header.
func basicUser(header string) string {
	enc, ok := strings.CutPrefix(header, "Basic ")
	if !ok {
		return ""
	}
	dec, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return ""
	}
	user, _, _ := strings.Cut(string(dec), ":")
	return user
}
