package operator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/secretvolume"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
)

// servingPair returns a certificate for the metrics Service's name, issued by a CA of its own,
// as service-ca issues one, and a pool holding that CA: what Prometheus trusts.
func servingPair(t *testing.T, name string) (certPEM, keyPEM []byte, roots *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "service-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(caCert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), roots
}

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// handshake connects to addr as a scraper that trusts roots and expects serverName, and returns
// the negotiated TLS version, or the verification error.
func handshake(addr, serverName string, roots *x509.CertPool) (uint16, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: serverName}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	version := c.(*tls.Conn).ConnectionState().Version
	return version, c.Close()
}

// TestMetricsServingCertificate runs a manager's metrics endpoint as the operator pod's starts
// when service-ca has not yet written its Secret: an optional Secret volume, empty at the start
// and filled by the kubelet afterwards.
func TestMetricsServingCertificate(t *testing.T) {
	g := NewWithT(t)
	const service = "openstack-cinder-csi-driver-operator-metrics.openshift-cluster-csi-drivers.svc"
	dir := t.TempDir()
	live := tlsprofile.NewLive()
	live.Set(tlsprofile.Resolve(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}))
	addr := freeAddr(t)
	c := Common{Logger: logr.Discard(), MetricsBindAddress: addr, HealthProbeBindAddress: "0", MetricsCertDir: dir,
		TLSProfile: live, SkipControllerNameValidation: true}
	// No API server is needed: the endpoint serves before the caches start, and only a scrape
	// with a token would ask for reviews.
	opts, err := c.options("test", &rest.Config{Host: "https://127.0.0.1:1"}, "test-lock")
	g.Expect(err).NotTo(HaveOccurred())
	m, err := clusters.New(opts)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager ended with: %v", err)
		}
	})

	cert, key, roots := servingPair(t, service)

	t.Run("When the directory is empty at the start, it should serve a self-signed certificate the scraper cannot verify", func(t *testing.T) {
		g := NewWithT(t)
		// The names of the certificate that failed verification, once the endpoint listens.
		served := func() []string {
			_, err := handshake(addr, service, roots)
			var verr *tls.CertificateVerificationError
			if !errors.As(err, &verr) || len(verr.UnverifiedCertificates) == 0 {
				return nil
			}
			return verr.UnverifiedCertificates[0].DNSNames
		}
		g.Eventually(served, 10*time.Second, 50*time.Millisecond).Should(Equal([]string{"localhost"}))
	})

	t.Run("When the kubelet fills the directory afterwards, it should serve the files from the next handshake, at the cluster's TLS profile", func(t *testing.T) {
		g := NewWithT(t)
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert, "tls.key": key})
		version, err := handshake(addr, service, roots)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(version).To(Equal(uint16(tls.VersionTLS13)), "the Modern profile serves TLS 1.3 only")
	})

	t.Run("When service-ca rotates the certificate, it should serve the new one from the next handshake", func(t *testing.T) {
		g := NewWithT(t)
		cert2, key2, roots2 := servingPair(t, service)
		secretvolume.Write(t, dir, map[string][]byte{"tls.crt": cert2, "tls.key": key2})
		_, err := handshake(addr, service, roots2)
		g.Expect(err).NotTo(HaveOccurred())
	})
}
