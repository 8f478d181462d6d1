package fakeopenstack

import (
	"net/http"
	"strings"
	"time"
)

// Request is one recorded request. It is recorded when it arrives, so a request that is still
// hanging already counts; Status is filled in when the handler returns.
type Request struct {
	// Time is when the request arrived.
	Time time.Time
	// Method is the HTTP method.
	Method string
	// Path is the URL path, without the query.
	Path string
	// Query is the raw URL query, for example "name=pvc-1" of a volume lookup by name.
	Query string
	// Host is the Host header, which tells the listener the client used (Serve).
	Host string
	// APIVersion is the OpenStack-API-Version header (microversion), for example "volume 3.42".
	APIVersion string
	// Endpoint is the API the path belongs to.
	Endpoint Endpoint
	// Status is the HTTP status sent, or 0 when no answer was sent (FaultRefuse, a hang that ended
	// with the client or the server, or a request still in flight).
	Status int
	// Fault is the fault injected into this request, if any.
	Fault Fault
	// AuthMethod is the first auth.identity.methods entry of a token request that reached the
	// credential check ("password", "application_credential", "token"); empty otherwise.
	AuthMethod string
}

// IsTokenRequest reports whether the request was a POST to …/auth/tokens, answered or not.
func (r Request) IsTokenRequest() bool {
	return r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.Path, "/"), "/auth/tokens")
}

// newRequest describes r for the log. Headers other than the API version are not kept: they may
// carry tokens.
func newRequest(r *http.Request, ep Endpoint, fault Fault) Request {
	return Request{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host,
		APIVersion: r.Header.Get("OpenStack-API-Version"), Endpoint: ep, Fault: fault,
	}
}

func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	return len(s.requests) - 1
}

func (s *Server) finish(idx, status int, authMethod string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// ResetRequests may have dropped the entry while the request was in flight.
	if idx < len(s.requests) {
		s.requests[idx].Status = status
		s.requests[idx].AuthMethod = authMethod
	}
}

// Requests returns a copy of the request log, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ResetRequests empties the request log, for tests that assert on the traffic of one step.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Count returns how many requests reached ep.
func (s *Server) Count(ep Endpoint) int {
	return s.CountFunc(func(r Request) bool { return r.Endpoint == ep })
}

// CountTokenRequests returns how many token requests (POST …/auth/tokens) arrived: one per
// authentication, so a re-authentication after a 401 shows as one more.
func (s *Server) CountTokenRequests() int {
	return s.CountFunc(Request.IsTokenRequest)
}

// CountFunc returns how many recorded requests match.
func (s *Server) CountFunc(match func(Request) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if match(r) {
			n++
		}
	}
	return n
}
