// Package operand holds the rules every object the operator applies follows, whichever manager
// computes it: the managed-by label that the caches select, the hardening of every container,
// and the visits of a pod's containers that the adapters share (by name, to set images and
// mount ConfigMaps), so that a rule for the operand's pods is written in one place.
package operand

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Managed adds the label every applied object carries.
func Managed(objs ...client.Object) {
	for _, o := range objs {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[names.ManagedByLabel] = names.ManagedByValue
		o.SetLabels(l)
	}
}

// Harden applies the rules every operand container follows (and HyperShift's e2e checks on every
// control-plane pod): images pulled only when missing, the log as the termination message on
// error, a read-only root file system.
func Harden(c *corev1.Container) {
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	c.SecurityContext.ReadOnlyRootFilesystem = ptr.To(true)
}

// EachContainer calls f on every container of pod, in order. The operands have no init
// containers.
func EachContainer(pod *corev1.PodSpec, f func(c *corev1.Container)) {
	for i := range pod.Containers {
		f(&pod.Containers[i])
	}
}

// OnContainer calls f on the container of pod named name, if there is one.
func OnContainer(pod *corev1.PodSpec, name string, f func(c *corev1.Container)) {
	EachContainer(pod, func(c *corev1.Container) {
		if c.Name == name {
			f(c)
		}
	})
}

// SetImages sets the image of every container of pod to what imageFor gives for its name. A
// container imageFor does not know, or whose image is empty (its environment variable unset),
// is an error: a manifest never keeps its placeholder image.
func SetImages(pod *corev1.PodSpec, imageFor func(container string) (image string, known bool)) error {
	for i := range pod.Containers {
		c := &pod.Containers[i]
		image, known := imageFor(c.Name)
		if !known {
			return fmt.Errorf("no image is known for container %s", c.Name)
		}
		if image == "" {
			return fmt.Errorf("the image of container %s is not set", c.Name)
		}
		c.Image = image
	}
	return nil
}

// ConfigMapFile is one key of a ConfigMap mounted as a file.
type ConfigMapFile struct {
	// Volume names the pod volume.
	Volume string
	// ConfigMap and Key name what is mounted.
	ConfigMap, Key string
	// Path is the file's name in Dir, the directory it is mounted at.
	Path, Dir string
}

// MountConfigMapFile adds f's volume to pod and mounts it read-only into the container named
// container: how a CA bundle reaches the driver.
func MountConfigMapFile(pod *corev1.PodSpec, container string, f ConfigMapFile) {
	pod.Volumes = append(pod.Volumes, corev1.Volume{
		Name: f.Volume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: f.ConfigMap},
			Items:                []corev1.KeyToPath{{Key: f.Key, Path: f.Path}},
		}},
	})
	OnContainer(pod, container, func(c *corev1.Container) {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: f.Volume, MountPath: f.Dir, ReadOnly: true})
	})
}
