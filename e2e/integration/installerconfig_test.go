// Clusters installed before 4.14 keep their driver settings in the installer's cloud provider
// config (openshift-config/cloud-provider-config, key config), ignore-volume-az = yes among them.
// csi-operator reads [BlockStorage] and enable_topology from it when cinder-csi-config does not
// exist; so must this operator, or a switch of operators silently changes the volumes' zones.
package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// TestStandaloneInstallerConfig starts a standalone cluster without any source of driver
// settings, then creates, changes, shadows with cinder-csi-config and deletes the installer's
// cloud provider config, and checks that both copies of cloud-conf, the Config condition and the
// Events follow, with nothing of the file's [Global] anywhere.
func TestStandaloneInstallerConfig(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 1, Workers: 1})
	ctx := context.Background()
	g := NewWithT(t)
	password := sentinel(t, "cloud-provider-password")

	// The seed writes the installer's file with the OpenStack CA; the credentials Secret's
	// cacert carries the CA too, so the operator does without the file.
	seeded := configMap(g, e.GuestClient, names.OpenShiftConfigNamespace, env.CloudProviderConfig)
	g.Expect(e.GuestClient.Delete(ctx, seeded)).To(Succeed())
	installerRef := names.OpenShiftConfigNamespace + "/" + env.CloudProviderConfig
	// setInstallerConfig creates or replaces the installer's file: config and, unless empty,
	// enable_topology, with the CA.
	setInstallerConfig := func(t *testing.T, config, enableTopology string) {
		t.Helper()
		g := NewWithT(t)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: env.CloudProviderConfig}}
		err := e.GuestClient.Get(ctx, client.ObjectKeyFromObject(cm), cm)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		cm.Data = map[string]string{names.KeyCABundle: seeded.Data[names.KeyCABundle], "config": config}
		if enableTopology != "" {
			cm.Data[names.KeyEnableTopology] = enableTopology
		}
		if err == nil {
			g.Expect(e.GuestClient.Update(ctx, cm)).To(Succeed())
			return
		}
		g.Expect(e.GuestClient.Create(ctx, cm)).To(Succeed())
	}

	logs := operatorLog(t)
	e.RunOperatorForTest(t, env.OperatorOptions{LogOutput: logs})
	waitAvailable(t, e)

	t.Run("When neither ConfigMap exists, it should say the driver runs with its defaults and announce it", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			expectConfigSource(g, e, "none", "Neither ConfigMap openshift-config/cinder-csi-config nor the installer's cloud provider config "+
				installerRef+" exists")
			expectSourceEvent(g, e, "UseDefaults", time.Time{}, "the driver runs with its defaults")
			expectSettings(g, e, "", "true")
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When the installer's cloud provider config is created, it should take its [BlockStorage] without trust-device-path and its enable_topology, say so and announce it", func(t *testing.T) {
		g := NewWithT(t)
		since := time.Now()
		setInstallerConfig(t, "[Global]\nsecret-name = openstack-credentials\nsecret-namespace = kube-system\npassword = "+password+"\n"+
			"[BlockStorage]\nignore-volume-az = yes\ntrust-device-path = true\n", "false")
		g.Eventually(func(g Gomega) {
			expectSettings(g, e, "[BlockStorage]\nignore-volume-az = yes\n", "false")
			expectConfigSource(g, e, installerRef+", key config",
				"Driver settings come from the installer's cloud provider config, ConfigMap "+installerRef+
					", as openshift-config/cinder-csi-config does not exist: [BlockStorage] of key config and enable_topology.")
			expectSourceEvent(g, e, "UseCloudProviderConfig", since, installerRef)
			// enable_topology of the file wins over the detection, which says true here.
			dep, ds := controllerDeployment(g, e), nodeDaemonSet(g, e)
			g.Expect(flagValues(containerArgs(dep.Spec.Template.Spec, "csi-driver"), "--with-topology")).To(Equal([]string{"false"}))
			g.Expect(flagValues(containerArgs(ds.Spec.Template.Spec, "csi-driver"), "--with-topology")).To(Equal([]string{"false"}))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When the installer's cloud provider config changes, both copies of cloud-conf should follow", func(t *testing.T) {
		g := NewWithT(t)
		setInstallerConfig(t, "[Global]\npassword = "+password+"\n[BlockStorage]\nignore-volume-az = no\nrescan-on-resize = yes\n", "")
		g.Eventually(func(g Gomega) {
			expectSettings(g, e, "[BlockStorage]\nignore-volume-az = no\nrescan-on-resize = yes\n", "true")
			expectConfigSource(g, e, installerRef+", key config", "[BlockStorage] of key config")
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When cinder-csi-config is created next to it, it should take cinder-csi-config alone, and the installer's file again once it is gone", func(t *testing.T) {
		g := NewWithT(t)
		since := time.Now()
		setUserConfig(t, e, map[string]string{names.KeyUserConfig: "[BlockStorage]\nnode-volume-attach-limit = 25\n"})
		g.Eventually(func(g Gomega) {
			expectSettings(g, e, "[BlockStorage]\nnode-volume-attach-limit = 25\n", "true")
			expectConfigSource(g, e, "openshift-config/cinder-csi-config", "Driver settings come from ConfigMap openshift-config/cinder-csi-config.")
			expectSourceEvent(g, e, "UseCinderCSIConfig", since, "openshift-config/cinder-csi-config")
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

		g.Expect(e.GuestClient.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			expectSettings(g, e, "[BlockStorage]\nignore-volume-az = no\nrescan-on-resize = yes\n", "true")
			expectConfigSource(g, e, installerRef+", key config", "[BlockStorage] of key config")
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When the installer's cloud provider config is deleted, cloud-conf should lose its settings and the condition say the defaults apply", func(t *testing.T) {
		g := NewWithT(t)
		since := time.Now()
		g.Expect(e.GuestClient.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: names.OpenShiftConfigNamespace, Name: env.CloudProviderConfig}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			expectSettings(g, e, "", "true")
			expectConfigSource(g, e, "none", "the driver runs with its defaults")
			expectSourceEvent(g, e, "UseDefaults", since, "")
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
		expectNotDegraded(g, driver(g, e))
	})

	t.Run("When the file's [Global] held a password, it should be in no condition, Event or log line", func(t *testing.T) {
		expectNoSecrets(NewWithT(t), e, logs, []string{password})
	})
}

// expectSettings checks the driver settings in both copies of cloud-conf: blockStorage is the
// [BlockStorage] section ("" for none), the same in each; enableTopology the decision.
func expectSettings(g Gomega, e *env.Env, blockStorage, enableTopology string) {
	controllerConf := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)
	nodeConf := configMap(g, e.GuestClient, names.GuestNamespace, nodeconf.StandaloneName)
	_, controllerBlock, _ := strings.Cut(controllerConf.Data[nodeconf.KeyCloudConf], "\n\n")
	g.Expect(controllerBlock).To(Equal(blockStorage), "controller copy")
	g.Expect(nodeConf.Data[nodeconf.KeyCloudConf]).To(Equal(blockStorage), "node copy")
	for _, cm := range []*corev1.ConfigMap{controllerConf, nodeConf} {
		g.Expect(cm.Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, enableTopology), cm.Name)
	}
}

// expectConfigSource checks what cloud-conf records as the source of the driver settings and that
// the Config condition, not Degraded, names it.
func expectConfigSource(g Gomega, e *env.Env, record, mention string) {
	cm := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap)
	g.Expect(cm.Annotations).To(HaveKeyWithValue(names.ConfigSourceAnnotation, record))
	c := condition(g, e, names.ConditionConfigDegraded)
	g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
	g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
	g.Expect(c.Message).To(ContainSubstring(mention))
}

// expectSourceEvent checks that the controlplane recorded a Normal Event that the driver settings
// now come from the source of action, at or after since. An Event of the same action recorded
// minutes before is one series to the recorder, which keeps its first note and only counts the
// repeat: such a repeat counts, and only a new Event's note is checked for mention.
func expectSourceEvent(g Gomega, e *env.Env, action string, since time.Time, mention string) {
	var found bool
	for _, ev := range driverEvents(g, e) {
		if ev.Reason != names.ReasonConfigSourceChanged || ev.Action != action || ev.ReportingController != names.FieldOwnerControlPlane {
			continue
		}
		g.Expect(ev.Type).To(Equal(corev1.EventTypeNormal))
		created := !ev.EventTime.Time.Before(since)
		repeated := ev.Series != nil && !ev.Series.LastObservedTime.Time.Before(since)
		if created {
			g.Expect(ev.Note).To(ContainSubstring(mention))
		}
		found = found || created || repeated
	}
	g.Expect(found).To(BeTrue(), "a %s Event with action %s since %s", names.ReasonConfigSourceChanged, action, since.Format(time.RFC3339Nano))
}
