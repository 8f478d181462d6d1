// Tests that `cinder-csi-operator render` prints what the operator applies: the managers' plans
// computed from the live inputs, and applying their output as the managers' field owners must change
// nothing in the installed cluster.
package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpdesired "github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	guestdesired "github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

func TestRenderMatchesApplied(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)

	g := NewWithT(t)
	ctx := context.Background()
	hcps := &hyperv1.HostedControlPlaneList{}
	g.Expect(e.MgmtClient.List(ctx, hcps, client.InNamespace(e.Namespace))).To(Succeed())
	g.Expect(hcps.Items).To(HaveLen(1))
	creds := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, creds)).To(Succeed())
	caCM := configMap(g, e.MgmtClient, e.Namespace, names.HyperShiftCloudConfigMap)

	ctrlImages, err := operandimages.ControllerImages(env.LookupLocalImage, true)
	g.Expect(err).NotTo(HaveOccurred())
	nodeImages, err := operandimages.NodeImages(env.LookupLocalImage)
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	d := manifests.NewDecoder(scheme)

	// The environment's zones match, so the operator detected topology as enabled; the node
	// copy records them.
	zones := []string{e.Zone()}
	cpInput := cpdesired.Input{
		Config:      cpdesired.Config{HyperShift: true, Namespace: e.Namespace, Images: ctrlImages},
		Driver:      driver(g, e),
		HCP:         &hcps.Items[0],
		Credentials: creds,
		CAConfigMap: caCM,
		Detection:   cpdesired.OfflineZones(true, zones, zones),
	}
	cpPlan, err := cpdesired.Compute(d, cpInput)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cpPlan.Problems).To(BeEmpty())
	var mgmtObjs, guestCPObjs []client.Object
	var nodeConf *corev1.ConfigMap
	for _, st := range cpPlan.Apply {
		if st.Cluster == apply.ClusterManagement {
			mgmtObjs = append(mgmtObjs, st.Object)
			continue
		}
		guestCPObjs = append(guestCPObjs, st.Object)
		nodeConf = st.Object.(*corev1.ConfigMap)
	}
	scs := &storagev1.StorageClassList{}
	g.Expect(e.GuestClient.List(ctx, scs)).To(Succeed())
	liveSC := &storagev1.StorageClass{}
	g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.StorageClass}, liveSC)).To(Succeed())
	guestPlan, err := guestdesired.Compute(d, guestdesired.Input{
		Config: guestdesired.Config{HyperShift: true, Images: nodeImages},
		Driver: cpInput.Driver, CloudConf: nodeConf, StorageClass: liveSC, StorageClasses: scs.Items, SnapshotCRD: true,
	})
	g.Expect(err).NotTo(HaveOccurred())
	var guestObjs []client.Object
	for _, st := range guestPlan.Apply {
		guestObjs = append(guestObjs, st.Object)
	}

	// Applying with the managers' own field owners, against the live objects read directly
	// from the API servers: Unchanged means the request would not even be sent.
	check := func(g Gomega, c client.Client, owner string, objs []client.Object) {
		a := &apply.Applier{Client: c, Reader: c, Owner: owner}
		for _, o := range objs {
			res, err := a.Apply(ctx, o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(apply.Unchanged), "%T %s differs from what the operator applied", o, o.GetName())
		}
	}
	t.Run("When rendered from the live inputs, the controller side should equal what the controlplane manager applied", func(t *testing.T) {
		g := NewWithT(t)
		check(g, e.MgmtClient, names.FieldOwnerControlPlane, mgmtObjs)
		check(g, e.GuestClient, names.FieldOwnerControlPlane, guestCPObjs)
	})
	t.Run("When rendered from the live inputs, the guest side should equal what the guest manager applied", func(t *testing.T) {
		check(NewWithT(t), e.GuestClient, names.FieldOwnerGuest, guestObjs)
	})
}
