// Case 2, credential rotation: a change to an input rolls exactly the pods that consume it. New
// OpenStack credentials roll the controller and leave the node plugin alone; a [BlockStorage]
// change in the user's cinder-csi-config reaches both cloud-conf copies and rolls both sides.
package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// rolloutTimeout bounds one rollout of a workload on the local clusters, where kwok plays the
// kubelet; generous, because other tests share the two cores.
const rolloutTimeout = 3 * time.Minute

// The pod-template annotations that carry the input hashes.
var (
	credentialsHashKey = confighash.AnnotationKey("secret-" + names.CredentialsSecret)
	cloudConfHashKey   = confighash.AnnotationKey("configmap-" + names.CloudConfConfigMap)
)

func TestCredentialRotation(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)

	// The state after install, which each step is compared with.
	g := NewWithT(t)
	dep0 := controllerDeployment(g, e)
	ds0 := nodeDaemonSet(g, e)
	g.Expect(replicaSets(g, e)).To(HaveLen(1))
	g.Expect(daemonSetRevisions(g, e)).To(HaveLen(1))
	g.Expect(dep0.Spec.Template.Annotations).To(HaveKey(credentialsHashKey))
	g.Expect(dep0.Spec.Template.Annotations).To(HaveKey(cloudConfHashKey))
	g.Expect(ds0.Spec.Template.Annotations).To(HaveKey(cloudConfHashKey))
	nodeConf0 := configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap)
	controllerConf0 := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)

	// Filled in by the rotation step, checked by the later ones.
	var rotatedHash string

	t.Run("When clouds.yaml in the credentials Secret changes, it should roll the controller pods", func(t *testing.T) {
		g := NewWithT(t)
		// The same user, but an auth_url with the version in it: a different clouds.yaml that
		// is still a working credential for the fake OpenStack.
		clouds, err := e.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{CloudName: env.CloudName})
		g.Expect(err).NotTo(HaveOccurred())
		rotated := time.Now()
		secret := &corev1.Secret{}
		secret.Namespace, secret.Name = e.Namespace, names.CredentialsSecret
		update(t, e.MgmtClient, secret, "rotate-credentials", func(s *corev1.Secret) {
			s.Data[names.KeyCloudsYAML] = clouds
		})
		rotatedHash = confighash.SecretKeys(secret, names.KeyCloudsYAML)
		g.Expect(rotatedHash).NotTo(Equal(dep0.Spec.Template.Annotations[credentialsHashKey]),
			"the rewritten clouds.yaml must differ from the seeded one")

		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue(credentialsHashKey, rotatedHash))
			// cloud.conf only names the mounted clouds.yaml: its hash must not move.
			g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue(cloudConfHashKey, dep0.Spec.Template.Annotations[cloudConfHashKey]))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Generation).To(Equal(dep0.Generation + 1))
			expectDeploymentRolledOut(g, dep)
			rss := replicaSets(g, e)
			g.Expect(rss).To(HaveLen(2))
			// The old ReplicaSet is scaled down, the new one runs the rotated template.
			// Ordered by the Deployment controller's revision: creation times have only
			// second resolution.
			slices.SortFunc(rss, func(a, b appsv1.ReplicaSet) int { return revision(g, a) - revision(g, b) })
			g.Expect(rss[0].Spec.Template.Annotations).To(HaveKeyWithValue(credentialsHashKey, dep0.Spec.Template.Annotations[credentialsHashKey]))
			g.Expect(ptr.Deref(rss[0].Spec.Replicas, -1)).To(BeZero())
			g.Expect(rss[1].Spec.Template.Annotations).To(HaveKeyWithValue(credentialsHashKey, rotatedHash))
			g.Expect(rss[1].Status.AvailableReplicas).To(Equal(ptr.Deref(dep.Spec.Replicas, 1)))
		}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)

		// The operator uses the new credential too: it listed the zones with it, and the
		// topology decision did not degrade.
		g.Eventually(func(g Gomega) {
			var tokens, volumeZones int
			for _, r := range e.OpenStack.Requests() {
				if r.Time.Before(rotated) {
					continue
				}
				if r.IsTokenRequest() && r.Status == 201 {
					tokens++
				}
				if r.Endpoint == fakeopenstack.EndpointVolume && r.Status == 200 {
					volumeZones++
				}
			}
			g.Expect(tokens).To(BeNumerically(">", 0), "successful authentications after the rotation")
			g.Expect(volumeZones).To(BeNumerically(">", 0), "volume zone listings after the rotation")
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When clouds.yaml in the credentials Secret changes, it should not roll the node DaemonSet", func(t *testing.T) {
		g := NewWithT(t)
		// The node copy of cloud-conf carries no credentials, so it must not have been written.
		nodeConf := configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap)
		g.Expect(nodeConf.ResourceVersion).To(Equal(nodeConf0.ResourceVersion))
		g.Expect(nodeConf.Data).To(Equal(nodeConf0.Data))

		template0 := mustJSON(g, ds0.Spec.Template)
		// Something that must not happen: watch the DaemonSet for a while after the
		// controller rolled, in case the guest manager reacts late.
		g.Consistently(func(g Gomega) {
			ds := nodeDaemonSet(g, e)
			g.Expect(ds.Generation).To(Equal(ds0.Generation))
			g.Expect(mustJSON(g, ds.Spec.Template)).To(MatchJSON(template0))
			g.Expect(daemonSetRevisions(g, e)).To(HaveLen(1))
		}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())
	})

	t.Run("When [BlockStorage] in cinder-csi-config changes, it should roll both the controller and the node plugin", func(t *testing.T) {
		g := NewWithT(t)
		depBefore := controllerDeployment(g, e)
		setUserConfig(t, e, map[string]string{names.KeyUserConfig: "[BlockStorage]\nnode-volume-attach-limit = 25\n"})

		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Spec.Template.Annotations[cloudConfHashKey]).NotTo(Equal(depBefore.Spec.Template.Annotations[cloudConfHashKey]))
			g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue(credentialsHashKey, rotatedHash))
			ds := nodeDaemonSet(g, e)
			g.Expect(ds.Spec.Template.Annotations[cloudConfHashKey]).NotTo(Equal(ds0.Spec.Template.Annotations[cloudConfHashKey]))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Generation).To(Equal(depBefore.Generation + 1))
			expectDeploymentRolledOut(g, dep)
			g.Expect(replicaSets(g, e)).To(HaveLen(3))
			ds := nodeDaemonSet(g, e)
			g.Expect(ds.Generation).To(Equal(ds0.Generation + 1))
			expectDaemonSetRolledOut(g, ds)
			g.Expect(daemonSetRevisions(g, e)).To(HaveLen(2))
		}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
	})

	t.Run("When [BlockStorage] in cinder-csi-config changes, it should write it to both cloud-conf copies and keep credentials off the node copy", func(t *testing.T) {
		g := NewWithT(t)
		const block = "[BlockStorage]\nnode-volume-attach-limit = 25\n"

		controllerConf := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(block))
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring("[Global]"))
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(names.CloudsFilePath))
		g.Expect(controllerConf.Data[nodeconf.KeyCloudConf]).NotTo(Equal(controllerConf0.Data[nodeconf.KeyCloudConf]))

		nodeConf := configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap)
		g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).To(ContainSubstring(block))
		g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("[Global]"))
		g.Expect(nodeConf.Data).NotTo(HaveKey(nodeconf.KeyCABundle))
		for k, v := range nodeConf.Data {
			g.Expect(v).NotTo(ContainSubstring("clouds"), k)
			g.Expect(v).NotTo(ContainSubstring("password"), k)
			g.Expect(v).NotTo(ContainSubstring(fakeopenstack.DefaultPassword), k)
			g.Expect(v).NotTo(ContainSubstring(e.OpenStack.URL()), k)
		}

		// Each side rolled because of this very content: its hash is the hash of the copy it
		// mounts.
		g.Expect(controllerDeployment(g, e).Spec.Template.Annotations).To(HaveKeyWithValue(cloudConfHashKey, confighash.ConfigMap(controllerConf)))
		g.Expect(nodeDaemonSet(g, e).Spec.Template.Annotations).To(HaveKeyWithValue(cloudConfHashKey, confighash.ConfigMapKeys(nodeConf, nodeconf.PluginKeys...)))
	})
}

// mustJSON returns v as JSON, for comparisons that print a readable difference.
func mustJSON(g Gomega, v any) string {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// revision returns the Deployment revision a ReplicaSet carries.
func revision(g Gomega, rs appsv1.ReplicaSet) int {
	n, err := strconv.Atoi(rs.Annotations["deployment.kubernetes.io/revision"])
	g.Expect(err).NotTo(HaveOccurred(), "revision of ReplicaSet %s", rs.Name)
	return n
}
