package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	. "github.com/onsi/gomega"
)

// proxyDialErr is what net/http returns when nothing listens at the proxy's address.
var proxyDialErr error = &net.OpError{Op: "proxyconnect", Net: "tcp",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

func TestClassify(t *testing.T) {
	t.Parallel()
	status := func(code int) error {
		return gophercloud.ErrUnexpectedResponseCode{
			Method: "GET", URL: "https://x/compute/v2.1/os-availability-zone", Expected: []int{200}, Actual: code,
		}
	}
	transport := func(err error) error { return &url.Error{Op: "Get", URL: "https://x", Err: err} }
	classified := &Error{Reason: ReasonCloudNotFound, Op: "parsing clouds.yaml"}
	var syntaxErr *json.SyntaxError
	{
		var v any
		err := json.Unmarshal([]byte("{"), &v)
		_ = errors.As(err, &syntaxErr)
	}
	tests := []struct {
		name string
		err  error
		want Reason
	}{
		{name: "When the error is nil, it should return ReasonNone", err: nil, want: ReasonNone},
		{name: "When a classified error is wrapped, it should return its reason",
			err: fmt.Errorf("reconciling: %w", classified), want: ReasonCloudNotFound},
		{name: "When the API answers 401, it should return AuthenticationFailed",
			err: status(401), want: ReasonAuthenticationFailed},
		{name: "When the API answers 403, it should return PermissionDenied", err: status(403), want: ReasonPermissionDenied},
		{name: "When the API answers 404, it should return EndpointNotFound", err: status(404), want: ReasonEndpointNotFound},
		{name: "When the API answers 400, it should return UnexpectedResponse", err: status(400), want: ReasonUnexpectedResponse},
		{name: "When the API answers 429, it should return ServerError", err: status(429), want: ReasonServerError},
		{name: "When the API answers 503, it should return ServerError", err: status(503), want: ReasonServerError},
		{name: "When a request still gets 401 after re-authenticating, it should return AuthenticationFailed",
			err: &gophercloud.ErrErrorAfterReauthentication{ErrOriginal: status(401)}, want: ReasonAuthenticationFailed},
		{name: "When re-authentication itself is rejected, it should return AuthenticationFailed",
			err:  &gophercloud.ErrUnableToReauthenticate{ErrOriginal: status(401), ErrReauth: status(401)},
			want: ReasonAuthenticationFailed},
		{name: "When re-authentication times out, it should return Timeout",
			err:  &gophercloud.ErrUnableToReauthenticate{ErrOriginal: status(401), ErrReauth: transport(context.DeadlineExceeded)},
			want: ReasonTimeout},
		{name: "When the catalog has no matching endpoint, it should return EndpointNotFound",
			err: &gophercloud.ErrEndpointNotFound{}, want: ReasonEndpointNotFound},
		{name: "When the context deadline passes, it should return Timeout",
			err: fmt.Errorf("x: %w", context.DeadlineExceeded), want: ReasonTimeout},
		{name: "When the context is canceled, it should return Canceled",
			err: transport(context.Canceled), want: ReasonCanceled},
		{name: "When DNS fails, it should return Unreachable",
			err: transport(&net.DNSError{Err: "no such host", Name: "x"}), want: ReasonUnreachable},
		{name: "When the connection is refused, it should return Unreachable",
			err: transport(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), want: ReasonUnreachable},
		{name: "When the response is not JSON, it should return UnexpectedResponse",
			err: syntaxErr, want: ReasonUnexpectedResponse},
		{name: "When the proxy refused the tunnel, it should return ProxyFailure",
			err: transport(&ProxyError{Proxy: "proxy.example.com:3128", StatusCode: 403}), want: ReasonProxyFailure},
		{name: "When the proxy cannot be reached, it should return ProxyFailure rather than Unreachable",
			err: transport(&ProxyError{Proxy: "proxy.example.com:3128", Err: proxyDialErr}), want: ReasonProxyFailure},
		{name: "When dialling the proxy timed out, it should return ProxyFailure rather than Timeout",
			err:  transport(&ProxyError{Proxy: "proxy.example.com:3128", Err: &net.OpError{Op: "proxyconnect", Net: "tcp", Err: context.DeadlineExceeded}}),
			want: ReasonProxyFailure},
		{name: "When re-authentication failed at the proxy, it should return ProxyFailure",
			err:  &gophercloud.ErrUnableToReauthenticate{ErrOriginal: status(401), ErrReauth: transport(&ProxyError{Proxy: "p:1", StatusCode: 502})},
			want: ReasonProxyFailure},
		{name: "When the error is of no known kind, it should return Unknown", err: errors.New("something"), want: ReasonUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(Classify(tt.err)).To(Equal(tt.want))
		})
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	all := []Reason{
		ReasonInvalidCloudsYAML, ReasonCloudNotFound, ReasonMissingAuthFields, ReasonInvalidCACert,
		ReasonAuthenticationFailed, ReasonPermissionDenied, ReasonUnreachable, ReasonProxyFailure,
		ReasonInvalidProxy, ReasonTLSFailure,
		ReasonTimeout, ReasonCanceled, ReasonServerError, ReasonEndpointNotFound,
		ReasonUnexpectedResponse, ReasonNoAvailableZones, ReasonUnknown,
	}
	for _, r := range all {
		t.Run(fmt.Sprintf("When the reason is %s, it should have its own single-line message", r), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			m := Message(r)
			g.Expect(m).NotTo(BeEmpty())
			g.Expect(m).NotTo(ContainSubstring("\n"))
			if r != ReasonUnknown {
				g.Expect(m).NotTo(Equal(Message(ReasonUnknown)))
			}
		})
	}
	t.Run("When the reason is not known, it should fall back to the Unknown message", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(Message("Bogus")).To(Equal(Message(ReasonUnknown)))
	})
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	t.Run("When the cause contains a secret and newlines, it should scrub, fold and bound the text", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cause := errors.New("line one\nhunter2 echoed back\n" + strings.Repeat("x", 1000))
		err := newError("authenticating to OpenStack", ReasonNone, cause, "hunter2")
		g.Expect(err.Error()).NotTo(ContainSubstring("hunter2"))
		g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
		g.Expect(len(err.Error())).To(BeNumerically("<", 400))
		g.Expect(errors.Is(err, cause)).To(BeTrue())
	})
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	wrapped := func(err error) error {
		return fmt.Errorf("detecting topology: %w", newError("authenticating to OpenStack", ReasonNone,
			&url.Error{Op: "Post", URL: "https://keystone.example.com/v3/auth/tokens", Err: err}))
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "When the proxy refused the tunnel, it should name the proxy and its answer",
			err: wrapped(&ProxyError{Proxy: "proxy.example.com:3128", StatusCode: 403}),
			want: "The HTTP proxy proxy.example.com:3128 refused to connect to the OpenStack API (it answered CONNECT with 403 Forbidden); " +
				"check that the proxy allows connections to the OpenStack API hosts and ports, or add those hosts to noProxy"},
		{name: "When the proxy answered with a code Go has no name for, it should give the code alone",
			err: wrapped(&ProxyError{Proxy: "10.0.0.1:3128", StatusCode: 599}),
			want: "The HTTP proxy 10.0.0.1:3128 refused to connect to the OpenStack API (it answered CONNECT with 599); " +
				"check that the proxy allows connections to the OpenStack API hosts and ports, or add those hosts to noProxy"},
		{name: "When the proxy cannot be reached, it should name the proxy and say to check it runs",
			err: wrapped(&ProxyError{Proxy: "[fd00::1]:3128", Err: proxyDialErr}),
			want: "The HTTP proxy [fd00::1]:3128 cannot be reached; " +
				"check that the proxy runs and that the proxy settings name it correctly"},
		{name: "When the proxy failed during re-authentication, it should still name the proxy",
			err: &gophercloud.ErrUnableToReauthenticate{ErrOriginal: errors.New("401"), ErrReauth: &ProxyError{Proxy: "p.example.com:80", StatusCode: 407}},
			want: "The HTTP proxy p.example.com:80 refused to connect to the OpenStack API (it answered CONNECT with 407 Proxy Authentication Required); " +
				"check that the proxy allows connections to the OpenStack API hosts and ports, or add those hosts to noProxy"},
		{name: "When the failure is not the proxy's, it should give the reason's message",
			err: wrapped(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), want: Message(ReasonUnreachable)},
		{name: "When the error is nil, it should give the Unknown message", err: nil, want: Message(ReasonUnknown)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(Describe(tt.err)).To(Equal(tt.want))
		})
	}
}

func TestProxyAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, want string
	}{
		{name: "When the URL has a port, it should keep it", url: "http://proxy.example.com:3128", want: "proxy.example.com:3128"},
		{name: "When an http URL has no port, it should add 80", url: "http://proxy.example.com", want: "proxy.example.com:80"},
		{name: "When an https URL has no port, it should add 443", url: "https://proxy.example.com", want: "proxy.example.com:443"},
		{name: "When a socks5 URL has no port, it should add 1080", url: "socks5://proxy.example.com", want: "proxy.example.com:1080"},
		{name: "When the URL is IPv6 without a port, it should bracket the address", url: "http://[fd00::1]", want: "[fd00::1]:80"},
		{name: "When the URL has credentials, it should drop them", url: "http://user:s3cret@proxy.example.com:3128", want: "proxy.example.com:3128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			u, err := url.Parse(tt.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxyAddress(u)).To(Equal(tt.want))
		})
	}
}
