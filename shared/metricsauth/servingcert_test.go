package metricsauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/secretvolume"
)

// testPair returns a PEM certificate and key for name, self-signed: enough to tell pairs apart.
func testPair(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// served returns the leaf certificate GetCertificate hands out now.
func served(t *testing.T, s *ServingCert) []byte {
	t.Helper()
	c, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}

// der returns the DER bytes of a PEM certificate.
func der(certPEM []byte) []byte {
	b, _ := pem.Decode(certPEM)
	return b.Bytes
}

func TestServingCert(t *testing.T) {
	t.Run("When the directory is empty at the start and the kubelet fills it later, it should serve the self-signed certificate, then the files", func(t *testing.T) {
		dir := t.TempDir()
		s := NewServingCert(dir, logr.Discard())
		selfSigned := served(t, s)
		if leaf, _ := x509.ParseCertificate(selfSigned); leaf == nil || leaf.VerifyHostname("localhost") != nil {
			t.Fatalf("the first certificate is not the self-signed one for localhost")
		}
		cert, key := testPair(t, "first.example")
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert, "tls.key": key})
		if got := served(t, s); !bytes.Equal(got, der(cert)) {
			t.Fatalf("after the files appeared, the self-signed certificate is still served")
		}

		// A rotation swaps ..data again: served from the next handshake on.
		cert2, key2 := testPair(t, "second.example")
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert2, "tls.key": key2})
		if got := served(t, s); !bytes.Equal(got, der(cert2)) {
			t.Fatalf("after the rotation, the first certificate is still served")
		}
	})

	t.Run("When the files are there from the start, it should serve them and make no self-signed certificate", func(t *testing.T) {
		dir := t.TempDir()
		cert, key := testPair(t, "first.example")
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert, "tls.key": key})
		s := NewServingCert(dir, logr.Discard())
		if got := served(t, s); !bytes.Equal(got, der(cert)) {
			t.Fatalf("the files are not served")
		}
		if s.selfSigned != nil {
			t.Fatalf("a self-signed certificate was made although the files were there")
		}
	})

	t.Run("When the files change into an invalid pair, it should keep the last valid pair until they change again", func(t *testing.T) {
		dir := t.TempDir()
		cert, key := testPair(t, "first.example")
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert, "tls.key": key})
		s := NewServingCert(dir, logr.Discard())
		served(t, s)
		cert2, key2 := testPair(t, "second.example")
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert2, "tls.key": key})
		if got := served(t, s); !bytes.Equal(got, der(cert)) {
			t.Fatalf("a mismatched pair replaced the valid one")
		}
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert2, "tls.key": key2})
		if got := served(t, s); !bytes.Equal(got, der(cert2)) {
			t.Fatalf("the valid pair that followed is not served")
		}
	})

	t.Run("When the files are removed, it should serve the self-signed certificate again", func(t *testing.T) {
		dir := t.TempDir()
		cert, key := testPair(t, "first.example")
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert, "tls.key": key})
		s := NewServingCert(dir, logr.Discard())
		served(t, s)
		for _, name := range []string{"tls.crt", "tls.key"} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		if got := served(t, s); bytes.Equal(got, der(cert)) {
			t.Fatalf("removed files are still served")
		}
	})

	t.Run("When no directory is given, it should serve the self-signed certificate", func(t *testing.T) {
		s := NewServingCert("", logr.Discard())
		if got := served(t, s); len(got) == 0 {
			t.Fatalf("no certificate served")
		}
	})
}
