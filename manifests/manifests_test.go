package manifests

import (
	"io/fs"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/policylabels"
)

func TestOperand(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	d := NewDecoder(scheme)

	t.Run("When every embedded manifest is decoded strictly, it should yield named objects", func(t *testing.T) {
		g := NewWithT(t)
		files, err := fs.Glob(operands, "operands/*.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			objs, err := d.Operand(f[len("operands/"):])
			g.Expect(err).NotTo(HaveOccurred(), f)
			g.Expect(objs).NotTo(BeEmpty(), f)
			for _, o := range objs {
				g.Expect(o.GetName()).NotTo(BeEmpty(), f)
			}
		}
	})

	t.Run("When a single-object manifest is loaded as its type, it should decode typed fields", func(t *testing.T) {
		g := NewWithT(t)
		ds, err := Object[*appsv1.DaemonSet](d, "node.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ds.Spec.Template.Spec.HostNetwork).To(BeTrue())
		g.Expect(ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()).To(Equal("10%"))
	})

	t.Run("When the controller Deployment is loaded, its pod template should carry every NetworkPolicy label the platform requires", func(t *testing.T) {
		g := NewWithT(t)
		dep, err := Object[*appsv1.Deployment](d, "controller.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		for k, v := range policylabels.Controller() {
			g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
		}
	})

	t.Run("When the required label lists are handed out, they should be copies the caller may change", func(t *testing.T) {
		g := NewWithT(t)
		l := policylabels.Operator()
		delete(l, policylabels.APIServer)
		g.Expect(policylabels.Operator()).To(HaveKey(policylabels.APIServer))
		g.Expect(policylabels.Operator()).To(HaveLen(4))
		g.Expect(policylabels.Controller()).To(HaveLen(4))
	})

	t.Run("When a manifest is loaded as the wrong type, it should fail", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Object[*appsv1.Deployment](d, "node.yaml")
		g.Expect(err).To(MatchError(ContainSubstring("want *v1.Deployment")))
	})
}
