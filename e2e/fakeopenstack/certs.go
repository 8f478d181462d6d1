package fakeopenstack

import (
	"crypto/tls"
	"slices"
	"sync"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/pki"
)

// authority is the server's private CA and the serving certificate it signed. Each Server has its
// own, so a client that trusts one fake never trusts another: that is what the wrong-CA tests
// rely on. The CA is kept so that the serving certificate can be re-issued for more hosts after
// start (a listener inside a network namespace gets an address only the harness knows).
type authority struct {
	ca    *pki.CA
	caPEM []byte

	mu      sync.Mutex
	hosts   []string
	serving *tls.Certificate
}

// newAuthority creates a CA and a serving certificate for loopback plus the given extra hosts.
func newAuthority(extraHosts []string) (*authority, error) {
	ca, err := pki.NewCA("fakeopenstack CA")
	if err != nil {
		return nil, err
	}
	a := &authority{ca: ca, caPEM: ca.PEM}
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
	cert, err := a.ca.Serving("fakeopenstack", append(slices.Clone(pki.Loopback), all...)...)
	if err != nil {
		return err
	}
	a.hosts, a.serving = all, cert
	return nil
}

// certificate is the tls.Config.GetCertificate callback: always the newest serving certificate.
func (a *authority) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.serving, nil
}
