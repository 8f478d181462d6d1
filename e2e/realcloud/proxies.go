package realcloud

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// service names one API of the cloud: its catalog entry and its listeners.
type service string

const (
	svcKeystone  service = "keystone"
	svcPlacement service = "placement"
	svcNova      service = "nova"
	svcCinder    service = "cinder"
	// svcStub answers for the absent Neutron and Glance (see stubHandler).
	svcStub service = "stub"
)

// publicServices are the APIs with a public endpoint, each behind a TLS proxy.
var publicServices = []service{svcKeystone, svcPlacement, svcNova, svcCinder, svcStub}

// proxyHost is where the TLS proxies listen, whatever address the catalog names (PublicIP): the
// host's clients reach them there through the dial mapping (HTTPClient), and the nodes' network
// namespaces through the relays (RelayPublic).
const proxyHost = "127.0.0.1"

// proxies are the public side of the cloud: one TLS listener per API, in front of the service's
// plain-HTTP listener, as the load balancer of a real cloud terminates TLS. The Host header and
// X-Forwarded-Proto pass through, so that the services (their proxy-header middleware is on)
// write public https links into version documents and pagination, at the address the client
// asked for: PublicIP.
type proxies struct {
	servers  []*http.Server
	ports    map[service]int // each public endpoint's port, on proxyHost and on PublicIP alike
	publicIP net.IP
	errLog   *os.File
	log      *log.Logger // over errLog: the proxies', relays' and metadata servers' errors
}

// startProxies listens on a free loopback port per API and serves TLS there with the caller's
// certificate. The stub gets a plain-HTTP listener of its own as well: its internal endpoint.
func (c *Cloud) startProxies() (*proxies, error) {
	cert, err := tls.X509KeyPair(c.opts.CertPEM, c.opts.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading serving certificate: %w", err)
	}
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		return nil, err
	}
	errLog, err := os.OpenFile(filepath.Join(c.LogDir(), "tls-proxy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &proxies{ports: map[service]int{}, publicIP: c.opts.PublicIP, errLog: errLog, log: log.New(errLog, "", log.LstdFlags)}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	serve := func(l net.Listener, h http.Handler) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: p.log}
		p.servers = append(p.servers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	backends := map[service]int{svcKeystone: c.ports.keystone, svcPlacement: c.ports.placement, svcNova: c.ports.nova, svcCinder: c.ports.cinder}
	for _, svc := range publicServices {
		l, err := net.Listen("tcp", net.JoinHostPort(proxyHost, "0"))
		if err != nil {
			p.close()
			return nil, fmt.Errorf("listening for %s's public endpoint: %w", svc, err)
		}
		p.ports[svc] = l.Addr().(*net.TCPAddr).Port
		var h http.Handler = stubHandler{p.log}
		if port, ok := backends[svc]; ok {
			h = reverseProxy(port, p.log)
		}
		serve(tls.NewListener(l, tlsConfig), h)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(c.ports.stub))
	if err != nil {
		p.close()
		return nil, fmt.Errorf("listening for the Neutron and Glance stub: %w", err)
	}
	serve(l, stubHandler{p.log})
	return p, nil
}

// reverseProxy forwards to the service's plain-HTTP listener on port.
func reverseProxy(port int, errLog *log.Logger) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.SetXForwarded()
		},
		// A new connection per request: uwsgi's HTTP router closes a kept-alive connection
		// after a response without a length (a 204), and a POST sent on it in that moment
		// cannot be retried. Loopback connections are cheap.
		Transport: &http.Transport{DisableKeepAlives: true},
		ErrorLog:  errLog,
	}
}

// publicURL is the https base URL of svc's public endpoint, at PublicIP.
func (p *proxies) publicURL(svc service) string {
	return "https://" + net.JoinHostPort(p.publicIP.String(), strconv.Itoa(p.ports[svc]))
}

// isPublicPort says whether port is one of the public endpoints'.
func (p *proxies) isPublicPort(port int) bool {
	for _, n := range p.ports {
		if n == port {
			return true
		}
	}
	return false
}

func (p *proxies) close() {
	for _, s := range p.servers {
		_ = s.Close()
	}
	_ = p.errLog.Close()
}

// stubHandler is the harness's stand-in for Neutron and Glance, which the cloud does not run:
// servers have no networks and boot from volumes, but nova-api still asks Neutron about ports
// and extensions when it creates a server, and the openstack client wants an image endpoint in
// the catalog to create a volume. Every GET gets an empty collection named after the last path
// element ("/v2.0/ports" -> {"ports": []}); anything else gets 501, so that a flow that really
// needs either service fails visibly instead of pretending. Each request is logged (to
// tls-proxy.log): what the services asked of the absent services is otherwise nowhere.
type stubHandler struct{ log *log.Logger }

func (h stubHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.log.Printf("Neutron and Glance stub: %s %s", r.Method, r.URL.RequestURI())
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusNotImplemented)
		_ = json.NewEncoder(w).Encode(map[string]any{"NotImplemented": map[string]any{
			"message": "realcloud runs no Neutron or Glance: " + r.Method + " " + r.URL.Path, "code": http.StatusNotImplemented}})
		return
	}
	name := strings.TrimSuffix(path.Base(r.URL.Path), ".json")
	if name == "/" || name == "." || strings.HasPrefix(name, "v") && strings.Trim(name[1:], "0123456789.") == "" {
		// A version document: the root or "/v2.0", "/v2": nothing a client of this cloud reads.
		name = "versions"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{name: []any{}})
}
