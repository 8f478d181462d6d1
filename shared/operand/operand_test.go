package operand

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func TestManagedAndHarden(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	a := &corev1.ConfigMap{}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"keep": "me"}}}
	Managed(a, b)
	g.Expect(a.Labels).To(Equal(map[string]string{names.ManagedByLabel: names.ManagedByValue}))
	g.Expect(b.Labels).To(Equal(map[string]string{"keep": "me", names.ManagedByLabel: names.ManagedByValue}))
	g.Expect(clusters.ManagedSelector.Matches(labels.Set(b.Labels))).To(BeTrue())

	c := &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsNonRoot: new(bool)}}
	Harden(c)
	g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
	g.Expect(c.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.SecurityContext.RunAsNonRoot).NotTo(BeNil(), "the manifest's own settings stay")
}

func pod(containers ...string) *corev1.PodSpec {
	p := &corev1.PodSpec{}
	for _, n := range containers {
		p.Containers = append(p.Containers, corev1.Container{Name: n})
	}
	return p
}

func TestEachContainerAndOnContainer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := pod("a", "b", "a")
	var seen []string
	EachContainer(p, func(c *corev1.Container) {
		seen = append(seen, c.Name)
		c.Args = append(c.Args, "--all")
	})
	g.Expect(seen).To(Equal([]string{"a", "b", "a"}))
	OnContainer(p, "b", func(c *corev1.Container) { c.Args = append(c.Args, "--b") })
	OnContainer(p, "missing", func(c *corev1.Container) { c.Args = append(c.Args, "--missing") })
	g.Expect(p.Containers[0].Args).To(Equal([]string{"--all"}))
	g.Expect(p.Containers[1].Args).To(Equal([]string{"--all", "--b"}), "the container itself is changed, not a copy")
	g.Expect(p.Containers[2].Args).To(Equal([]string{"--all"}))
}

func TestSetImages(t *testing.T) {
	t.Parallel()
	images := map[string]string{"driver": "registry/driver:1", "unset": ""}
	imageFor := func(c string) (string, bool) { i, ok := images[c]; return i, ok }
	tests := []struct {
		name    string
		pod     *corev1.PodSpec
		wantErr string
	}{
		{name: "When every container has an image, it should set them all", pod: pod("driver")},
		{name: "When a container is unknown, it should fail and name it", pod: pod("driver", "other"), wantErr: "no image is known for container other"},
		{name: "When a container's image is empty, it should fail and name it", pod: pod("unset"), wantErr: "the image of container unset is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			err := SetImages(tt.pod, imageFor)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tt.pod.Containers[0].Image).To(Equal("registry/driver:1"))
		})
	}
}

func TestMountConfigMapFile(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := pod("driver", "sidecar")
	MountConfigMapFile(p, "driver", ConfigMapFile{Volume: "ca", ConfigMap: "bundle", Key: "ca.pem", Path: "file.pem", Dir: "/etc/ca"})
	g.Expect(p.Volumes).To(Equal([]corev1.Volume{{
		Name: "ca",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "bundle"},
			Items:                []corev1.KeyToPath{{Key: "ca.pem", Path: "file.pem"}},
		}},
	}}))
	g.Expect(p.Containers[0].VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca", ReadOnly: true}}))
	g.Expect(p.Containers[1].VolumeMounts).To(BeEmpty())
}
