package openstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"golang.org/x/net/http/httpproxy"
)

// ProxySettings are HTTP proxy settings in the form of the conventional environment variables
// HTTP_PROXY, HTTPS_PROXY and NO_PROXY: the status of OpenShift's cluster-wide Proxy, or what
// HyperShift's control-plane operator puts into the operator's environment.
type ProxySettings struct {
	// HTTPProxy is the proxy of http:// requests.
	HTTPProxy string
	// HTTPSProxy is the proxy of https:// requests. Unlike curl, Go never falls back to
	// HTTPProxy for them.
	HTTPSProxy string
	// NoProxy lists the hosts reached directly, comma-separated.
	NoProxy string
}

// ProxyFunc returns the function Config.Proxy wants for s, with the semantics of
// golang.org/x/net/http/httpproxy, which net/http's ProxyFromEnvironment also uses:
//
//   - An https:// request uses HTTPSProxy and an http:// request HTTPProxy; an empty one means
//     direct. A proxy without a scheme ("proxy.example.com:3128") is taken as http://; the
//     schemes http, https, socks5 and socks5h are understood.
//   - NoProxy entries are host names, which also match every subdomain ("example.com" and
//     ".example.com" both match "api.example.com"), "*.example.com" (subdomains only), IP
//     addresses, CIDR blocks (they match IP literals in URLs, not names that resolve into
//     them), any of these with ":port" to match only that port, and "*", which disables the
//     proxy.
//   - "localhost" and loopback IP literals are never proxied, whatever NoProxy says.
//
// It returns nil when s sets no proxy, and an *Error with ReasonInvalidProxy when a proxy is not a
// usable URL; the error never repeats the value, which may hold credentials.
func ProxyFunc(s ProxySettings) (func(*http.Request) (*url.URL, error), error) {
	if s.HTTPProxy == "" && s.HTTPSProxy == "" {
		return nil, nil
	}
	for _, p := range []struct{ name, value string }{{"httpProxy", s.HTTPProxy}, {"httpsProxy", s.HTTPSProxy}} {
		if p.value == "" {
			continue
		}
		if _, err := parseProxy(p.value); err != nil {
			return nil, &Error{Reason: ReasonInvalidProxy, Op: "reading the proxy settings", detail: p.name + " " + err.Error()}
		}
	}
	cfg := httpproxy.Config{HTTPProxy: s.HTTPProxy, HTTPSProxy: s.HTTPSProxy, NoProxy: s.NoProxy}
	forURL := cfg.ProxyFunc()
	return func(req *http.Request) (*url.URL, error) { return forURL(req.URL) }, nil
}

// parseProxy parses a proxy as httpproxy does (a value without a scheme is taken as http://) and
// checks that net/http can use it. It is stricter than httpproxy, which also prefixes http:// to
// a value that has a scheme but does not parse, and so turns "http://[::1" into a proxy named
// "http". Its errors never contain the value.
func parseProxy(value string) (*url.URL, error) {
	if !strings.Contains(value, "://") {
		value = "http://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return nil, errors.New("is not a URL")
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("has the unsupported scheme %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("names no host")
	}
	return u, nil
}

// ProxyError is a failure of the HTTP proxy between the operator and OpenStack: the proxy could not
// be reached, or it refused to open a tunnel to the OpenStack API.
type ProxyError struct {
	// Proxy is the proxy's host:port, never its credentials.
	Proxy string
	// StatusCode is the proxy's answer to CONNECT; zero when it gave none.
	StatusCode int
	// Err is the transport's error, if any.
	Err error
}

// Error implements error.
func (e *ProxyError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("proxy %s answered CONNECT with %s", e.Proxy, statusText(e.StatusCode))
	}
	return fmt.Sprintf("proxy %s: %v", e.Proxy, e.Err)
}

// Unwrap returns the transport's error.
func (e *ProxyError) Unwrap() error { return e.Err }

// statusText is "403 Forbidden": the code and Go's name for it, never the proxy's own reason
// phrase, so a message built from it is the same for every proxy.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprint(code)
}

// proxyAddress returns the proxy's host:port, with the scheme's default port when the URL names
// none. It never includes the credentials a proxy URL may carry.
func proxyAddress(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	switch u.Scheme {
	case "https":
		port = "443"
	case "socks5", "socks5h":
		port = "1080"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// refusedConnect is the Transport.OnProxyConnectResponse hook: a proxy that answers CONNECT with
// anything but 200 becomes a *ProxyError that names it (net/http's own error is just the reason
// phrase, which does not say that a proxy answered).
func refusedConnect(_ context.Context, proxy *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return &ProxyError{Proxy: proxyAddress(proxy), StatusCode: resp.StatusCode}
}

// proxyTransport turns net/http's failures to connect to the proxy (a *net.OpError with Op
// "proxyconnect") into a *ProxyError that names the proxy.
type proxyTransport struct {
	base  http.RoundTripper
	proxy func(*http.Request) (*url.URL, error)
}

// RoundTrip implements http.RoundTripper.
func (t proxyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	var opErr *net.OpError
	if err == nil || !errors.As(err, &opErr) || opErr.Op != "proxyconnect" {
		return resp, err
	}
	// The proxy function is pure: asking it again gives the proxy the transport dialled.
	u, perr := t.proxy(req)
	if perr != nil || u == nil {
		return resp, err
	}
	return nil, &ProxyError{Proxy: proxyAddress(u), Err: err}
}

// findProxyError returns the *ProxyError in err's chain, looking into gophercloud's
// re-authentication error, which does not unwrap.
func findProxyError(err error) *ProxyError {
	var pe *ProxyError
	if errors.As(err, &pe) {
		return pe
	}
	var reauth *gophercloud.ErrUnableToReauthenticate
	if errors.As(err, &reauth) {
		if pe := findProxyError(reauth.ErrReauth); pe != nil {
			return pe
		}
		return findProxyError(reauth.ErrOriginal)
	}
	return nil
}
