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

// proxies are the public side of the cloud: one TLS listener per API, in front of the service's
// plain-HTTP listener, as the load balancer of a real cloud terminates TLS. The Host header and
// X-Forwarded-Proto pass through, so that the services (their proxy-header middleware is on)
// write public https links into version documents and pagination.
type proxies struct {
	servers []*http.Server
	public  map[service]string
	errLog  *os.File
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
	p := &proxies{public: map[service]string{}, errLog: errLog}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	serve := func(l net.Listener, h http.Handler) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(errLog, "", log.LstdFlags)}
		p.servers = append(p.servers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	backends := map[service]int{svcKeystone: c.ports.keystone, svcPlacement: c.ports.placement, svcNova: c.ports.nova, svcCinder: c.ports.cinder}
	for _, svc := range []service{svcKeystone, svcPlacement, svcNova, svcCinder, svcStub} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.close()
			return nil, fmt.Errorf("listening for %s's public endpoint: %w", svc, err)
		}
		p.public[svc] = "https://" + l.Addr().String()
		var h http.Handler = stubHandler{}
		if port, ok := backends[svc]; ok {
			h = reverseProxy(port, errLog)
		}
		serve(tls.NewListener(l, tlsConfig), h)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(c.ports.stub))
	if err != nil {
		p.close()
		return nil, fmt.Errorf("listening for the Neutron and Glance stub: %w", err)
	}
	serve(l, stubHandler{})
	return p, nil
}

// reverseProxy forwards to the service's plain-HTTP listener on port.
func reverseProxy(port int, errLog *os.File) *httputil.ReverseProxy {
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
		ErrorLog:  log.New(errLog, "", log.LstdFlags),
	}
}

// publicURL is the https base URL of svc's public endpoint.
func (p *proxies) publicURL(svc service) string { return p.public[svc] }

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
// needs either service fails visibly instead of pretending.
type stubHandler struct{}

func (stubHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
