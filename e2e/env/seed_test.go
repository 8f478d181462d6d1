package env

import (
	"net"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestSeedAPIServer checks that the seeded world has APIServer cluster, as every OpenShift
// cluster and the guest of every hosted cluster has, so that a test sets the TLS profile on it
// as an administrator does: by editing it. Only a few cluster-scoped objects matter here, so a
// fake client stands in for the API servers.
func TestSeedAPIServer(t *testing.T) {
	modern := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	for _, tt := range []struct {
		name string
		mode string
	}{
		{name: "When the standalone world is seeded, it should have APIServer cluster, and setting the profile should edit it", mode: ModeStandalone},
		{name: "When the hosted world is seeded, its guest should have APIServer cluster, and setting the profile should edit the HostedControlPlane and mirror it there", mode: ModeHyperShift},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			openstack, err := fakeopenstack.New(fakeopenstack.Options{})
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(openstack.Close)
			scheme, err := clusters.NewScheme()
			g.Expect(err).NotTo(HaveOccurred())
			newClient := func() client.Client {
				return fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&configv1.Infrastructure{}).Build()
			}
			mgmt, guest, namespace := newClient(), newClient(), "clusters-example"
			if tt.mode == ModeStandalone {
				guest, namespace = mgmt, GuestNamespace
			}
			s := Seed{Mode: tt.mode, Mgmt: mgmt, Guest: guest, Namespace: namespace, HostedCluster: "example", OpenStack: openstack,
				GuestKubeconfig: []byte("apiVersion: v1\nkind: Config\n"), ManagementAPIServerIPs: []net.IP{net.IPv4(10, 0, 0, 1)}}
			g.Expect(s.Create(ctx)).To(Succeed())

			a := &configv1.APIServer{}
			g.Expect(guest.Get(ctx, client.ObjectKey{Name: names.APIServerName}, a)).To(Succeed())
			g.Expect(a.Spec.TLSSecurityProfile).To(BeNil(), "a new cluster's APIServer sets no profile: Intermediate")

			e := &Env{Mode: tt.mode, MgmtClient: mgmt, GuestClient: guest, Namespace: namespace}
			g.Expect(e.SetTLSProfile(ctx, modern)).To(Succeed())
			g.Expect(guest.Get(ctx, client.ObjectKey{Name: names.APIServerName}, a)).To(Succeed())
			g.Expect(a.Spec.TLSSecurityProfile).To(Equal(modern))
			if tt.mode == ModeHyperShift {
				hcp := &hyperv1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "example"}}
				g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
				g.Expect(hcp.Spec.Configuration.APIServer.TLSSecurityProfile).To(Equal(modern))
			}
		})
	}
}
