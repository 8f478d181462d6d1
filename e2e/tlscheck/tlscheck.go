// Package tlscheck holds the client side of the checks on a metrics endpoint that the cluster's
// TLS security profile and its authorization must hold: which TLS versions it accepts, and who
// may scrape it. The checks are the same for the operator's own /metrics and for the CSI
// controller's kube-rbac-proxy ports, in process mode or on a real node.
//
// API:
//
//   - Handshake(ctx, addr, maxVersion, opts) completes a TLS handshake with addr offering no
//     version above maxVersion (tls.VersionTLS12 for a client that cannot speak TLS 1.3) and
//     returns the connection state, or the server's refusal.
//   - Scrape(ctx, addr, path, token, opts) GETs https://addr<path> with the bearer token (none
//     when empty) and returns the HTTP status and body: 401 or 403 for a caller the endpoint
//     refuses, 200 and the metrics for an authorised one.
//   - ServiceAccountToken(ctx, cs, namespace, name, readsMetrics) creates a ServiceAccount and,
//     with readsMetrics, a ClusterRole and binding that let it get /metrics, and returns a token
//     of it from the TokenRequest API: the two callers a check needs, authorised and not.
//   - Options.Dial reaches addresses the test process cannot reach directly (a pod port inside a
//     real node's network namespace: realnode.DialIn); Options.RootCAs and ServerName verify the
//     server's certificate when set. Without RootCAs the certificate is not verified: these checks
//     are about protocol versions and authorization, and the operator's self-signed certificate
//     has no CA to verify it with.
package tlscheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Options tune how the checks reach and trust a server.
type Options struct {
	// Dial opens the TCP connection; nil dials directly.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RootCAs verifies the server's certificate, for ServerName (default: addr's host); nil
	// verifies nothing.
	RootCAs    *x509.CertPool
	ServerName string
}

// timeout bounds one check.
const timeout = 10 * time.Second

func (o Options) tlsConfig(addr string, maxVersion uint16) (*tls.Config, error) {
	c := &tls.Config{MaxVersion: maxVersion, RootCAs: o.RootCAs, ServerName: o.ServerName}
	if o.RootCAs == nil {
		// See the package documentation: the checks test versions and authorization.
		c.InsecureSkipVerify = true //nolint:gosec // Deliberate, documented above.
	} else if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("reading address %s: %w", addr, err)
		}
		c.ServerName = host
	}
	return c, nil
}

func (o Options) dial(ctx context.Context, addr string) (net.Conn, error) {
	if o.Dial != nil {
		return o.Dial(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Handshake completes a TLS handshake with addr, offering versions up to maxVersion, and
// returns the connection's state; the error is the server's refusal (a protocol version
// alert, say) or a failure to connect.
func Handshake(ctx context.Context, addr string, maxVersion uint16, o Options) (tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg, err := o.tlsConfig(addr, maxVersion)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	raw, err := o.dial(ctx, addr)
	if err != nil {
		return tls.ConnectionState{}, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	conn := tls.Client(raw, cfg)
	defer func() { _ = conn.Close() }()
	if err := conn.HandshakeContext(ctx); err != nil {
		return tls.ConnectionState{}, fmt.Errorf("handshaking with %s offering at most %s: %w", addr, tls.VersionName(maxVersion), err)
	}
	return conn.ConnectionState(), nil
}

// Scrape GETs https://addr<path>, with "Authorization: Bearer <token>" unless token is empty,
// and returns the status and body.
func Scrape(ctx context.Context, addr, path, token string, o Options) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg, err := o.tlsConfig(addr, 0)
	if err != nil {
		return 0, nil, err
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   cfg,
		DialContext:       func(ctx context.Context, _, a string) (net.Conn, error) { return o.dial(ctx, a) },
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("scraping https://%s%s: %w", addr, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading https://%s%s: %w", addr, path, err)
	}
	return resp.StatusCode, body, nil
}

// MetricsReaderRole is the ClusterRole ServiceAccountToken binds a reader to: get on the
// non-resource URL /metrics, as OpenShift's prometheus-k8s ClusterRole grants it.
const MetricsReaderRole = "tlscheck-metrics-reader"

// ServiceAccountToken creates ServiceAccount namespace/name (if it does not exist) and returns a
// token of it for an hour. With readsMetrics it also binds the account to MetricsReaderRole
// (created too), so that the token may get /metrics on this cluster; without, the account has
// no permission of its own.
func ServiceAccountToken(ctx context.Context, cs kubernetes.Interface, namespace, name string, readsMetrics bool) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	if readsMetrics {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderRole},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating ClusterRole %s: %w", MetricsReaderRole, err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderRole + "-" + namespace + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReaderRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating ClusterRoleBinding %s: %w", binding.Name, err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
