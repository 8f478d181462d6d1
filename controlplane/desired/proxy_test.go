package desired

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

// renderedController returns the controller Deployment the plan for in holds.
func renderedController(g Gomega, t *testing.T, rc Config, in Input) *appsv1.Deployment {
	rc.Images = testImages()
	in.Credentials = &corev1.Secret{Data: map[string][]byte{
		names.KeyCloudsYAML: []byte("clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000/v3\n"),
	}}
	p := testutil.Build(t, func(d *manifests.Decoder) (*Plan, error) {
		in.Config, in.Driver = rc, &operatorv1.ClusterCSIDriver{}
		return Compute(d, in)
	})
	g.Expect(p.Problems).To(BeEmpty())
	for _, st := range p.Apply {
		if dep, ok := st.Object.(*appsv1.Deployment); ok {
			return dep
		}
	}
	g.Expect("a controller Deployment").To(BeEmpty())
	return nil
}

// proxyVars returns the container's *_PROXY variables by name.
func proxyVars(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if strings.HasSuffix(strings.ToUpper(e.Name), "_PROXY") {
			out[e.Name] = e.Value
		}
	}
	return out
}

// TestResolveProxy checks where the proxy comes from in each mode: on HyperShift the operator's
// own environment (Config.Proxy), in standalone mode the cluster-wide Proxy only.
func TestResolveProxy(t *testing.T) {
	t.Parallel()
	operatorEnv := configv1.ProxyStatus{HTTPSProxy: "http://mgmt-proxy.example.com:3128", NoProxy: ".svc,kube-apiserver"}
	clusterProxy := configv1.ProxyStatus{HTTPSProxy: "http://cluster-proxy.example.com:3129"}

	t.Run("When on HyperShift, it should give the operator's proxy to every controller container", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		dep := renderedController(g, t, Config{HyperShift: true, Namespace: hcpNamespace, Proxy: operatorEnv}, Input{
			HCP: &hyperv1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace}, Spec: hyperv1.HostedControlPlaneSpec{InfraID: "example-x7k2p"}},
			// A guest's Proxy object is about the guest's nodes, not the management cluster.
			Proxy: &configv1.Proxy{Status: clusterProxy},
		})
		for _, c := range dep.Spec.Template.Spec.Containers {
			g.Expect(proxyVars(c)).To(Equal(map[string]string{
				"HTTPS_PROXY": operatorEnv.HTTPSProxy, "https_proxy": operatorEnv.HTTPSProxy,
				"NO_PROXY": operatorEnv.NoProxy, "no_proxy": operatorEnv.NoProxy,
			}), c.Name)
		}
	})

	t.Run("When standalone, it should follow the cluster-wide Proxy, in the driver container only, whatever the operator's environment", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		dep := renderedController(g, t, Config{Namespace: names.GuestNamespace, Proxy: operatorEnv}, Input{
			Infrastructure: &configv1.Infrastructure{Status: configv1.InfrastructureStatus{
				InfrastructureName: "standalone-abc12", ControlPlaneTopology: configv1.SingleReplicaTopologyMode,
			}},
			Proxy: &configv1.Proxy{Status: clusterProxy},
		})
		for _, c := range dep.Spec.Template.Spec.Containers {
			if c.Name != "csi-driver" {
				g.Expect(proxyVars(c)).To(BeEmpty(), c.Name)
				continue
			}
			g.Expect(proxyVars(c)).To(Equal(map[string]string{"HTTPS_PROXY": clusterProxy.HTTPSProxy, "https_proxy": clusterProxy.HTTPSProxy}))
		}
	})

	t.Run("When resolved, it should hand detection the proxy of the mode", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		creds := &corev1.Secret{Data: map[string][]byte{
			names.KeyCloudsYAML: []byte("clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000/v3\n"),
		}}
		hs := Config{HyperShift: true, Namespace: hcpNamespace, Proxy: operatorEnv}
		cfg, problems := resolve(&operatorv1.ClusterCSIDriver{}, &Input{
			Config: hs, HCP: &hyperv1.HostedControlPlane{}, Credentials: creds, Proxy: &configv1.Proxy{Status: clusterProxy},
		})
		g.Expect(problems).To(BeEmpty())
		g.Expect(cfg.Proxy).To(Equal(operatorEnv))

		sa := Config{Namespace: names.GuestNamespace, Proxy: operatorEnv}
		cfg, problems = resolve(&operatorv1.ClusterCSIDriver{}, &Input{
			Config:         sa,
			Infrastructure: &configv1.Infrastructure{Status: configv1.InfrastructureStatus{InfrastructureName: "standalone-abc12"}},
			Credentials:    creds, Proxy: &configv1.Proxy{Status: clusterProxy},
		})
		g.Expect(problems).To(BeEmpty())
		g.Expect(cfg.Proxy).To(Equal(clusterProxy))
	})
}
