package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestSeededNetworkPolicies checks that the local world holds the platform's NetworkPolicies as
// the seed writes them: cluster-storage-operator's in openshift-cluster-csi-drivers (both modes),
// HyperShift's in the HostedControlPlane namespace, with the management API server's addresses
// taken from the management cluster itself, and the namespaces their peers select.
func TestSeededNetworkPolicies(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{env.ModeHyperShift, env.ModeStandalone} {
		t.Run("When a "+mode+" environment starts, it should hold the platform's NetworkPolicies", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			e := env.StartForTest(t, env.Options{Mode: mode})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			expectPolicies(ctx, g, e.GuestClient, names.GuestNamespace, env.StorageNetworkPolicies())
			ns := &corev1.Namespace{}
			g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: env.DNSNamespace}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue(corev1.LabelMetadataName, env.DNSNamespace))

			if mode != env.ModeHyperShift {
				list := &networkingv1.NetworkPolicyList{}
				g.Expect(e.MgmtClient.List(ctx, list)).To(Succeed())
				g.Expect(list.Items).To(HaveLen(len(env.StorageNetworkPolicies())), "standalone has cluster-storage-operator's policies only")
				return
			}
			// The management cluster's own kubernetes EndpointSlice decides what management-kas
			// excepts (nothing, for the local API servers on 127.0.0.1).
			kas, err := env.ManagementAPIServerIPs(ctx, e.MgmtClient)
			g.Expect(err).NotTo(HaveOccurred())
			expectPolicies(ctx, g, e.MgmtClient, e.Namespace, env.HyperShiftNetworkPolicies(e.Namespace, kas))
			for name, group := range map[string]string{env.MonitoringNamespace: "monitoring", env.IngressNamespace: "ingress"} {
				g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
				g.Expect(ns.Labels).To(HaveKeyWithValue("network.openshift.io/policy-group", group), name)
			}
		})
	}
}

// expectPolicies checks that namespace ns holds exactly the policies want, spec for spec.
func expectPolicies(ctx context.Context, g Gomega, c client.Client, ns string, want []*networkingv1.NetworkPolicy) {
	list := &networkingv1.NetworkPolicyList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	got := map[string]networkingv1.NetworkPolicySpec{}
	for _, np := range list.Items {
		got[np.Name] = np.Spec
	}
	g.Expect(got).To(HaveLen(len(want)), "policies in %s", ns)
	for _, np := range want {
		g.Expect(got).To(HaveKey(np.Name), "%s/%s", ns, np.Name)
		g.Expect(got[np.Name]).To(Equal(np.Spec), "%s/%s", ns, np.Name)
	}
}
