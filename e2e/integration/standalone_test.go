// Standalone OpenShift: `cinder-csi-operator standalone` runs both managers in one process
// against one classic cluster, where the controller runs on the masters next to the node plugin,
// in openshift-cluster-csi-drivers. These tests start such a cluster seeded like an OpenShift
// install (Infrastructure, Proxy, the cloud-provider config with the OpenStack CA, the
// credentials Secret) and hold the operator to what csi-operator's standalone flavour does there:
// placement and replicas from the control plane topology, the cluster-wide proxy and trusted CA
// bundle in the driver container, the controller's in-cluster RBAC, a credential-free node copy of
// cloud-conf, rollouts of exactly the pods an input concerns, stomp-back, bad input, and silence
// at rest.
package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"gopkg.in/ini.v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

const (
	// standaloneManager is the name the standalone operator's requests are recorded under.
	standaloneManager = "standalone"
	// standaloneIdleWindow is how long the standalone operator is watched at rest. It is two
	// minutes, shorter than the five of the HyperShift TestSteadyState, to keep CI time down:
	// the standalone operator runs the same reconcilers and the same apply path, and two
	// minutes still span four to five lease renewals at OpenShift's 26 s retry period.
	standaloneIdleWindow = 2 * time.Minute
	// standaloneSettleQuiet is how long the operator may not have written (leases aside) for
	// the install to count as settled.
	standaloneSettleQuiet = 20 * time.Second
	// Lease renewals expected in standaloneIdleWindow: 120 s / 26 s is 4.6; controller-
	// runtime's default retry period of 2 s would give about 60.
	minStandaloneRenewals, maxStandaloneRenewals = 3, 7
	// standaloneKeepWindow is how long a test watches that something does not happen after
	// the operator had every chance to do it.
	standaloneKeepWindow = 5 * time.Second
	// trustedCAVolume and trustedCAPath are where csi-operator (and so this operator) mounts
	// the cluster's trusted CA bundle into the driver container.
	trustedCAVolume = "non-standard-root-system-trust-ca-bundle"
	trustedCAPath   = "/etc/pki/ca-trust/extracted/pem"
	// deploymentRevision is the annotation the Deployment controller numbers rollouts with,
	// on the Deployment and on each of its ReplicaSets.
	deploymentRevision = "deployment.kubernetes.io/revision"
)

// masterRoleLabel is the role label (and taint key) of OpenShift masters.
const masterRoleLabel = "node-role.kubernetes.io/master"

// masterTolerations are the tolerations a standalone controller pod needs on OpenShift masters.
var masterTolerations = []corev1.Toleration{
	{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
	{Key: masterRoleLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// TestStandaloneInstall installs the driver on a single-node (SingleReplica) OpenShift cluster
// from nothing, checks every standalone-specific object and field, then changes one input at a
// time (proxy, trusted CA bundle, credentials) and checks that exactly the controller rolls, and
// finally checks stomp-back and bad input.
func TestStandaloneInstall(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 1, Workers: 1})
	ctx := context.Background()
	g := NewWithT(t)

	// The seed puts the OpenStack CA both into the credentials Secret (cacert, which the
	// operator prefers) and into the cloud-provider config. Drop the Secret's copy, as a cloud
	// credential operator that writes only clouds.yaml leaves it, so that the CA the operator
	// uses can only have come from the cloud-provider config named by Infrastructure.
	update(t, e.MgmtClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CredentialsSecret}},
		"cloud-credential-operator", func(s *corev1.Secret) { delete(s.Data, names.KeyCACert) })
	cloudProviderConfig := configMap(g, e.GuestClient, names.OpenShiftConfigNamespace, env.CloudProviderConfig)
	g.Expect(cloudProviderConfig.Data[names.KeyCABundle]).NotTo(BeEmpty())
	infra := &configv1.Infrastructure{}
	g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.InfrastructureName}, infra)).To(Succeed())
	g.Expect(infra.Status.ControlPlaneTopology).To(Equal(configv1.SingleReplicaTopologyMode))

	start := time.Now()
	e.RunOperatorForTest(t, env.OperatorOptions{})

	t.Run("When the operator starts on a freshly installed single-node cluster, it should report the driver Available", func(t *testing.T) {
		waitAvailable(t, e)
		t.Logf("Available %s after the operator started", time.Since(start).Round(100*time.Millisecond))
		g := NewWithT(t)
		d := driver(g, e)
		expectNotDegraded(g, d)
		// The operator listed the zones over HTTPS with the CA from the cloud-provider config.
		c := condition(g, e, names.ConditionTopologyDegraded)
		g.Expect(c.Reason).To(Equal(names.ReasonAsExpected), c.Message)
		g.Expect(c.Message).To(HavePrefix("Topology is enabled"))
	})

	t.Run("When the control plane topology is SingleReplica, it should run one controller replica on the master", func(t *testing.T) {
		g := NewWithT(t)
		dep := controllerDeployment(g, e)
		g.Expect(dep.Spec.Replicas).To(Equal(ptr.To[int32](1)))
		pod := dep.Spec.Template.Spec
		g.Expect(pod.NodeSelector).To(Equal(map[string]string{masterRoleLabel: ""}))
		g.Expect(pod.Tolerations).To(ConsistOf(masterTolerations))
		masters := masterNodes(g, e)
		g.Expect(masters).To(HaveLen(1))
		g.Eventually(func(g Gomega) {
			pods := controllerPods(g, e)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(masters).To(HaveKey(pods[0].Spec.NodeName), "the controller pod runs on node %q", pods[0].Spec.NodeName)
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When installed, it should tag the driver's volumes with the Infrastructure's infrastructure name", func(t *testing.T) {
		g := NewWithT(t)
		c := container(&controllerDeployment(g, e).Spec.Template.Spec, "csi-driver")
		g.Expect(c).NotTo(BeNil())
		g.Expect(flagValues(c.Args, "--cluster")).To(Equal([]string{infra.Status.InfrastructureName}))
	})

	t.Run("When installed, it should run the controller at system-cluster-critical priority", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(controllerDeployment(g, e).Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
	})

	t.Run("When installed, it should give no controller container a kubeconfig: the sidecars use the ServiceAccount", func(t *testing.T) {
		g := NewWithT(t)
		dep := controllerDeployment(g, e)
		pod := dep.Spec.Template.Spec
		g.Expect(pod.ServiceAccountName).To(Equal(names.ControllerServiceAccount))
		for _, c := range pod.Containers {
			g.Expect(flagValues(c.Args, "--kubeconfig")).To(BeEmpty(), c.Name)
			for _, env := range c.Env {
				g.Expect(env.Name).NotTo(Equal("KUBECONFIG"), c.Name)
			}
		}
		for _, sidecar := range []string{"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"} {
			c := container(&pod, sidecar)
			g.Expect(c).NotTo(BeNil(), sidecar)
			g.Expect(flagValues(c.Args, "--leader-election-namespace")).To(Equal([]string{names.GuestNamespace}), sidecar)
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				g.Expect(v.Secret.SecretName).NotTo(Equal(names.GuestKubeconfigSecret), v.Name)
			}
		}
		g.Expect(dep.Spec.Template.Labels).NotTo(HaveKey(names.HostedControlPlaneLabel))
	})

	t.Run("When installed, it should create the controller's RBAC bound to its ServiceAccount", func(t *testing.T) {
		g := NewWithT(t)
		expectControllerRBAC(g, e)
	})

	t.Run("When installed, it should point the driver at clouds.yaml and at the CA from the cloud-provider config in the controller copy of cloud-conf", func(t *testing.T) {
		g := NewWithT(t)
		cm := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)
		global := iniSection(g, cm.Data[nodeconf.KeyCloudConf], "Global")
		g.Expect(global).To(Equal(map[string]string{
			"use-clouds":  "true",
			"clouds-file": names.CloudsFilePath,
			"cloud":       env.CloudName,
			"ca-file":     names.CAFilePath,
		}))
		g.Expect(strings.TrimSpace(cm.Data[nodeconf.KeyCABundle])).To(Equal(strings.TrimSpace(cloudProviderConfig.Data[names.KeyCABundle])))
		g.Expect(cm.Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, "true"))

		// The controller mounts this copy, the credentials and the CA from it.
		pod := controllerDeployment(g, e).Spec.Template.Spec
		g.Expect(configMapVolumes(pod)).To(ConsistOf(names.CloudConfConfigMap, names.CloudConfConfigMap))
		g.Expect(secretVolumes(pod)).To(ContainElement(names.CredentialsSecret))
	})

	t.Run("When installed, it should give the node plugin cloud-conf-node, which names no credentials", func(t *testing.T) {
		g := NewWithT(t)
		cm := configMap(g, e.GuestClient, names.GuestNamespace, nodeconf.StandaloneName)
		g.Expect(cm.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
		g.Expect(cm.Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, "true"))
		g.Expect(cm.Data).NotTo(HaveKey(nodeconf.KeyCABundle))
		sections := iniSectionNames(g, cm.Data[nodeconf.KeyCloudConf])
		g.Expect(sections).NotTo(ContainElement("Global"))
		for k, v := range cm.Data {
			g.Expect(v).NotTo(ContainSubstring("clouds"), k)
			g.Expect(v).NotTo(ContainSubstring(fakeopenstack.DefaultPassword), k)
			g.Expect(v).NotTo(ContainSubstring(e.OpenStack.URL()), k)
		}

		ds := nodeDaemonSet(g, e)
		pod := ds.Spec.Template.Spec
		g.Expect(configMapVolumes(pod)).To(Equal([]string{nodeconf.StandaloneName}))
		g.Expect(secretVolumes(pod)).To(BeEmpty())
		c := container(&pod, "csi-driver")
		g.Expect(c).NotTo(BeNil())
		for _, env := range c.Env {
			g.Expect(env.ValueFrom).To(BeNil(), env.Name)
		}
		g.Expect(flagValues(c.Args, "--with-topology")).To(Equal([]string{"true"}))
		// The node rolls when its own copy changes: the hash is the hash of cloud-conf-node.
		g.Expect(ds.Spec.Template.Annotations).To(HaveKeyWithValue(cloudConfHashKey, confighash.ConfigMapKeys(cm, nodeconf.PluginKeys...)))
	})

	t.Run("When installed, it should create the trusted CA bundle ConfigMap for the cluster network operator to fill", func(t *testing.T) {
		g := NewWithT(t)
		cm := configMap(g, e.MgmtClient, e.Namespace, names.TrustedCABundleConfigMap)
		g.Expect(cm.Labels).To(HaveKeyWithValue(names.InjectTrustedCABundleLabel, "true"))
		g.Expect(cm.Data).To(BeEmpty())
		// Nothing to mount yet.
		pod := controllerDeployment(g, e).Spec.Template.Spec
		g.Expect(volumeNames(pod)).NotTo(ContainElement(trustedCAVolume))
	})

	t.Run("When the install is done, it should have rolled out each workload exactly once", func(t *testing.T) {
		g := NewWithT(t)
		waitRolledOut(g, e)
		expectRolledOutOnce(g, e)
	})

	t.Run("When the cluster-wide proxy is set, it should give the driver container the proxy and roll the controller only", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshotWorkloads(g, e)
		proxy := configv1.ProxyStatus{
			HTTPProxy:  "http://proxy.example.com:3128",
			HTTPSProxy: "http://proxy.example.com:3129",
			NoProxy:    ".cluster.local,.svc,10.0.0.0/16,169.254.169.254",
		}
		updateStatus(t, e.GuestClient, &configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: names.ProxyName}},
			func(p *configv1.Proxy) { p.Status = proxy })

		expectControllerRolledOnce(t, e, before, func(g Gomega, pod corev1.PodSpec) {
			c := container(&pod, "csi-driver")
			g.Expect(c).NotTo(BeNil())
			g.Expect(envValues(c, "HTTP_PROXY")).To(Equal([]string{proxy.HTTPProxy}))
			g.Expect(envValues(c, "HTTPS_PROXY")).To(Equal([]string{proxy.HTTPSProxy}))
			g.Expect(envValues(c, "NO_PROXY")).To(Equal([]string{proxy.NoProxy}))
		})
		// Only the driver talks to OpenStack through the proxy.
		pod := controllerDeployment(g, e).Spec.Template.Spec
		for _, c := range pod.Containers {
			if c.Name != "csi-driver" {
				g.Expect(envValues(&c, "HTTPS_PROXY")).To(BeEmpty(), c.Name)
			}
		}
		expectNodeNotRolled(t, e, before)
	})

	t.Run("When the cluster network operator fills the trusted CA bundle, it should mount it into the driver and roll the controller only", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshotWorkloads(g, e)
		bundle := string(e.OpenStack.CACertPEM())
		update(t, e.MgmtClient, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.TrustedCABundleConfigMap}},
			"cluster-network-operator", func(cm *corev1.ConfigMap) {
				cm.Data = map[string]string{names.KeyTrustedCA: bundle}
			})

		expectControllerRolledOnce(t, e, before, func(g Gomega, pod corev1.PodSpec) {
			var vol *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == trustedCAVolume {
					vol = &pod.Volumes[i]
				}
			}
			g.Expect(vol).NotTo(BeNil(), "volume %s", trustedCAVolume)
			g.Expect(vol.ConfigMap).NotTo(BeNil())
			g.Expect(vol.ConfigMap.Name).To(Equal(names.TrustedCABundleConfigMap))
			g.Expect(vol.ConfigMap.Items).To(Equal([]corev1.KeyToPath{{Key: names.KeyTrustedCA, Path: "tls-ca-bundle.pem"}}))
			for _, c := range pod.Containers {
				var mounts []corev1.VolumeMount
				for _, m := range c.VolumeMounts {
					if m.Name == trustedCAVolume {
						mounts = append(mounts, m)
					}
				}
				if c.Name == "csi-driver" {
					g.Expect(mounts).To(Equal([]corev1.VolumeMount{{Name: trustedCAVolume, MountPath: trustedCAPath, ReadOnly: true}}))
				} else {
					g.Expect(mounts).To(BeEmpty(), c.Name)
				}
			}
		})
		expectNodeNotRolled(t, e, before)
		// The operator applies the label only: the bundle the network operator wrote stays.
		cm := configMap(g, e.MgmtClient, e.Namespace, names.TrustedCABundleConfigMap)
		g.Expect(cm.Data).To(Equal(map[string]string{names.KeyTrustedCA: bundle}))
		g.Expect(cm.Labels).To(HaveKeyWithValue(names.InjectTrustedCABundleLabel, "true"))
	})

	t.Run("When clouds.yaml in the credentials Secret changes, it should roll the controller only", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshotWorkloads(g, e)
		nodeConf := configMap(g, e.GuestClient, names.GuestNamespace, nodeconf.StandaloneName)
		// The same user with a versioned auth_url: different bytes, still a working credential.
		clouds, err := e.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{CloudName: env.CloudName})
		g.Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CredentialsSecret}}
		update(t, e.MgmtClient, secret, "cloud-credential-operator", func(s *corev1.Secret) { s.Data[names.KeyCloudsYAML] = clouds })
		rotated := confighash.SecretKeys(secret, names.KeyCloudsYAML)
		g.Expect(rotated).NotTo(Equal(before.deployment.Spec.Template.Annotations[credentialsHashKey]))

		expectControllerRolledOnce(t, e, before, func(g Gomega, _ corev1.PodSpec) {
			tmpl := controllerDeployment(g, e).Spec.Template
			g.Expect(tmpl.Annotations).To(HaveKeyWithValue(credentialsHashKey, rotated))
			// cloud.conf only names the mounted clouds.yaml: its hash stays.
			g.Expect(tmpl.Annotations).To(HaveKeyWithValue(cloudConfHashKey, before.deployment.Spec.Template.Annotations[cloudConfHashKey]))
		})
		expectNodeNotRolled(t, e, before)
		after := configMap(g, e.GuestClient, names.GuestNamespace, nodeconf.StandaloneName)
		g.Expect(after.ResourceVersion).To(Equal(nodeConf.ResourceVersion), "cloud-conf-node was rewritten")
	})

	t.Run("When the user's cinder-csi-config sets [BlockStorage], [Metadata] and enable_topology, it should write them to the right copies and roll each side once", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshotWorkloads(g, e)
		// The fake OpenStack's zones match, so detection says true: the override must win.
		g.Expect(containerArgs(before.deployment.Spec.Template.Spec, "csi-driver")).To(ContainElement("--with-topology=true"))
		const block = "[BlockStorage]\nnode-volume-attach-limit = 25\n"
		const metadata = "[Metadata]\nsearch-order = metadataService\n"
		setUserConfig(t, e, map[string]string{
			names.KeyUserConfig:     block + metadata + "[Global]\nauth-url = https://elsewhere.example\n",
			names.KeyEnableTopology: "false",
		})

		expectControllerRolledOnce(t, e, before, func(g Gomega, pod corev1.PodSpec) {
			g.Expect(flagValues(containerArgs(pod, "csi-driver"), "--with-topology")).To(Equal([]string{"false"}))
		})
		g.Eventually(func(g Gomega) {
			ds := nodeDaemonSet(g, e)
			g.Expect(flagValues(containerArgs(ds.Spec.Template.Spec, "csi-driver"), "--with-topology")).To(Equal([]string{"false"}))
			g.Expect(ds.Generation).To(Equal(before.daemonSet.Generation + 1))
			expectDaemonSetRolledOut(g, ds)
			g.Expect(daemonSetRevisions(g, e)).To(HaveLen(len(before.revisions) + 1))
		}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())

		controllerConf := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(block))
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(names.CloudsFilePath), "[Global] is the operator's, not the user's")
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("elsewhere.example"))
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("[Metadata]"), "the controller calls no metadata service")
		g.Expect(controllerConf.Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, "false"))

		nodeConf := configMap(g, e.GuestClient, names.GuestNamespace, nodeconf.StandaloneName)
		g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(block))
		g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(metadata))
		g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("[Global]"))
		g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("elsewhere.example"))
		g.Expect(nodeConf.Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, "false"))
		expectNotDegraded(g, driver(g, e))
	})

	t.Run("When a user edits managed fields of the controller Deployment, it should revert them and keep the user's own annotation", func(t *testing.T) {
		g := NewWithT(t)
		dep0 := controllerDeployment(g, e)
		const key, value = "example.com/owner-team", "storage"
		patch := client.MergeFrom(dep0.DeepCopy())
		metav1.SetMetaDataAnnotation(&dep0.ObjectMeta, key, value)
		g.Expect(e.MgmtClient.Patch(ctx, dep0, patch, client.FieldOwner("user-tooling"))).To(Succeed())
		dep0 = controllerDeployment(g, e)

		update(t, e.MgmtClient, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerDeployment}},
			userManager, func(d *appsv1.Deployment) {
				d.Spec.Replicas = ptr.To[int32](3)
				d.Spec.Template.Spec.PriorityClassName = ""
				d.Spec.Template.Spec.NodeSelector = nil
				c := container(&d.Spec.Template.Spec, "csi-driver")
				c.Args = append(c.Args, "--cluster=someone-else")
			})
		g.Eventually(func(g Gomega) {
			d := controllerDeployment(g, e)
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)))
			g.Expect(mustJSON(g, d.Spec.Template)).To(MatchJSON(mustJSON(g, dep0.Spec.Template)))
			g.Expect(d.Annotations).To(HaveKeyWithValue(key, value))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
	})

	t.Run("When a user deletes the node DaemonSet, it should recreate it as it was", func(t *testing.T) {
		g := NewWithT(t)
		ds0 := nodeDaemonSet(g, e)
		g.Expect(e.GuestClient.Delete(ctx, ds0, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		g.Eventually(func(g Gomega) {
			ds := nodeDaemonSet(g, e)
			g.Expect(ds.UID).NotTo(Equal(ds0.UID), "still the deleted DaemonSet")
			g.Expect(ds.DeletionTimestamp).To(BeNil())
			g.Expect(ds.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
			g.Expect(mustJSON(g, ds.Spec.Template)).To(MatchJSON(mustJSON(g, ds0.Spec.Template)))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
	})

	t.Run("When clouds.yaml is malformed, it should report OpenStackCinderConfigDegraded naming the Secret and keep the objects; when fixed, it should recover", func(t *testing.T) {
		expectBadCredentialsKept(t, e, []byte("clouds:\n  openstack: [unclosed\n"), "is not valid YAML")
	})

	t.Run("When clouds.yaml has no entry for the cloud Infrastructure names, it should say where that name comes from and keep the objects; when fixed, it should recover", func(t *testing.T) {
		g := NewWithT(t)
		other, err := e.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{CloudName: "other-cloud", Versionless: true})
		g.Expect(err).NotTo(HaveOccurred())
		msg := expectBadCredentialsKept(t, e, other, `has no cloud named "`+env.CloudName+`"`, "Infrastructure", "status.platformStatus.openstack.cloudName")
		// A standalone cluster has no HostedControlPlane to look at.
		g.Expect(msg).NotTo(ContainSubstring("HostedControlPlane"))
	})
}

// TestStandaloneHighlyAvailable runs the operator with leader election on a three-master cluster
// whose control plane is HighlyAvailable: two controller replicas on two masters, silence at
// rest, and, once the control plane is reported External, one replica off the masters.
func TestStandaloneHighlyAvailable(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 3, Workers: 2, HighlyAvailable: true})
	op := e.RunOperatorForTest(t, env.OperatorOptions{LeaderElection: true})
	waitAvailable(t, e)

	t.Run("When the control plane is HighlyAvailable, it should run two controller replicas on two different masters", func(t *testing.T) {
		g := NewWithT(t)
		dep := controllerDeployment(g, e)
		g.Expect(dep.Spec.Replicas).To(Equal(ptr.To[int32](2)))
		g.Expect(dep.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{masterRoleLabel: ""}))
		g.Expect(dep.Spec.Template.Spec.Tolerations).To(ConsistOf(masterTolerations))
		masters := masterNodes(g, e)
		g.Expect(masters).To(HaveLen(3))
		g.Eventually(func(g Gomega) {
			expectDeploymentRolledOut(g, controllerDeployment(g, e))
			pods := controllerPods(g, e)
			g.Expect(pods).To(HaveLen(2))
			nodes := map[string]bool{}
			for _, p := range pods {
				g.Expect(masters).To(HaveKey(p.Spec.NodeName), "pod %s runs on node %q", p.Name, p.Spec.NodeName)
				nodes[p.Spec.NodeName] = true
			}
			g.Expect(nodes).To(HaveLen(2), "the two replicas share a node")
		}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
	})

	// Steady state: wait until the install has settled, then watch the operator at rest.
	NewWithT(t).Eventually(func(g Gomega) {
		var last time.Time
		for _, r := range op.Requests[standaloneManager].Since(time.Time{}) {
			if r.Mutating() && !r.Lease() {
				last = r.Time
			}
		}
		g.Expect(last).NotTo(BeZero(), "the operator never wrote: the install cannot have happened")
		g.Expect(time.Since(last)).To(BeNumerically(">=", standaloneSettleQuiet), "the operator wrote recently")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	controllers := []string{"controlplane", "guest"}
	reconcilesBefore := map[string]int{}
	for _, c := range controllers {
		reconcilesBefore[c] = op.Reconciles.Count(c)
		NewWithT(t).Expect(reconcilesBefore[c]).To(BeNumerically(">", 0), "reconciles of %s counted during the install", c)
	}
	start := time.Now()
	t.Logf("Install settled; watching the operator at rest for %s", standaloneIdleWindow)
	// The test must observe that nothing happens over the whole window, so it waits the window
	// out rather than polling for a condition.
	time.Sleep(standaloneIdleWindow)
	end := time.Now()
	var window []env.Request
	for _, r := range op.Requests[standaloneManager].Since(start) {
		if r.Time.Before(end) {
			window = append(window, r)
		}
	}
	lockPath := "/namespaces/" + e.Namespace + "/leases/" + names.LeaderElectionControlPlane

	t.Run("When nothing changes for two minutes, it should send no mutating request but its lease renewals, at OpenShift's pace", func(t *testing.T) {
		g := NewWithT(t)
		var writes []string
		renewals := 0
		for _, r := range window {
			switch {
			case !r.Mutating():
			case r.Lease() && r.Method == http.MethodPut && strings.HasSuffix(r.Path, lockPath):
				renewals++
			default:
				writes = append(writes, requestLine(r))
			}
		}
		t.Logf("%d mutating requests besides %d lease renewals in %s", len(writes), renewals, standaloneIdleWindow)
		g.Expect(writes).To(BeEmpty(), "mutating requests at rest")
		g.Expect(renewals).To(BeNumerically(">=", minStandaloneRenewals), "lease renewals")
		g.Expect(renewals).To(BeNumerically("<=", maxStandaloneRenewals), "lease renewals")
	})

	t.Run("When nothing changes for two minutes, it should read only through watches", func(t *testing.T) {
		g := NewWithT(t)
		var polls []string
		watches := 0
		for _, r := range window {
			switch {
			case r.Method != http.MethodGet || r.Lease():
			case r.Watch:
				watches++
			default:
				polls = append(polls, requestLine(r))
			}
		}
		t.Logf("%d watch requests, %d other reads (leases aside) in %s", watches, len(polls), standaloneIdleWindow)
		g.Expect(polls).To(BeEmpty(), "reads that are not watches")
	})

	t.Run("When nothing changes for two minutes, it should run no reconcile loop", func(t *testing.T) {
		g := NewWithT(t)
		for _, c := range controllers {
			// An informer relist replays every object once: allow for one or two.
			g.Expect(op.Reconciles.Count(c)-reconcilesBefore[c]).To(BeNumerically("<=", 2), "reconciles of %s at rest", c)
		}
	})

	t.Run("When the control plane becomes External, it should run one replica with no master node selector or tolerations, off the masters", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshotWorkloads(g, e)
		updateStatus(t, e.GuestClient, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: names.InfrastructureName}},
			func(i *configv1.Infrastructure) { i.Status.ControlPlaneTopology = configv1.ExternalTopologyMode })

		masters := masterNodes(g, e)
		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Spec.Replicas).To(Equal(ptr.To[int32](1)))
			pod := dep.Spec.Template.Spec
			g.Expect(pod.NodeSelector).NotTo(HaveKey(masterRoleLabel))
			for _, tol := range pod.Tolerations {
				g.Expect(tol.Key).NotTo(Equal(masterRoleLabel))
				g.Expect(tol.Key).NotTo(Equal("CriticalAddonsOnly"))
			}
			expectDeploymentRolledOut(g, dep)
			pods := controllerPods(g, e)
			g.Expect(pods).To(HaveLen(1))
			// Without the master toleration the pod cannot run on a (tainted) master.
			g.Expect(pods[0].Spec.NodeName).NotTo(BeEmpty())
			g.Expect(masters).NotTo(HaveKey(pods[0].Spec.NodeName))
		}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(replicaSets(g, e)).To(HaveLen(len(before.replicaSets) + 1))
		expectNodeNotRolled(t, e, before)
		waitAvailable(t, e)
	})
}

// workloads is the state of both workloads before an input changes.
type workloads struct {
	deployment  *appsv1.Deployment
	daemonSet   *appsv1.DaemonSet
	replicaSets []appsv1.ReplicaSet
	revisions   []appsv1.ControllerRevision
}

// snapshotWorkloads waits until both workloads are rolled out and records them.
func snapshotWorkloads(g Gomega, e *env.Env) workloads {
	var w workloads
	g.Eventually(func(g Gomega) {
		w = workloads{
			deployment: controllerDeployment(g, e), daemonSet: nodeDaemonSet(g, e),
			replicaSets: replicaSets(g, e), revisions: daemonSetRevisions(g, e),
		}
		expectDeploymentRolledOut(g, w.deployment)
		expectDaemonSetRolledOut(g, w.daemonSet)
	}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
	return w
}

// expectControllerRolledOnce waits until the controller Deployment has rolled out exactly one new
// template (one more generation, one more ReplicaSet, the old one scaled down) that check accepts.
func expectControllerRolledOnce(t *testing.T, e *env.Env, before workloads, check func(Gomega, corev1.PodSpec)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		dep := controllerDeployment(g, e)
		check(g, dep.Spec.Template.Spec)
		g.Expect(dep.Generation).To(Equal(before.deployment.Generation + 1))
		expectDeploymentRolledOut(g, dep)
		rss := replicaSets(g, e)
		g.Expect(rss).To(HaveLen(len(before.replicaSets) + 1))
		// The Deployment controller marks its current ReplicaSet with the Deployment's revision.
		revision := dep.Annotations[deploymentRevision]
		g.Expect(revision).NotTo(BeEmpty())
		current := 0
		for _, rs := range rss {
			if rs.Annotations[deploymentRevision] == revision {
				current++
				g.Expect(rs.Status.AvailableReplicas).To(Equal(ptr.Deref(dep.Spec.Replicas, 1)), rs.Name)
			} else {
				g.Expect(ptr.Deref(rs.Spec.Replicas, -1)).To(BeZero(), rs.Name)
			}
		}
		g.Expect(current).To(Equal(1), "ReplicaSets of revision %s", revision)
	}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
	waitAvailable(t, e)
}

// expectNodeNotRolled checks, over a window after the controller rolled, that the node DaemonSet
// kept its template and rolled nothing.
func expectNodeNotRolled(t *testing.T, e *env.Env, before workloads) {
	t.Helper()
	g := NewWithT(t)
	template := mustJSON(g, before.daemonSet.Spec.Template)
	// Something that must not happen: watch for a while in case the guest side reacts late.
	g.Consistently(func(g Gomega) {
		ds := nodeDaemonSet(g, e)
		g.Expect(ds.UID).To(Equal(before.daemonSet.UID))
		g.Expect(ds.Generation).To(Equal(before.daemonSet.Generation))
		g.Expect(mustJSON(g, ds.Spec.Template)).To(MatchJSON(template))
		g.Expect(daemonSetRevisions(g, e)).To(HaveLen(len(before.revisions)))
	}).WithTimeout(standaloneKeepWindow).WithPolling(poll).Should(Succeed())
}

// expectBadCredentialsKept replaces clouds.yaml in the credentials Secret with bad, expects
// OpenStackCinderConfigDegraded naming the Secret and each of mention, with a Warning Event, while
// every object stays as it was; then restores the good clouds.yaml and expects recovery without a
// rollout. It returns the condition's message.
func expectBadCredentialsKept(t *testing.T, e *env.Env, bad []byte, mention ...string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	waitAvailable(t, e)
	before := snapshotWorkloads(g, e)
	controllerConf := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)
	key := client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}
	secret := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(ctx, key, secret)).To(Succeed())
	good := secret.Data[names.KeyCloudsYAML]

	since := time.Now().Add(-time.Second).Truncate(time.Second)
	update(t, e.MgmtClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		"cloud-credential-operator", func(s *corev1.Secret) { s.Data[names.KeyCloudsYAML] = bad })
	var msg string
	g.Eventually(func(g Gomega) {
		c := condition(g, e, names.ConditionConfigDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Message)
		g.Expect(c.Reason).To(Equal(names.ReasonInvalidCredentials))
		g.Expect(c.Message).To(ContainSubstring(key.String()))
		g.Expect(c.Message).To(ContainSubstring(names.KeyCloudsYAML))
		for _, m := range mention {
			g.Expect(c.Message).To(ContainSubstring(m))
		}
		msg = c.Message
		var warnings []string
		for _, ev := range driverEvents(g, e) {
			observed := ev.EventTime.Time
			if ev.Series != nil {
				observed = ev.Series.LastObservedTime.Time
			}
			if ev.Type == corev1.EventTypeWarning && ev.Reason == names.ReasonInvalidCredentials && !observed.Before(since) {
				warnings = append(warnings, ev.Note)
			}
		}
		g.Expect(warnings).To(ContainElement(ContainSubstring(names.ConditionConfigDegraded)))
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	// The reconcile that reported it has decided; watch that no later one acts on the bad input.
	g.Consistently(func(g Gomega) {
		dep := controllerDeployment(g, e)
		g.Expect(dep.UID).To(Equal(before.deployment.UID))
		g.Expect(dep.Generation).To(Equal(before.deployment.Generation))
		g.Expect(replicaSets(g, e)).To(HaveLen(len(before.replicaSets)))
		g.Expect(configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap).Data).To(Equal(controllerConf.Data))
		g.Expect(nodeDaemonSet(g, e).Generation).To(Equal(before.daemonSet.Generation))
		g.Expect(condition(g, e, names.ConditionControllerAvailable).Status).To(Equal(operatorv1.ConditionTrue))
	}).WithTimeout(standaloneKeepWindow).WithPolling(poll).Should(Succeed())

	update(t, e.MgmtClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		"cloud-credential-operator", func(s *corev1.Secret) { s.Data[names.KeyCloudsYAML] = good })
	g.Eventually(func(g Gomega) {
		c := condition(g, e, names.ConditionConfigDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
		expectNotDegraded(g, driver(g, e))
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	waitAvailable(t, e)
	// The restored Secret is the one the pods already run with: nothing rolls.
	g.Expect(controllerDeployment(g, e).Generation).To(Equal(before.deployment.Generation))
	g.Expect(replicaSets(g, e)).To(HaveLen(len(before.replicaSets)))
	return msg
}

// expectControllerRBAC checks the RBAC the controller's sidecars and metrics proxies need in a
// standalone cluster, each bound to the controller's ServiceAccount and labelled as managed.
func expectControllerRBAC(g Gomega, e *env.Env) {
	ctx := context.Background()
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: names.ControllerServiceAccount, Namespace: e.Namespace}
	managed := HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue)

	const lease = names.AssetPrefix + "-lease-leader-election"
	role := &rbacv1.Role{}
	g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: lease}, role)).To(Succeed())
	g.Expect(role.Labels).To(managed)
	g.Expect(role.Rules).To(ContainElement(And(
		HaveField("APIGroups", ConsistOf("coordination.k8s.io")),
		HaveField("Resources", ConsistOf("leases")),
		HaveField("Verbs", ContainElements("get", "watch", "list", "create", "update", "delete")),
	)))
	rb := &rbacv1.RoleBinding{}
	g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: lease}, rb)).To(Succeed())
	g.Expect(rb.Labels).To(managed)
	g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: lease}))
	g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{sa}))

	bindings := map[string]string{
		"openstack-cinder-csi-main-provisioner-binding":                  "openshift-csi-main-provisioner-role",
		"openstack-cinder-csi-main-attacher-binding":                     "openshift-csi-main-attacher-role",
		"openstack-cinder-csi-main-resizer-binding":                      "openshift-csi-main-resizer-role",
		"openstack-cinder-csi-main-snapshotter-binding":                  "openshift-csi-main-snapshotter-role",
		"openstack-cinder-csi-storageclass-reader-resizer-binding":       "openshift-csi-resizer-storageclass-reader-role",
		"openstack-cinder-csi-volumesnapshot-reader-provisioner-binding": "openshift-csi-provisioner-volumesnapshot-reader-role",
		"openstack-cinder-kube-rbac-proxy-binding":                       "openstack-cinder-kube-rbac-proxy-role",
	}
	for name, roleName := range bindings {
		crb := &rbacv1.ClusterRoleBinding{}
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: name}, crb)).To(Succeed(), name)
		g.Expect(crb.Labels).To(managed, name)
		g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}), name)
		g.Expect(crb.Subjects).To(Equal([]rbacv1.Subject{sa}), name)
	}
	proxyRole := &rbacv1.ClusterRole{}
	g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: "openstack-cinder-kube-rbac-proxy-role"}, proxyRole)).To(Succeed())
	g.Expect(proxyRole.Labels).To(managed)
	g.Expect(proxyRole.Rules).To(ContainElement(And(
		HaveField("APIGroups", ConsistOf("authentication.k8s.io")),
		HaveField("Resources", ConsistOf("tokenreviews")),
		HaveField("Verbs", ConsistOf("create")),
	)))
}

// updateStatus reads obj, lets mutate change it and writes its status back, retrying on
// conflicts, the way the cluster's config operators update Infrastructure and Proxy status.
func updateStatus[T client.Object](t *testing.T, c client.Client, obj T, mutate func(T)) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(obj)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Status().Update(ctx, obj)
	})
	NewWithT(t).Expect(err).To(Succeed(), "updating the status of %T %s", obj, key)
}

// controllerPods returns the controller's pods that are not being deleted.
func controllerPods(g Gomega, e *env.Env) []corev1.Pod {
	l := &corev1.PodList{}
	g.Expect(e.MgmtClient.List(context.Background(), l, client.InNamespace(e.Namespace),
		client.MatchingLabels{"app": names.ControllerDeployment})).To(Succeed())
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// masterNodes returns the names of the nodes with the master role.
func masterNodes(g Gomega, e *env.Env) map[string]bool {
	l := &corev1.NodeList{}
	g.Expect(e.GuestClient.List(context.Background(), l, client.HasLabels{masterRoleLabel})).To(Succeed())
	out := map[string]bool{}
	for _, n := range l.Items {
		out[n.Name] = true
	}
	return out
}

// envValues returns the values of every env entry of c with the given name, in order.
func envValues(c *corev1.Container, name string) []string {
	var out []string
	for _, e := range c.Env {
		if e.Name == name {
			out = append(out, e.Value)
		}
	}
	return out
}

func volumeNames(pod corev1.PodSpec) []string {
	var out []string
	for _, v := range pod.Volumes {
		out = append(out, v.Name)
	}
	return out
}

// configMapVolumes returns the ConfigMap each ConfigMap volume of pod names, in order.
func configMapVolumes(pod corev1.PodSpec) []string {
	var out []string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.Name != trustedCAVolume {
			out = append(out, v.ConfigMap.Name)
		}
	}
	return out
}

// secretVolumes returns the Secret each Secret (or projected Secret) volume of pod names.
func secretVolumes(pod corev1.PodSpec) []string {
	var out []string
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, s.Secret.Name)
				}
			}
		}
	}
	return out
}

// requestLine formats a recorded request for failure messages.
func requestLine(r env.Request) string {
	s := r.Time.Format("15:04:05.000") + " " + r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return s
}

// iniSection parses a cloud.conf and returns the keys of one section.
func iniSection(g Gomega, text, section string) map[string]string {
	f, err := ini.Load([]byte(text))
	g.Expect(err).NotTo(HaveOccurred())
	s, err := f.GetSection(section)
	g.Expect(err).NotTo(HaveOccurred(), "section [%s] in:\n%s", section, text)
	return s.KeysHash()
}

// iniSectionNames returns the sections of a cloud.conf, without ini's implicit default one.
func iniSectionNames(g Gomega, text string) []string {
	f, err := ini.Load([]byte(text))
	g.Expect(err).NotTo(HaveOccurred())
	return slices.DeleteFunc(f.SectionStrings(), func(s string) bool { return s == ini.DefaultSection })
}
