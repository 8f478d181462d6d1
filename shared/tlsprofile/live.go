package tlsprofile

import (
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// firstProfileWait bounds how long a handshake waits for the first profile: the watch that sets
// it normally does within a second of the start, and a client that came too early retries at its
// next scrape.
const firstProfileWait = 10 * time.Second

// Live is the profile in force for a TLS server that follows the cluster's profile without a
// restart: whoever watches the profile calls Set, and every new connection's handshake reads it
// (see ServerConfig). Until the first Set, handshakes wait: a server never offers less than the
// cluster's profile, not even in the moments between its start and its first read of the
// profile. The zero value is not ready; use NewLive.
type Live struct {
	cur   atomic.Pointer[Settings]
	ready chan struct{}
	once  sync.Once
}

// NewLive returns a Live with no profile known yet.
func NewLive() *Live {
	return &Live{ready: make(chan struct{})}
}

// Set makes s the profile in force and reports whether it differs from the one before (true on
// the first Set).
func (l *Live) Set(s Settings) bool {
	old := l.cur.Swap(&s)
	l.once.Do(func() { close(l.ready) })
	return old == nil || !old.Equal(s)
}

// Get returns the profile in force and whether one has been set.
func (l *Live) Get() (Settings, bool) {
	s := l.cur.Load()
	if s == nil {
		return Settings{}, false
	}
	return *s, true
}

// errNoProfile ends a handshake that gave up waiting for the first profile.
var errNoProfile = errors.New("the TLS security profile is not known yet")

// ServerConfig makes base follow l: at each client's hello, the handshake runs with a copy of
// base (its certificates as they are then) at the minimum version and cipher suites in force.
// The copy is taken per connection, so what the caller or a library sets in base after this
// call (a certificate, a GetCertificate) still counts. A hello before the first Set waits for
// it, at most firstProfileWait and as long as the handshake's context allows, then fails.
func (l *Live) ServerConfig(base *tls.Config) {
	base.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		select {
		case <-l.ready:
		default:
			t := time.NewTimer(firstProfileWait)
			defer t.Stop()
			select {
			case <-l.ready:
			case <-t.C:
				return nil, errNoProfile
			case <-hello.Context().Done():
				return nil, errNoProfile
			}
		}
		s, _ := l.Get()
		c := base.Clone()
		c.GetConfigForClient = nil
		s.ApplyTo(c)
		return c, nil
	}
}
