package fakeopenstack

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Fault is a failure the fake injects into requests to one endpoint; see SetFault and SetFaultN.
type Fault string

const (
	// FaultNone serves requests normally.
	FaultNone Fault = ""
	// FaultRefuse drops the connection without any HTTP answer: the handler hijacks the connection
	// and resets it (SO_LINGER 0), so the client sees "connection reset by peer" or EOF, the same
	// as a load balancer with no healthy backend.
	FaultRefuse Fault = "refuse"
	// FaultHang blocks the request until the client gives up, the server stops, or the configured
	// hang duration elapses (after which the request is served normally, like a very slow API).
	FaultHang Fault = "hang"
	// FaultServerError answers 500 with a JSON error body.
	FaultServerError Fault = "server-error"
	// FaultUnauthorized answers 401 as Keystone does for an expired or revoked token (and, on the
	// identity endpoint, for rejected credentials).
	FaultUnauthorized Fault = "unauthorized"
)

// faultState is an injected fault and how many more requests it applies to (negative: all).
type faultState struct {
	fault     Fault
	remaining int
}

// SetFault injects f for every request to ep until ClearFaults (FaultNone clears ep).
func (s *Server) SetFault(ep Endpoint, f Fault) {
	s.SetFaultN(ep, f, -1)
}

// SetFaultN injects f for the next n requests to ep only (n < 0: until cleared); this models a
// transient failure such as one 500 followed by recovery.
func (s *Server) SetFaultN(ep Endpoint, f Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == FaultNone || n == 0 {
		delete(s.faults, ep)
		return
	}
	s.faults[ep] = faultState{fault: f, remaining: n}
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[Endpoint]faultState{}
}

// SetHangFor changes how long FaultHang blocks (zero: until the client gives up).
func (s *Server) SetHangFor(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hangFor = d
}

// takeFault returns the fault for ep and consumes one use of a counted fault.
func (s *Server) takeFault(ep Endpoint) (Fault, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, ok := s.faults[ep]
	if !ok {
		return FaultNone, 0
	}
	if fs.remaining > 0 {
		fs.remaining--
		if fs.remaining == 0 {
			delete(s.faults, ep)
		} else {
			s.faults[ep] = fs
		}
	}
	return fs.fault, s.hangFor
}

// refuse drops the connection without an HTTP answer. Closing the raw TCP connection with
// SO_LINGER 0 sends a RST instead of a TLS close_notify, which is what a refused or reset
// connection looks like to the client.
func refuse(w http.ResponseWriter) {
	// ResponseController follows Unwrap through statusWriter to the connection's Hijacker.
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// net/http closes the connection without a response and logs nothing for this value.
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}

// hang blocks until the client gives up or stopping is closed (false: do not answer), or until
// hangFor elapses (true: serve normally).
func hang(stopping <-chan struct{}, r *http.Request, hangFor time.Duration) bool {
	var elapsed <-chan time.Time
	if hangFor > 0 {
		t := time.NewTimer(hangFor)
		defer t.Stop()
		elapsed = t.C
	}
	select {
	case <-r.Context().Done():
		return false
	case <-stopping:
		return false
	case <-elapsed:
		return true
	}
}
