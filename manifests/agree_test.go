package manifests_test

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

// TestOperandsAgree checks that what Go says of the embedded YAML is what the YAML holds: the
// names in shared/names the managers read, watch and delete objects by, the containers and
// volumes the adapters look up, and the paths cloud.conf names inside the driver's pods; and that
// the YAML agrees with itself where a fact is written twice, a probed port and its listener.
func TestOperandsAgree(t *testing.T) {
	t.Parallel()
	d := testutil.Decoder(t)
	controller := object[*appsv1.Deployment](t, d, "controller.yaml")
	node := object[*appsv1.DaemonSet](t, d, "node.yaml")

	t.Run("When the managers name an object of the manifests, it should be the manifest's name", func(t *testing.T) {
		g := NewWithT(t)
		for _, n := range []struct{ want, got string }{
			{names.ControllerDeployment, controller.Name},
			{names.ControllerServiceAccount, object[*corev1.ServiceAccount](t, d, "controller_sa.yaml").Name},
			{names.ControllerPDB, object[*policyv1.PodDisruptionBudget](t, d, "controller_pdb.yaml").Name},
			{names.ControllerMetricsService, object[*corev1.Service](t, d, "controller_metrics_service.yaml").Name},
			{names.ControllerServiceMonitor, object[*unstructured.Unstructured](t, d, "controller_servicemonitor.yaml").GetName()},
			{names.TrustedCABundleConfigMap, object[*corev1.ConfigMap](t, d, "trusted_ca_bundle.yaml").Name},
			{names.NodeDaemonSet, node.Name},
			{names.NodeServiceAccount, object[*corev1.ServiceAccount](t, d, "node_sa.yaml").Name},
			{names.DriverName, object[*storagev1.CSIDriver](t, d, "csidriver.yaml").Name},
			{names.StorageClass, object[*storagev1.StorageClass](t, d, "storageclass.yaml").Name},
			{names.VolumeSnapshotCls, object[*snapshotv1.VolumeSnapshotClass](t, d, "volumesnapshotclass.yaml").Name},
			{names.BackupSnapshotClass, object[*snapshotv1.VolumeSnapshotClass](t, d, "volumesnapshotclass_backup.yaml").Name},
		} {
			g.Expect(n.got).To(Equal(n.want))
		}
		g.Expect(node.Namespace).To(Equal(names.GuestNamespace))
		g.Expect(controller.Spec.Selector.MatchLabels).To(Equal(map[string]string{names.ControllerPodLabel: names.ControllerDeployment}))
	})

	t.Run("When an object of the manifests refers to another, it should use the name the managers know", func(t *testing.T) {
		g := NewWithT(t)
		pod := controller.Spec.Template
		g.Expect(pod.Spec.ServiceAccountName).To(Equal(names.ControllerServiceAccount))
		g.Expect(node.Spec.Template.Spec.ServiceAccountName).To(Equal(names.NodeServiceAccount))
		// controllerAntiAffinity spreads the replicas by this label.
		g.Expect(pod.Labels).To(HaveKeyWithValue("app", names.ControllerDeployment))
		pdb := object[*policyv1.PodDisruptionBudget](t, d, "controller_pdb.yaml")
		g.Expect(labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels))).To(BeTrue(), "the PDB covers the controller")
		svc := object[*corev1.Service](t, d, "controller_metrics_service.yaml")
		g.Expect(svc.Annotations).To(HaveKeyWithValue(names.ServingCertAnnotation, names.ControllerMetricsSecret))
		g.Expect(volume(g, pod.Spec, manifests.VolumeMetricsServingCert).Secret.SecretName).To(Equal(names.ControllerMetricsSecret))
		g.Expect(object[*corev1.ConfigMap](t, d, "trusted_ca_bundle.yaml").Labels).To(HaveKeyWithValue(names.InjectTrustedCABundleLabel, "true"))
		g.Expect(object[*storagev1.StorageClass](t, d, "storageclass.yaml").Provisioner).To(Equal(names.DriverName))
		g.Expect(object[*snapshotv1.VolumeSnapshotClass](t, d, "volumesnapshotclass.yaml").Driver).To(Equal(names.DriverName))
		g.Expect(object[*snapshotv1.VolumeSnapshotClass](t, d, "volumesnapshotclass_backup.yaml").Driver).To(Equal(names.DriverName))
		for _, file := range []string{"node_rbac.yaml", "controller_rbac.yaml"} {
			objs, err := d.Operand(file)
			g.Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				var subjects []rbacv1.Subject
				switch b := o.(type) {
				case *rbacv1.RoleBinding:
					subjects = b.Subjects
				case *rbacv1.ClusterRoleBinding:
					subjects = b.Subjects
				}
				for _, s := range subjects {
					if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == names.GuestNamespace {
						g.Expect(s.Name).To(BeElementOf(names.ControllerServiceAccount, names.NodeServiceAccount), "%s binds %s", file, o.GetName())
					}
				}
			}
		}
	})

	t.Run("When cloud.conf names a file in the driver's pods, the manifests should mount it there from the key the managers write", func(t *testing.T) {
		g := NewWithT(t)
		ctrl := controller.Spec.Template.Spec
		g.Expect(mountedFile(g, ctrl, "secret-cinderplugin")).To(Equal(names.CloudsFilePath))
		g.Expect(volume(g, ctrl, "secret-cinderplugin").Secret.SecretName).To(Equal(names.CredentialsSecret))
		g.Expect(volume(g, ctrl, "secret-cinderplugin").Secret.Items[0].Key).To(Equal(names.KeyCloudsYAML))
		g.Expect(mountedFile(g, ctrl, "cacert")).To(Equal(names.CAFilePath))
		g.Expect(volume(g, ctrl, "cacert").ConfigMap.Name).To(Equal(names.CloudConfConfigMap))
		g.Expect(volume(g, ctrl, "cacert").ConfigMap.Items[0].Key).To(Equal(names.KeyCABundle))
		for _, pod := range []corev1.PodSpec{ctrl, node.Spec.Template.Spec} {
			// The guest manager renames the node's copy by this name (cloud-conf-node standalone).
			cm := volume(g, pod, "config-cinderplugin").ConfigMap
			g.Expect(cm.Name).To(Equal(names.CloudConfConfigMap))
			g.Expect(cm.Items[0].Key).To(Equal(nodeconf.KeyCloudConf))
			env := slices.IndexFunc(container(g, pod, manifests.ContainerDriver).Env, func(e corev1.EnvVar) bool { return e.Name == "CLOUD_CONFIG" })
			g.Expect(env).NotTo(Equal(-1))
			g.Expect(container(g, pod, manifests.ContainerDriver).Env[env].Value).To(Equal(mountedFile(g, pod, "config-cinderplugin")))
		}
		registration, ok := testutil.FlagValue(container(g, node.Spec.Template.Spec, manifests.ContainerNodeDriverRegistrar).Args, "kubelet-registration-path")
		g.Expect(ok).To(BeTrue())
		g.Expect(registration).To(Equal(path.Join("/var/lib/kubelet/plugins", names.DriverName, "csi.sock")))
		g.Expect(path.Clean(volume(g, node.Spec.Template.Spec, "socket-dir").HostPath.Path)).To(Equal(path.Dir(registration)))
	})

	t.Run("When a container probes a named port, a container of the pod should serve it", func(t *testing.T) {
		for _, pod := range []corev1.PodSpec{controller.Spec.Template.Spec, node.Spec.Template.Spec} {
			checkProbedPorts(NewWithT(t), pod)
		}
	})

	t.Run("When the adapters look up a container, the manifests should have it", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range []string{manifests.ContainerDriver, manifests.ContainerLivenessProbe, manifests.ContainerProvisioner,
			manifests.ContainerAttacher, manifests.ContainerResizer, manifests.ContainerSnapshotter} {
			container(g, controller.Spec.Template.Spec, name)
		}
		for _, name := range []string{manifests.ContainerDriver, manifests.ContainerLivenessProbe, manifests.ContainerNodeDriverRegistrar} {
			container(g, node.Spec.Template.Spec, name)
		}
		for _, pod := range []corev1.PodSpec{controller.Spec.Template.Spec, node.Spec.Template.Spec} {
			for _, c := range pod.Containers {
				for _, m := range c.VolumeMounts {
					volume(g, pod, m.Name)
				}
			}
		}
	})
}

// checkProbedPorts checks that each named port a liveness probe reaches is a port of its
// container whose number some container of the pod listens on (the driver's health port is
// served by the livenessprobe sidecar beside it).
func checkProbedPorts(g Gomega, pod corev1.PodSpec) {
	listening := map[string]bool{}
	for _, c := range pod.Containers {
		for _, flag := range []string{"health-port", "http-endpoint"} {
			if v, ok := testutil.FlagValue(c.Args, flag); ok {
				if _, port, err := net.SplitHostPort(v); err == nil {
					v = port
				}
				listening[v] = true
			}
		}
	}
	for _, c := range pod.Containers {
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil {
			continue
		}
		name := c.LivenessProbe.HTTPGet.Port.StrVal
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
		g.Expect(i).NotTo(Equal(-1), "%s probes port %q, which it does not declare", c.Name, name)
		g.Expect(listening).To(HaveKey(strconv.Itoa(int(c.Ports[i].ContainerPort))), "nothing listens on the port %s probes", c.Name)
	}
}

// object decodes the single object of the operand file name, or fails the test.
func object[T client.Object](t *testing.T, d *manifests.Decoder, name string) T {
	t.Helper()
	o, err := manifests.Object[T](d, name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// container returns the container name of pod, failing g without it.
func container(g Gomega, pod corev1.PodSpec, name string) corev1.Container {
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	g.Expect(i).NotTo(Equal(-1), "container %s", name)
	if i < 0 {
		return corev1.Container{}
	}
	return pod.Containers[i]
}

// volume returns the volume name of pod, failing g without it.
func volume(g Gomega, pod corev1.PodSpec, name string) corev1.Volume {
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	g.Expect(i).NotTo(Equal(-1), "volume %s", name)
	if i < 0 {
		return corev1.Volume{}
	}
	return pod.Volumes[i]
}

// mountedFile returns the path of the one file the volume name of pod puts into the driver
// container: its mount path joined with the volume's one item.
func mountedFile(g Gomega, pod corev1.PodSpec, name string) string {
	v := volume(g, pod, name)
	var items []corev1.KeyToPath
	switch {
	case v.Secret != nil:
		items = v.Secret.Items
	case v.ConfigMap != nil:
		items = v.ConfigMap.Items
	}
	g.Expect(items).To(HaveLen(1), "volume %s", name)
	mounts := container(g, pod, manifests.ContainerDriver).VolumeMounts
	i := slices.IndexFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == name })
	g.Expect(i).NotTo(Equal(-1), "the driver mounts %s", name)
	if i < 0 || len(items) != 1 {
		return ""
	}
	return path.Join(mounts[i].MountPath, items[0].Path)
}

// TestInstallLeaseRuleAgrees checks that the HyperShift guest RBAC names exactly the sidecar
// leases the controlplane manager may delete.
func TestInstallLeaseRuleAgrees(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile(filepath.Join("install", "hypershift", "guest.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var found bool
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		role := &rbacv1.Role{}
		g.Expect(yaml.Unmarshal([]byte(doc), role)).To(Succeed())
		if role.Kind != "Role" {
			continue
		}
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "leases") {
				found = true
				g.Expect(rule.ResourceNames).To(ConsistOf(names.SidecarLeases))
				g.Expect(rule.Verbs).To(ConsistOf("get", "delete"))
			}
		}
	}
	g.Expect(found).To(BeTrue(), "no lease rule in the guest Role")
}

// TestInstallGuestRulesAgree checks that both install sets' ClusterRole lets the guest manager do
// what its opt-in features need: write per-zone StorageClasses of any name, the backup
// VolumeSnapshotClass by name, watch the nodes' metadata and list claims.
func TestInstallGuestRulesAgree(t *testing.T) {
	for _, file := range []string{filepath.Join("install", "hypershift", "guest.yaml"), filepath.Join("install", "standalone", "operator.yaml")} {
		t.Run("When "+file+" is read, it should grant the guest manager's feature verbs", func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())
			var rules []rbacv1.PolicyRule
			for doc := range strings.SplitSeq(string(b), "\n---\n") {
				role := &rbacv1.ClusterRole{}
				g.Expect(yaml.Unmarshal([]byte(doc), role)).To(Succeed())
				if role.Kind == "ClusterRole" && role.Name == "cinder-csi-operator" {
					rules = append(rules, role.Rules...)
				}
			}
			g.Expect(rules).NotTo(BeEmpty())
			allows := func(group, resource, verb, name string) bool {
				return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
						(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name))
				})
			}
			for _, verb := range []string{"create", "patch", "delete"} {
				g.Expect(allows("storage.k8s.io", "storageclasses", verb, "standard-csi-any-zone")).To(BeTrue(), "%s a per-zone StorageClass", verb)
				g.Expect(allows("snapshot.storage.k8s.io", "volumesnapshotclasses", verb, names.BackupSnapshotClass)).To(BeTrue(), "%s %s", verb, names.BackupSnapshotClass)
			}
			for _, verb := range []string{"list", "watch"} {
				g.Expect(allows("", "nodes", verb, "")).To(BeTrue(), "%s nodes", verb)
			}
			for _, verb := range []string{"list", "watch"} {
				g.Expect(allows("", "persistentvolumeclaims", verb, "")).To(BeTrue(), "%s claims", verb)
			}
		})
	}
}
