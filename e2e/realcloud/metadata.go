package realcloud

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// Nova's metadata API runs in nova-api (enabled_apis), on loopback, in the mode a cloud with
// Neutron runs it ([neutron] service_metadata_proxy): it does not look the instance up by the
// requester's address (which needs Neutron's ports) but trusts the instance named by a proxy
// that proves the shared secret. In a real cloud that proxy is Neutron's metadata agent, behind
// the haproxy at 169.254.169.254 in each network's namespace; here it is ServeMetadata.
//
// The headers and the signature are those nova/api/metadata/handler.py checks
// (_handle_instance_id_request, _validate_shared_secret): X-Instance-ID, X-Tenant-ID (which
// must equal the instance's project, or the answer is 404), X-Instance-ID-Signature (the hex
// HMAC-SHA256 of the instance ID keyed with metadata_proxy_shared_secret) and X-Forwarded-For
// (the requester's address, which Nova only logs and passes to the instance's metadata).
// A request that carries X-Metadata-Provider takes another path (a load balancer's, with its
// own signature); the proxy never lets that header through.
const (
	headerInstanceID        = "X-Instance-ID"
	headerTenantID          = "X-Tenant-ID"
	headerInstanceSignature = "X-Instance-ID-Signature"
	headerForwardedFor      = "X-Forwarded-For"
)

// metadataSignature is X-Instance-ID-Signature for instanceID.
func metadataSignature(secret, instanceID string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(instanceID))
	return hex.EncodeToString(mac.Sum(nil))
}

// ServeMetadata serves Nova's metadata API on l for server serverID, as Neutron's metadata
// proxy would for a node whose server it is: each request goes to Nova's metadata listener
// with the headers that name the server, its project (the member's: CreateServer's servers
// are the member's) and the signature that proves them, so the answer (meta_data.json's uuid
// and availability_zone, which the driver's node service reads) is Nova's own. l is typically
// a node's 169.254.169.254:80 (realnode's Node.Listen).
//
// It blocks, as http.Serve does, until l is closed, which is the caller's to do, or until the
// cloud stops; it then returns nil, and otherwise the error that ended it.
func (c *Cloud) ServeMetadata(l net.Listener, serverID string) error {
	if c.proxies == nil {
		return errors.New("serving metadata: the cloud has not started")
	}
	target := &url.URL{Scheme: "http", Host: net.JoinHostPort(proxyHost, strconv.Itoa(c.ports.metadata))}
	signature := metadataSignature(c.secrets.metadata, serverID)
	transport := &http.Transport{Proxy: nil, IdleConnTimeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	srv := &http.Server{
		Handler: &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				h := r.Out.Header
				// Whatever the node sent under the headers Nova trusts is replaced or dropped:
				// a node must not speak for another server.
				h.Del("X-Metadata-Provider")
				h.Del("X-Metadata-Provider-Signature")
				h.Set(headerInstanceID, serverID)
				h.Set(headerTenantID, c.project)
				h.Set(headerInstanceSignature, signature)
				if ip, _, err := net.SplitHostPort(r.In.RemoteAddr); err == nil {
					h.Set(headerForwardedFor, ip)
				}
			},
			Transport: transport,
			ErrorLog:  c.proxies.log,
		},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          c.proxies.log,
	}
	if err := c.relays.addServer(srv); err != nil {
		return fmt.Errorf("serving metadata for server %s: %w", serverID, err)
	}
	defer c.relays.removeServer(srv)
	err := srv.Serve(l)
	// Serve leaves the connections it accepted open when l closes under it.
	_ = srv.Close()
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serving metadata for server %s: %w", serverID, err)
}
