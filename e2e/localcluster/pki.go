package localcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/pki"
)

// pkiFiles holds the paths of the files the API server and its clients authenticate with.
type pkiFiles struct {
	caCert, servingCert, servingKey string
	saKey, saPub                    string
	caPEM                           []byte
}

// identity is one user of the static token file.
type identity struct {
	user, token string
	groups      []string
}

// Users of the static token file. The components run as their well-known user names so that the
// audit policy can leave out their chatter; they are all in system:masters because the
// controller-manager runs every controller under its own identity
// (--use-service-account-credentials=false), which its bootstrap role does not cover, and kwok
// writes node and pod status, which no bootstrap role grants to a non-node user.
const (
	adminUser             = "admin"
	controllerManagerUser = "system:kube-controller-manager"
	schedulerUser         = "system:kube-scheduler"
	kwokUser              = "kwok"
)

// writePKI creates a CA, a serving certificate for the API server (valid for loopback, the
// in-cluster names and extraIPs) and the service-account key pair in dir. Generating them in Go
// keeps the package free of openssl and lets the admin kubeconfig verify the server instead of
// skipping TLS verification.
func writePKI(dir string, extraIPs ...net.IP) (pkiFiles, error) {
	p := pkiFiles{
		caCert:      filepath.Join(dir, "ca.crt"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
	}
	ca, err := pki.NewCA("localcluster-ca")
	if err != nil {
		return p, err
	}
	p.caPEM = ca.PEM
	// In-cluster names and the service IP are included so that a client given the in-cluster
	// address by mistake gets a routing error rather than a confusing certificate error.
	hosts := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "127.0.0.1", "::1", KubernetesServiceIP}
	for _, ip := range extraIPs {
		hosts = append(hosts, ip.String())
	}
	servingPEM, servingKeyPEM, err := ca.ServingPEM("kube-apiserver", hosts...)
	if err != nil {
		return p, err
	}

	// The service-account signing key is RSA because that is what every token consumer accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, fmt.Errorf("generating service-account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, fmt.Errorf("encoding service-account public key: %w", err)
	}

	files := []struct {
		path string
		data []byte
	}{
		{p.caCert, ca.PEM},
		{p.servingCert, servingPEM},
		{p.servingKey, servingKeyPEM},
		{p.saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})},
		{p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return p, fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return p, nil
}

// newIdentities returns the token-file users with fresh random tokens.
func newIdentities() (map[string]identity, error) {
	ids := map[string]identity{}
	for _, user := range []string{adminUser, controllerManagerUser, schedulerUser, kwokUser} {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("generating token: %w", err)
		}
		ids[user] = identity{user: user, token: hex.EncodeToString(b), groups: []string{"system:masters"}}
	}
	return ids, nil
}

// writeTokenFile writes the API server's --token-auth-file (token,user,uid,"group,...").
func writeTokenFile(path string, ids map[string]identity) error {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", id.token, id.user, id.user, strings.Join(id.groups, ","))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for one identity, with the CA embedded so the file can be
// copied elsewhere and still verify the server.
func writeKubeconfig(path, clusterName, server string, caPEM []byte, id identity) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[id.user] = &clientcmdapi.AuthInfo{Token: id.token}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: id.user}
	cfg.CurrentContext = clusterName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
