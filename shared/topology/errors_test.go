package topology

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
		ReasonAuthenticationFailed, ReasonPermissionDenied, ReasonUnreachable, ReasonTLSFailure,
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
