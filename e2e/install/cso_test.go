package install_test

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
)

func TestSwapOperatorImage(t *testing.T) {
	t.Parallel()
	for _, fixture := range []string{install.CSOStandaloneDeployment, install.CSOHyperShiftDeployment} {
		t.Run("When given "+filepath.Base(fixture)+", it should change the operator's image and nothing else", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			dep, err := install.ReadDeployment(filepath.Join("..", "..", filepath.FromSlash(fixture)))
			g.Expect(err).NotTo(HaveOccurred())
			swapped, err := install.SwapOperatorImage(dep, "cinder-csi-operator:test")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(swapped.Spec.Template.Spec.Containers[0].Image).To(Equal("cinder-csi-operator:test"))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Image).NotTo(Equal("cinder-csi-operator:test"), "the input is left alone")
			swapped.Spec.Template.Spec.Containers[0].Image = dep.Spec.Template.Spec.Containers[0].Image
			g.Expect(equality.Semantic.DeepEqual(swapped, dep)).To(BeTrue())
		})
	}

	t.Run("When the Deployment has no operator container, it should say so", func(t *testing.T) {
		t.Parallel()
		dep, err := install.ReadDeployment(filepath.Join("..", "..", filepath.FromSlash(install.CSOStandaloneDeployment)))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		dep.Spec.Template.Spec.Containers[0].Name = "other"
		_, err = install.SwapOperatorImage(dep, "x")
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("no container openstack-cinder-csi-driver-operator in Deployment")))
	})
}
