package fakeopenstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"sync"
	"time"
)

// authority is the server's private CA and the serving certificate it signed. Each Server has its
// own, so a client that trusts one fake never trusts another: that is what the wrong-CA tests
// rely on. The CA key is kept so that the serving certificate can be re-issued for more hosts
// after start (a listener inside a network namespace gets an address only the harness knows).
type authority struct {
	caPEM  []byte
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey

	mu      sync.Mutex
	hosts   []string
	serving *tls.Certificate
}

// newAuthority creates a CA and a serving certificate for loopback plus the given extra hosts.
// ECDSA P-256 keeps generation in the microseconds, so every test can afford its own CA.
func newAuthority(extraHosts []string) (*authority, error) {
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          mustSerial(),
		Subject:               pkix.Name{CommonName: "fakeopenstack CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}

	a := &authority{
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caCert: caCert,
		caKey:  caKey,
	}
	if err := a.addHosts(extraHosts...); err != nil {
		return nil, err
	}
	return a, nil
}

// addHosts re-issues the serving certificate so that it also covers hosts. Connections already
// established keep the old certificate; new handshakes get the new one.
func (a *authority) addHosts(hosts ...string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	all := slices.Clone(a.hosts)
	for _, h := range hosts {
		if h != "" && !slices.Contains(all, h) {
			all = append(all, h)
		}
	}
	if a.serving != nil && len(all) == len(a.hosts) {
		return nil
	}
	cert, err := a.issue(all)
	if err != nil {
		return err
	}
	a.hosts, a.serving = all, cert
	return nil
}

// issue signs a serving certificate for loopback, localhost and hosts.
func (a *authority) issue(hosts []string) (*tls.Certificate, error) {
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: mustSerial(),
		Subject:      pkix.Name{CommonName: "fakeopenstack"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, a.caCert, &key.PublicKey, a.caKey)
	if err != nil {
		return nil, fmt.Errorf("signing serving certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.caCert.Raw}, PrivateKey: key}, nil
}

// certificate is the tls.Config.GetCertificate callback: always the newest serving certificate.
func (a *authority) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.serving, nil
}

// mustSerial returns a random 128-bit serial number; crypto/rand does not fail on supported
// platforms (Go 1.24+ crashes the program instead of returning an error).
func mustSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("reading random serial: %v", err))
	}
	return n
}
