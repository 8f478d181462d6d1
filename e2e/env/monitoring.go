package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/monitoring"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/tlscheck"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// MonitoringServiceAccount is the platform monitoring's identity (in MonitoringNamespace), as
// OpenShift names it.
const MonitoringServiceAccount = "prometheus-k8s"

// StartPrometheus starts a real Prometheus (binary prometheus) on the management node, as the
// management cluster's monitoring scrapes the hosted control plane's namespace (standalone: the
// cluster's): its targets and rules come from the ServiceMonitors and PrometheusRule the operator
// created there (the caller waits for them), found through the API server and scraped over the
// metrics Services' TLS with the token of ServiceAccount openshift-monitoring/prometheus-k8s, which
// may get /metrics, list the namespace's endpoints and have kube-rbac-proxy review its token.
// interval, when set, replaces OpenShift's 30 s of scrapes and rule evaluations. The caller stops
// it.
func (e *Env) StartPrometheus(ctx context.Context, prometheus string, interval time.Duration) (*monitoring.Prometheus, error) {
	if e.Real == nil {
		return nil, errors.New("prometheus runs on the management node: real nodes only")
	}
	cs, err := kubernetes.NewForConfig(e.MgmtConfig())
	if err != nil {
		return nil, err
	}
	if err := createAll(ctx, e.MgmtClient, []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MonitoringNamespace}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: MonitoringServiceAccount},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"},
				Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: MonitoringServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: MonitoringServiceAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: MonitoringNamespace, Name: MonitoringServiceAccount}},
		},
	}); err != nil {
		return nil, err
	}
	token, err := tlscheck.ServiceAccountToken(ctx, cs, MonitoringNamespace, MonitoringServiceAccount, true)
	if err != nil {
		return nil, err
	}
	if e.Mode == ModeHyperShift {
		// kube-rbac-proxy reviews each scrape with the management cluster's API server, where
		// a management cluster whose monitoring scrapes the controller binds
		// system:auth-delegator to its ServiceAccount.
		if err := BindAuthDelegator(ctx, e.MgmtClient, e.Namespace, names.ControllerServiceAccount); err != nil {
			return nil, err
		}
	}
	kc, err := clientcmd.LoadFromFile(e.Real.MgmtKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the management node's kubeconfig: %w", err)
	}
	cluster := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster]
	netns := e.Real.MgmtNode.NetnsPath()
	return monitoring.Start(ctx, monitoring.Options{
		Binary: prometheus, Dir: filepath.Join(e.Dir, "prometheus"), Netns: netns,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return realnode.DialIn(ctx, netns, network, addr)
		},
		APIServer: cluster.Server, APIServerCA: cluster.CertificateAuthorityData,
		Token: token, ServingCA: e.ServiceCA(), Namespace: e.Namespace, Client: e.MgmtClient, Interval: interval,
	})
}
