package tlsprofile

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	certutil "k8s.io/client-go/util/cert"
)

// serve runs a TLS server on loopback whose config follows l, completing every handshake, and
// returns its address.
func serve(t *testing.T, l *Live) string {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	base := &tls.Config{Certificates: []tls.Certificate{pair}}
	l.ServerConfig(base)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).HandshakeContext(t.Context())
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake dials addr offering TLS versions up to maxVersion and returns the version agreed.
func handshake(addr string, maxVersion uint16) (uint16, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{InsecureSkipVerify: true, MaxVersion: maxVersion}} //nolint:gosec // The test checks versions, not identity.
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close() }()
	return c.(*tls.Conn).ConnectionState().Version, nil
}

func TestLive(t *testing.T) {
	l := NewLive()
	addr := serve(t, l)
	modern := Resolve(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType})

	t.Run("When no profile is known yet, it should hold the handshake until one is", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := handshake(addr, tls.VersionTLS12)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("the handshake ended before a profile was known: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if !l.Set(modern) {
			t.Error("the first Set reported no change")
		}
		if err := <-done; err == nil {
			t.Error("a TLS 1.2 client was served under Modern once the profile was known")
		}
	})
	t.Run("When the profile is Modern, it should refuse a TLS 1.2 client and serve a TLS 1.3 one", func(t *testing.T) {
		if _, err := handshake(addr, tls.VersionTLS12); err == nil {
			t.Error("a TLS 1.2 client was served")
		}
		if v, err := handshake(addr, tls.VersionTLS13); err != nil || v != tls.VersionTLS13 {
			t.Errorf("a TLS 1.3 client got version %#x, error %v", v, err)
		}
	})
	t.Run("When the profile changes to Intermediate, it should serve a TLS 1.2 client without a restart", func(t *testing.T) {
		if !l.Set(Intermediate()) {
			t.Error("Set reported no change")
		}
		if l.Set(Intermediate()) {
			t.Error("setting the same profile again reported a change")
		}
		if v, err := handshake(addr, tls.VersionTLS12); err != nil || v != tls.VersionTLS12 {
			t.Errorf("a TLS 1.2 client got version %#x, error %v", v, err)
		}
		if _, err := handshake(addr, tls.VersionTLS11); err == nil {
			t.Errorf("a TLS 1.1 client was served under Intermediate: %v", err)
		}
	})
}
