package main

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestPrepare runs everything e2e-kind does after kind has created the clusters (CRDs, seed,
// install manifests with images and namespace filled in, waiting for the operator Deployment)
// against two local clusters started bare, without the operator's CRDs, as kind's are.
func TestPrepare(t *testing.T) {
	t.Parallel()
	mgmt, guest := localcluster.StartPairForTest(t,
		localcluster.Options{Name: "kind-mgmt", Workers: 1},
		localcluster.Options{Name: "kind-guest", Workers: 1})
	o := options{HostedCluster: "e2e", OperatorImage: "cinder-csi-operator:e2e", Images: map[string]string{}}
	for _, op := range operandImages {
		o.Images[op.Env] = "operand-" + op.Placeholder[:len(op.Placeholder)-len(":latest")] + ":e2e"
	}
	w, err := newWorld(o, mgmt.RESTConfig(), guest.RESTConfig(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	guestKubeconfig, err := os.ReadFile(guest.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	if err := w.Prepare(ctx, guestKubeconfig); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Logf("Prepared in %s", time.Since(start).Round(100*time.Millisecond))

	t.Run("When prepared, it should run the operator Deployment of the install manifest, with the given images, in the HCP namespace", func(t *testing.T) {
		g := NewWithT(t)
		dep := &appsv1.Deployment{}
		g.Expect(w.mgmt.Get(ctx, client.ObjectKey{Namespace: "clusters-e2e", Name: env.OperatorName(env.ModeHyperShift)}, dep)).To(Succeed())
		g.Expect(dep.Status.AvailableReplicas).To(BeNumerically(">", 0))
		var values []string
		for _, c := range dep.Spec.Template.Spec.Containers {
			g.Expect(c.Image).To(Equal(o.OperatorImage), c.Name)
			for _, e := range c.Env {
				values = append(values, e.Value)
			}
		}
		// Every operand image is passed on (on HyperShift partly as the control-plane
		// variables), and no placeholder is left.
		for _, op := range operandImages {
			g.Expect(values).To(ContainElement(o.Images[op.Env]), op.Env)
		}
		g.Expect(values).NotTo(ContainElement(HaveSuffix(":latest")))
		g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(names.HostedControlPlaneLabel, "clusters-e2e"))
	})

	t.Run("When prepared, it should have seeded both clusters as HyperShift would", func(t *testing.T) {
		g := NewWithT(t)
		hcp := &hyperv1.HostedControlPlane{}
		g.Expect(w.mgmt.Get(ctx, client.ObjectKey{Namespace: "clusters-e2e", Name: "e2e"}, hcp)).To(Succeed())
		kc := &corev1.Secret{}
		g.Expect(w.mgmt.Get(ctx, client.ObjectKey{Namespace: "clusters-e2e", Name: names.GuestKubeconfigSecret}, kc)).To(Succeed())
		g.Expect(kc.Data[names.KeyKubeconfig]).To(Equal(guestKubeconfig))
		creds := &corev1.Secret{}
		g.Expect(w.mgmt.Get(ctx, client.ObjectKey{Namespace: "clusters-e2e", Name: names.CredentialsSecret}, creds)).To(Succeed())
		g.Expect(string(creds.Data[names.KeyCloudsYAML])).To(ContainSubstring(w.OpenStack.URL()))
		g.Expect(w.guest.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, &operatorv1.ClusterCSIDriver{})).To(Succeed())
	})

	t.Run("When prepared again on the same clusters, it should succeed and leave the seeded objects as they are", func(t *testing.T) {
		g := NewWithT(t)
		seeded := []client.Object{
			&configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: names.InfrastructureName}},
			&operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}},
		}
		versions := func() []string {
			var out []string
			for _, o := range seeded {
				g.Expect(w.guest.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				out = append(out, o.GetResourceVersion())
			}
			hcp := &hyperv1.HostedControlPlane{}
			g.Expect(w.mgmt.Get(ctx, client.ObjectKey{Namespace: "clusters-e2e", Name: "e2e"}, hcp)).To(Succeed())
			return append(out, hcp.ResourceVersion)
		}
		before := versions()
		g.Expect(w.Prepare(ctx, guestKubeconfig)).To(Succeed())
		g.Expect(versions()).To(Equal(before))
	})
}
