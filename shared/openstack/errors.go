package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/gophercloud/gophercloud/v2"
)

// Reason classifies a failure to reach or use OpenStack. Values are UpperCamel so they can be
// used directly as a condition reason; they are stable API.
type Reason string

const (
	// ReasonNone is what Classify returns for a nil error.
	ReasonNone Reason = ""
	// ReasonInvalidCloudsYAML means the clouds.yaml is not valid YAML, has the wrong shape, or has
	// a setting gophercloud rejects (for example an unreadable client certificate file).
	ReasonInvalidCloudsYAML Reason = "InvalidCloudsYAML"
	// ReasonCloudNotFound means the cloud name is empty or has no entry in clouds.yaml.
	ReasonCloudNotFound Reason = "CloudNotFound"
	// ReasonMissingAuthFields means the cloud entry lacks auth_url or a complete credential.
	ReasonMissingAuthFields Reason = "MissingAuthFields"
	// ReasonInvalidCACert means the CA bundle given to NewClient holds no PEM certificate.
	ReasonInvalidCACert Reason = "InvalidCACert"
	// ReasonAuthenticationFailed means Keystone rejected the credentials (401), or a token was
	// still refused after one re-authentication.
	ReasonAuthenticationFailed Reason = "AuthenticationFailed"
	// ReasonPermissionDenied means the API answered 403.
	ReasonPermissionDenied Reason = "PermissionDenied"
	// ReasonUnreachable means there was no HTTP answer at all (connection refused or reset, DNS
	// failure).
	ReasonUnreachable Reason = "Unreachable"
	// ReasonProxyFailure means the HTTP proxy in front of OpenStack could not be reached, or
	// refused to open a tunnel to the OpenStack API. It refines Unreachable so the message can
	// name the proxy; Describe gives that message.
	ReasonProxyFailure Reason = "ProxyFailure"
	// ReasonInvalidProxy means a proxy setting is not a URL net/http can use.
	ReasonInvalidProxy Reason = "InvalidProxy"
	// ReasonTLSFailure means the TLS handshake failed, usually because the server certificate is
	// not signed by the configured CA or does not match the host. It refines Unreachable so the
	// message can point at the CA bundle.
	ReasonTLSFailure Reason = "TLSFailure"
	// ReasonTimeout means a request did not complete within the configured timeout.
	ReasonTimeout Reason = "Timeout"
	// ReasonCanceled means the caller's context was canceled (for example at shutdown).
	ReasonCanceled Reason = "Canceled"
	// ReasonServerError means the API answered 5xx or 429.
	ReasonServerError Reason = "ServerError"
	// ReasonEndpointNotFound means the service catalog has no compute or block-storage endpoint
	// for the configured region and interface, or an endpoint answered 404.
	ReasonEndpointNotFound Reason = "EndpointNotFound"
	// ReasonUnexpectedResponse means the API answered something gophercloud could not use
	// (another 4xx, a malformed body).
	ReasonUnexpectedResponse Reason = "UnexpectedResponse"
	// ReasonNoAvailableZones means OpenStack answered, but reported no available compute or no
	// available volume availability zone; DetectTopology treats this as a failure rather than a decision.
	ReasonNoAvailableZones Reason = "NoAvailableZones"
	// ReasonUnknown covers every other error.
	ReasonUnknown Reason = "Unknown"
)

// messages are single-line, secret-free and say what to check. They never include data from the
// error, so they are stable across retries and safe for conditions and events. Describe adds one
// piece of configuration to the proxy failure: the proxy's host:port.
var messages = map[Reason]string{
	ReasonInvalidCloudsYAML: "The clouds.yaml in the OpenStack credentials Secret cannot be parsed " +
		"or has an invalid setting; fix the Secret",
	ReasonCloudNotFound: "The clouds.yaml in the OpenStack credentials Secret has no entry " +
		"for the configured cloud name; fix the Secret or the cloud name",
	ReasonMissingAuthFields: "The cloud entry in clouds.yaml lacks auth_url or a complete credential " +
		"(username and password, or application credential ID or name and secret); fix the Secret",
	ReasonInvalidCACert: "The OpenStack CA bundle contains no PEM certificate; fix the CA bundle",
	ReasonAuthenticationFailed: "OpenStack rejected the credentials in clouds.yaml; " +
		"check that the password or application credential is valid and not expired",
	ReasonPermissionDenied: "OpenStack denied access to the availability zone API; check the roles " +
		"of the OpenStack user or the access rules of the application credential",
	ReasonUnreachable: "The OpenStack API cannot be reached; " +
		"check auth_url, DNS, the network path and the proxy settings",
	ReasonProxyFailure: "The HTTP proxy in front of the OpenStack API cannot be reached or refused " +
		"the connection; check that the proxy runs and allows connections to the OpenStack API hosts, " +
		"or add those hosts to noProxy",
	ReasonInvalidProxy: "The HTTP proxy settings are not valid proxy URLs " +
		"(such as http://proxy.example.com:3128); fix httpProxy and httpsProxy",
	ReasonTLSFailure: "The TLS connection to the OpenStack API failed; check that the CA bundle " +
		"contains the CA that signed the OpenStack API certificate and that the certificate " +
		"matches the host name",
	ReasonTimeout: "The OpenStack API did not answer in time; " +
		"check the OpenStack API health and the network path",
	ReasonCanceled: "The request to the OpenStack API was canceled",
	ReasonServerError: "The OpenStack API answered with a server error; " +
		"check the health of Keystone, Nova and Cinder",
	ReasonEndpointNotFound: "The OpenStack service catalog has no usable compute or block-storage " +
		"endpoint; check region_name and interface in clouds.yaml",
	ReasonUnexpectedResponse: "The OpenStack API answered with an unexpected response",
	ReasonNoAvailableZones: "OpenStack reported no available compute or no available volume " +
		"availability zone; check the Nova and Cinder services",
	ReasonUnknown: "An unexpected error occurred while talking to the OpenStack API",
}

// Message returns the stable, user-facing sentence for a reason. It never contains data from the
// error, so it is safe for conditions and events; log the error itself for detail.
func Message(r Reason) string {
	if m, ok := messages[r]; ok {
		return m
	}
	return messages[ReasonUnknown]
}

// Describe returns the user-facing sentence for err: Message of its reason, except that a proxy
// failure names the proxy (host:port, never the credentials of a proxy URL) and says whether it
// refused the tunnel or could not be reached. Like Message, it never contains text from the
// error, so it is stable across retries and safe for conditions and events.
func Describe(err error) string {
	r := Classify(err)
	if r != ReasonProxyFailure {
		return Message(r)
	}
	pe := findProxyError(err)
	switch {
	case pe == nil || pe.Proxy == "":
		return Message(r)
	case pe.StatusCode != 0:
		return fmt.Sprintf("The HTTP proxy %s refused to connect to the OpenStack API (it answered CONNECT with %s); "+
			"check that the proxy allows connections to the OpenStack API hosts and ports, "+
			"or add those hosts to noProxy", pe.Proxy, statusText(pe.StatusCode))
	default:
		return fmt.Sprintf("The HTTP proxy %s cannot be reached; "+
			"check that the proxy runs and that the proxy settings name it correctly", pe.Proxy)
	}
}

// Error is a classified failure. Its Error string is single-line, bounded in length and scrubbed of
// the credentials the client knows, so it can be logged; Unwrap gives the original error for
// errors.Is and errors.As.
type Error struct {
	// Reason classifies the failure.
	Reason Reason
	// Op says what was being done, for example "authenticating to OpenStack".
	Op string

	detail string
	cause  error
}

// Error implements error.
func (e *Error) Error() string {
	if e.detail == "" {
		return e.Op + ": " + string(e.Reason)
	}
	return e.Op + ": " + string(e.Reason) + ": " + e.detail
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error {
	return e.cause
}

// maxDetail bounds the detail so that an HTML error page in a response body does not end up in
// a log line.
const maxDetail = 300

// newError classifies cause (unless reason is given) and scrubs its text of secrets.
func newError(op string, reason Reason, cause error, secrets ...string) *Error {
	if reason == ReasonNone {
		reason = classifyCause(cause)
	}
	e := &Error{Reason: reason, Op: op, cause: cause}
	if cause != nil {
		e.detail = scrub(cause.Error(), secrets)
	}
	return e
}

// scrub removes known secret values, folds the text onto one line and bounds its length.
func scrub(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "<redacted>")
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxDetail {
		s = string(r[:maxDetail]) + "…"
	}
	return s
}

// Classify returns the reason of err: the Reason of an *Error in its chain, otherwise a
// classification of the raw error (gophercloud, net/http, TLS or context errors).
func Classify(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return classifyCause(err)
}

// classifyCause maps raw errors. The order matters: gophercloud's re-authentication error does not
// unwrap, the transport wraps TLS and timeout errors in *url.Error, and a status code is more
// specific than the generic transport error.
func classifyCause(err error) Reason {
	if err == nil {
		return ReasonNone
	}

	// ErrUnableToReauthenticate has no Unwrap (its two errors are independent). What matters is
	// why the re-authentication failed: a 401 there means the credentials no longer work.
	var reauth *gophercloud.ErrUnableToReauthenticate
	if errors.As(err, &reauth) {
		if r := classifyCause(reauth.ErrReauth); r != ReasonUnknown {
			return r
		}
		return classifyCause(reauth.ErrOriginal)
	}

	// Before the TLS and timeout checks: net/http wraps every failure to reach the proxy, TLS
	// handshakes and dial timeouts included, and the proxy is what the user must check then.
	if findProxyError(err) != nil {
		return ReasonProxyFailure
	}

	var (
		codeErr    gophercloud.ErrUnexpectedResponseCode
		codeErrPtr *gophercloud.ErrUnexpectedResponseCode
	)
	switch {
	case errors.As(err, &codeErr):
		return classifyStatus(codeErr.Actual)
	case errors.As(err, &codeErrPtr):
		return classifyStatus(codeErrPtr.Actual)
	}

	var (
		endpointNotFound    *gophercloud.ErrEndpointNotFound
		endpointNotFoundVal gophercloud.ErrEndpointNotFound
		serviceNotFound     *gophercloud.ErrServiceNotFound
		serviceNotFoundVal  gophercloud.ErrServiceNotFound
	)
	if errors.As(err, &endpointNotFound) || errors.As(err, &endpointNotFoundVal) ||
		errors.As(err, &serviceNotFound) || errors.As(err, &serviceNotFoundVal) {
		return ReasonEndpointNotFound
	}

	if isTLSError(err) {
		return ReasonTLSFailure
	}

	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return ReasonTimeout
	}
	if errors.Is(err, context.Canceled) {
		return ReasonCanceled
	}

	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
		urlErr *url.Error
	)
	if errors.As(err, &dnsErr) || errors.As(err, &opErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &urlErr) {
		// *url.Error last: it wraps every transport failure that has no more specific type above.
		return ReasonUnreachable
	}

	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		keyErr    gophercloud.ErrMissingResourceKey
	)
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) || errors.As(err, &keyErr) {
		return ReasonUnexpectedResponse
	}
	return ReasonUnknown
}

func classifyStatus(code int) Reason {
	switch {
	case code == http.StatusUnauthorized:
		return ReasonAuthenticationFailed
	case code == http.StatusForbidden:
		return ReasonPermissionDenied
	case code == http.StatusNotFound:
		return ReasonEndpointNotFound
	case code == http.StatusTooManyRequests || code >= 500:
		return ReasonServerError
	default:
		return ReasonUnexpectedResponse
	}
}

// isTLSError recognises certificate verification failures and a server that does not speak TLS.
func isTLSError(err error) bool {
	var (
		verifyErr    *tls.CertificateVerificationError
		unknownCA    x509.UnknownAuthorityError
		hostnameErr  x509.HostnameError
		invalidErr   x509.CertificateInvalidError
		recordErr    tls.RecordHeaderError
		alertErr     tls.AlertError
		sysRootsErr  x509.SystemRootsError
		insecureAlgo x509.InsecureAlgorithmError
	)
	return errors.As(err, &verifyErr) || errors.As(err, &unknownCA) || errors.As(err, &hostnameErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &recordErr) || errors.As(err, &alertErr) ||
		errors.As(err, &sysRootsErr) || errors.As(err, &insecureAlgo)
}
