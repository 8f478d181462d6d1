package openstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	volumeaz "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/availabilityzones"
	computeaz "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
)

// DefaultTimeout bounds each call when Config.Timeout is zero. It is well below a reconcile's
// patience and well above a healthy Keystone's token latency.
const DefaultTimeout = 30 * time.Second

// Config holds everything NewClient needs. Nothing is read from files or the environment: the
// operator gets clouds.yaml and the CA from Kubernetes objects.
type Config struct {
	// CloudsYAML is the content of clouds.yaml (the credentials Secret's "clouds.yaml" key).
	CloudsYAML []byte
	// CloudName selects the entry under "clouds" ("openstack" in OpenShift).
	CloudName string
	// CACertPEM is the CA bundle that signs the OpenStack API certificates. Empty means the system
	// roots. A cacert path inside clouds.yaml is always ignored: the installer writes one that
	// exists in the driver's pods, not in the operator's.
	CACertPEM []byte
	// Timeout bounds every HTTP request and every call of NewClient, ComputeZones and VolumeZones
	// (default DefaultTimeout).
	Timeout time.Duration
	// UserAgent is prepended to gophercloud's User-Agent, so OpenStack logs name the operator.
	UserAgent string
	// Proxy selects the HTTP proxy per request; nil connects directly. The operator passes its
	// proxy settings here explicitly, through ProxyFunc. A proxy that cannot be reached or
	// refuses the tunnel fails with ReasonProxyFailure, and Describe names it.
	Proxy func(*http.Request) (*url.URL, error)
}

// Client lists availability zones with gophercloud v2. It authenticates once in NewClient and
// re-authenticates on a 401; it is safe for concurrent use. Create a new Client when the
// credentials change: re-authentication reuses the credentials it was created with.
type Client struct {
	compute   *gophercloud.ServiceClient
	volume    *gophercloud.ServiceClient
	transport *http.Transport
	timeout   time.Duration
	secrets   []string
}

// NewClient parses the cloud, authenticates and finds the compute and block-storage endpoints.
// Every error is an *Error; use Classify and Message on it.
//
// Time bound: the Keystone requests (version discovery, token) share one Timeout. Endpoint lookup
// makes no request when the catalog URLs carry a version (/v2.1, /v3/<project>), as real clouds'
// do; otherwise gophercloud GETs the URL for a versions document with context.TODO, so only the
// http.Client timeout (also Timeout) bounds those requests.
func NewClient(ctx context.Context, cfg Config) (*Client, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	cloud, err := parseCloud(cfg.CloudsYAML, cfg.CloudName)
	if err != nil {
		return nil, err
	}

	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// clouds.yaml "verify: false" asks for exactly this; the driver honours it the same way.
		InsecureSkipVerify: cloud.insecure, //nolint:gosec
		Certificates:       cloud.clientCerts,
	}
	if len(bytes.TrimSpace(cfg.CACertPEM)) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CACertPEM) {
			return nil, &Error{
				Reason: ReasonInvalidCACert, Op: "loading the OpenStack CA bundle", detail: "no PEM certificate found",
			}
		}
		tlsConfig.RootCAs = pool
	}

	// A transport of our own, not http.DefaultTransport: that one reads proxy settings from the
	// environment and has no response-header timeout, so a hanging API would hold a connection
	// for as long as the caller's context allows.
	transport := &http.Transport{
		Proxy:                 cfg.Proxy,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
		ForceAttemptHTTP2:     true,
	}
	// A proxy's failures name the proxy: a refused CONNECT through this hook, a failed dial
	// through proxyTransport.
	transport.OnProxyConnectResponse = refusedConnect
	var roundTripper http.RoundTripper = transport
	if cfg.Proxy != nil {
		roundTripper = proxyTransport{base: transport, proxy: cfg.Proxy}
	}

	provider, err := openstack.NewClient(cloud.auth.IdentityEndpoint)
	if err != nil {
		return nil, newError("parsing clouds.yaml", ReasonInvalidCloudsYAML, err, cloud.secrets...)
	}
	provider.HTTPClient = http.Client{Transport: roundTripper, Timeout: timeout}
	if cfg.UserAgent != "" {
		provider.UserAgent.Prepend(cfg.UserAgent)
	}

	authCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// openstack.Authenticate rather than config.NewProviderClient: the latter sets nothing we need
	// and creates the ProviderClient itself, so the first token request would go out without our
	// User-Agent.
	start := time.Now()
	err = openstack.Authenticate(authCtx, provider, cloud.auth)
	observe("identity", "authenticate", start, err)
	if err != nil {
		transport.CloseIdleConnections()
		return nil, newError("authenticating to OpenStack", ReasonNone, err, cloud.secrets...)
	}

	compute, err := openstack.NewComputeV2(provider, cloud.endpoint)
	if err != nil {
		transport.CloseIdleConnections()
		return nil, newError("finding the compute endpoint", ReasonNone, err, cloud.secrets...)
	}
	volume, err := openstack.NewBlockStorageV3(provider, cloud.endpoint)
	if err != nil {
		transport.CloseIdleConnections()
		return nil, newError("finding the block-storage endpoint", ReasonNone, err, cloud.secrets...)
	}

	return &Client{
		compute:   compute,
		volume:    volume,
		transport: transport,
		timeout:   timeout,
		secrets:   cloud.secrets,
	}, nil
}

// ComputeZones lists Nova's available availability zones, sorted and de-duplicated. Errors are
// *Error.
func (c *Client) ComputeZones(ctx context.Context) ([]string, error) {
	return listZones(ctx, c, "compute", "listing compute availability zones", computeaz.List(c.compute), computeaz.ExtractAvailabilityZones,
		func(z computeaz.AvailabilityZone) (string, bool) { return z.ZoneName, z.ZoneState.Available })
}

// VolumeZones lists Cinder's available availability zones, sorted and de-duplicated. Errors are
// *Error.
func (c *Client) VolumeZones(ctx context.Context) ([]string, error) {
	return listZones(ctx, c, "volume", "listing volume availability zones", volumeaz.List(c.volume), volumeaz.ExtractAvailabilityZones,
		func(z volumeaz.AvailabilityZone) (string, bool) { return z.ZoneName, z.ZoneState.Available })
}

// listZones reads every page of an availability zone list within the client's timeout and
// returns the names of the available zones, sorted and de-duplicated.
func listZones[Z any](ctx context.Context, c *Client, service, op string, pager pagination.Pager,
	extract func(pagination.Page) ([]Z, error), available func(Z) (string, bool)) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	page, err := pager.AllPages(ctx)
	observe(service, "list_availability_zones", start, err)
	if err != nil {
		return nil, newError(op, ReasonNone, err, c.secrets...)
	}
	zones, err := extract(page)
	if err != nil {
		return nil, newError(op, ReasonUnexpectedResponse, err, c.secrets...)
	}
	names := make([]string, 0, len(zones))
	for _, z := range zones {
		if name, ok := available(z); ok {
			names = append(names, name)
		}
	}
	return normalise(names), nil
}

// Close releases the Client's idle connections. Call it when replacing a Client after a
// credentials change, so the old one's keep-alive connections do not linger; a closed Client still
// works and simply dials again.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
}

// observe records an OpenStack call that began at start in the operator's metrics: its service
// (identity, compute, volume), operation, outcome (success, or the Reason it failed with) and time.
func observe(service, operation string, start time.Time, err error) {
	outcome := metrics.OutcomeSuccess
	if err != nil {
		outcome = string(Classify(err))
		if outcome == "" {
			outcome = "Unknown"
		}
	}
	metrics.ObserveOpenStack(service, operation, outcome, time.Since(start))
}
