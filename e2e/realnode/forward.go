package realnode

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// forwardDialTimeout bounds connecting to a forwarder's target; every target is on loopback or
// inside a namespace of this run, so anything slower is broken.
const forwardDialTimeout = 10 * time.Second

// Forwarder copies every connection accepted on a listener to a connection opened by its dial
// function, in both directions. It is how the API server on the host's loopback becomes
// reachable at an address inside a node's network namespace.
type Forwarder struct {
	ln   net.Listener
	dial func(ctx context.Context) (net.Conn, error)
	set  connSet
}

// Forward serves ln until Close, connecting each accepted connection to one that dial opens.
func Forward(ln net.Listener, dial func(ctx context.Context) (net.Conn, error)) *Forwarder {
	f := &Forwarder{ln: ln, dial: dial}
	f.set.init()
	f.set.serve(ln, f.handle)
	return f
}

// ForwardTo forwards connections accepted on ln to a TCP address, dialled from the host's
// network namespace (for example the API server's 127.0.0.1:<port>).
func ForwardTo(ln net.Listener, addr string) *Forwarder {
	return Forward(ln, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
}

// Addr returns the listener's address.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// Close stops accepting, closes every forwarded connection and waits for the copies to end.
func (f *Forwarder) Close() error { return f.set.close(f.ln) }

// handle forwards one connection.
func (f *Forwarder) handle(c net.Conn) {
	ctx, cancel := context.WithTimeout(f.set.ctx, forwardDialTimeout)
	upstream, err := f.dial(ctx)
	cancel()
	if err != nil {
		return
	}
	if !f.set.track(upstream) {
		return
	}
	defer f.set.untrack(upstream)
	splice(c, upstream)
}

// connSet runs the accept loop of a listener and tracks open connections, so that closing ends
// every connection rather than waiting for clients to hang up.
type connSet struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// init prepares the set.
func (s *connSet) init() {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.conns = map[net.Conn]struct{}{}
}

// serve accepts on ln until it is closed and runs handle for each connection in a goroutine;
// the connection is tracked, and closed once handle returns.
func (s *connSet) serve(ln net.Listener, handle func(net.Conn)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			if !s.track(c) {
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.untrack(c)
				handle(c)
			}()
		}
	}()
}

// close closes ln and every tracked connection, then waits for the handlers.
func (s *connSet) close(ln net.Listener) error {
	s.cancel()
	err := ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// track records a connection so close can end it; once closing it refuses and closes it.
func (s *connSet) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		_ = c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// untrack closes and forgets a connection.
func (s *connSet) untrack(c net.Conn) {
	_ = c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// splice copies a to b and b to a until both directions end. A finished direction half-closes
// its destination when it can, so protocols that signal the end of a request by closing their
// write side keep working; otherwise it closes the destination.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
		_ = dst.Close()
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
