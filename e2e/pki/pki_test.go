package pki

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestServing(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	chain, key, err := ca.ServingPEM("server", append(Loopback, "10.0.0.7", "api.example")...)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		t.Fatalf("the PEM files do not load as a key pair: %v", err)
	}
	if len(pair.Certificate) != 2 {
		t.Fatalf("the chain holds %d certificates, want the certificate and its CA", len(pair.Certificate))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	verify := func(caPEM []byte, host string) error {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host})
		return err
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "10.0.0.7", "api.example"} {
		t.Run("When a client that trusts the CA connects to "+host+", it should verify the certificate", func(t *testing.T) {
			if err := verify(ca.PEM, host); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("When a client connects to a host the certificate does not name, it should refuse it", func(t *testing.T) {
		if err := verify(ca.PEM, "elsewhere.example"); err == nil {
			t.Error("verified for a host it does not name")
		}
	})
	t.Run("When a client trusts another CA, it should refuse the certificate", func(t *testing.T) {
		if err := verify(other.PEM, "localhost"); err == nil {
			t.Error("verified with another CA's roots")
		}
	})
}
