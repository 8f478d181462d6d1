// Case 7, bad input: each kind of missing or invalid input, given to an installed driver one at a
// time, must leave the operator running, report a Degraded condition of the right type whose
// message names what to fix, record an Event, keep the last good objects in place, and clear by
// itself once the input is fixed. A guest API server that stops answering for a while must
// neither stop the operator nor the management side. No secret value may show up in a log line,
// an Event or a condition along the way.
package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	// reactTimeout bounds how long the operator may take to notice an input change and report
	// on it; generous, because other tests share the two cores.
	reactTimeout = time.Minute
	// keepWindow is how long a test watches that nothing is rolled out or rewritten after a
	// bad input was reported. The reconcile that reported it has already decided; the window
	// catches a later reconcile (a watch event, a retry) that would act on the bad input.
	keepWindow = 3 * time.Second
	// guestOutage is how long the guest API server stays frozen: long enough for the operator
	// to notice, short enough to stay under the node monitor grace period of the guest's
	// controller-manager, which would otherwise start marking nodes NotReady.
	guestOutage = 20 * time.Second
)

// degradedTypes are every Degraded condition the two managers write.
var degradedTypes = []string{
	names.ConditionControllerDegraded, names.ConditionConfigDegraded, names.ConditionTopologyDegraded,
	names.ConditionNodeDegraded, names.ConditionStaticResourcesDegraded, names.ConditionStorageClassDegraded,
	names.ConditionGuestConfigDegraded,
}

// degradation is one Degraded condition a bad input must raise, and the Event that goes with it.
type degradation struct {
	condition string
	reason    string
	// reporter is the Event's reporting controller: the manager that owns the condition.
	reporter string
	// mention are what the condition message (and the Event note) must name so that the user
	// knows what to fix: the object, the key or the field.
	mention []string
}

// goodState is what the installed driver looks like; bad input must not change any of it.
type goodState struct {
	deploymentGeneration int64
	// controllerTemplate is the controller's pod template: what a rollout would change.
	controllerTemplate  corev1.PodTemplateSpec
	daemonSetGeneration int64
	controllerCloudConf map[string]string
	nodeCloudConf       map[string]string
	credentials         map[string][]byte
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	logs := &logBuffer{}
	op := e.RunOperatorForTest(t, env.OperatorOptions{LogOutput: logs})
	waitAvailable(t, e)
	NewWithT(t).Eventually(func(g Gomega) {
		expectNotDegraded(g, driver(g, e))
	}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())

	ctx := context.Background()
	good := readGoodState(t, e)
	// The seeded, working credentials authenticate with the fake's default password; the bad
	// inputs below carry fresh sentinels of their own, so a leak of either kind is caught.
	password, appSecret := sentinel(t, "password"), sentinel(t, "app-credential-secret")
	secrets := []string{fakeopenstack.DefaultPassword, password, appSecret}
	g := NewWithT(t)
	g.Expect(string(good.credentials[names.KeyCloudsYAML])).To(ContainSubstring(fakeopenstack.DefaultPassword),
		"the seeded clouds.yaml should carry the password this test looks for")

	cpConfig := func(reason string, mention ...string) degradation {
		return degradation{names.ConditionConfigDegraded, reason, names.FieldOwnerControlPlane, mention}
	}
	guestConfig := func(mention ...string) degradation {
		return degradation{names.ConditionGuestConfigDegraded, names.ReasonInvalidConfig, names.FieldOwnerGuest, mention}
	}
	secretName := e.Namespace + "/" + names.CredentialsSecret
	userConfigName := names.OpenShiftConfigNamespace + "/" + names.UserConfigMap
	restoreCredentials := func(t *testing.T) { setCredentials(t, e, good.credentials) }
	deleteUserConfig := func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}}
		NewWithT(t).Expect(e.GuestClient.Delete(ctx, cm)).To(Succeed())
	}

	cases := []struct {
		name string
		want []degradation
		// healthy are Degraded conditions that must stay False: the other manager's, for
		// input only one manager judges.
		healthy []string
		breakIt func(t *testing.T)
		fix     func(t *testing.T)
	}{{
		name: "When clouds.yaml is not valid YAML, it should report the Secret degraded and keep the controller",
		want: []degradation{cpConfig(names.ReasonInvalidCredentials, secretName, names.KeyCloudsYAML)},
		breakIt: func(t *testing.T) {
			// An unclosed flow sequence after the secrets: a parser error quoting the
			// document near the fault would quote them.
			malformed := fmt.Sprintf("clouds:\n  %s:\n    auth:\n      auth_url: %s\n      username: demo\n"+
				"      password: %s\n      application_credential_secret: %s\n    region_name: [RegionOne\n",
				env.CloudName, e.OpenStack.VersionlessAuthURL(), password, appSecret)
			setCredentials(t, e, withKey(good.credentials, names.KeyCloudsYAML, []byte(malformed)))
		},
		fix: restoreCredentials,
	}, {
		name: "When clouds.yaml has a password in a true/false field, it should name the Secret and field and keep the controller",
		want: []degradation{cpConfig(names.ReasonInvalidCredentials, secretName, names.KeyCloudsYAML,
			"clouds."+env.CloudName+".verify", "true or false")},
		breakIt: func(t *testing.T) {
			// Valid YAML that the driver's decoder refuses, and so did the operator's zone
			// listing, while the old check let it through to the controller's pods.
			setCredentials(t, e, withKey(good.credentials, names.KeyCloudsYAML,
				editCloud(t, good.credentials[names.KeyCloudsYAML], func(cloud map[string]any) { cloud["verify"] = password })))
		},
		fix: restoreCredentials,
	}, {
		name: "When clouds.yaml has a mapping where the password belongs, it should name the Secret and field and keep the controller",
		want: []degradation{cpConfig(names.ReasonInvalidCredentials, secretName, names.KeyCloudsYAML,
			"clouds."+env.CloudName+".auth.password", "a string")},
		breakIt: func(t *testing.T) {
			setCredentials(t, e, withKey(good.credentials, names.KeyCloudsYAML,
				editCloud(t, good.credentials[names.KeyCloudsYAML], func(cloud map[string]any) {
					cloud["auth"].(map[string]any)["password"] = map[string]any{"value": password, "secret": appSecret}
				})))
		},
		fix: restoreCredentials,
	}, {
		name: "When the Secret's cacert holds no PEM certificate, it should name the Secret and key and keep the controller",
		want: []degradation{cpConfig(names.ReasonInvalidConfig, secretName, names.KeyCACert, "PEM")},
		breakIt: func(t *testing.T) {
			// A secret pasted into the wrong key: it must reach neither cloud-conf (a
			// ConfigMap) nor any message.
			setCredentials(t, e, withKey(good.credentials, names.KeyCACert, []byte(appSecret+"\n")))
		},
		fix: restoreCredentials,
	}, {
		name: "When the credentials Secret is missing, it should report the Secret degraded and keep the controller",
		want: []degradation{cpConfig(names.ReasonMissingCredentials, secretName, "does not exist")},
		breakIt: func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CredentialsSecret}}
			NewWithT(t).Expect(e.MgmtClient.Delete(ctx, s)).To(Succeed())
		},
		fix: restoreCredentials,
	}, {
		name: "When the credentials Secret has no clouds.yaml key, it should report the missing key and keep the controller",
		want: []degradation{cpConfig(names.ReasonMissingCredentials, secretName, names.KeyCloudsYAML)},
		breakIt: func(t *testing.T) {
			setCredentials(t, e, withKey(good.credentials, names.KeyCloudsYAML, nil))
		},
		fix: restoreCredentials,
	}, {
		name: "When clouds.yaml has no cloud of the HostedControlPlane's cloud name, it should name the cloud and keep the controller",
		want: []degradation{cpConfig(names.ReasonInvalidCredentials, secretName, fmt.Sprintf("%q", env.CloudName))},
		breakIt: func(t *testing.T) {
			// A complete, working-looking cloud, under the wrong name.
			other, err := e.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{
				CloudName: "not-" + env.CloudName, Versionless: true,
				User: &fakeopenstack.User{Name: fakeopenstack.DefaultUserName, Password: password},
			})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			setCredentials(t, e, withKey(good.credentials, names.KeyCloudsYAML, other))
		},
		fix: restoreCredentials,
	}, {
		name: "When cinder-csi-config holds invalid INI, it should name the ConfigMap and line and keep both cloud-conf copies",
		want: []degradation{cpConfig(names.ReasonInvalidConfig, userConfigName, "line 3")},
		breakIt: func(t *testing.T) {
			// A [Global] password the operator drops anyway, then a broken header: the
			// error must point at line 3 without quoting line 2.
			setUserConfig(t, e, map[string]string{names.KeyUserConfig: "[Global]\npassword = " + password + "\n[BlockStorage\nfoo"})
		},
		fix: deleteUserConfig,
	}, {
		name: "When enable_topology is neither true nor false, it should name the key and keep both cloud-conf copies",
		want: []degradation{cpConfig(names.ReasonInvalidConfig, userConfigName, names.KeyEnableTopology)},
		breakIt: func(t *testing.T) {
			setUserConfig(t, e, map[string]string{names.KeyEnableTopology: "sometimes"})
		},
		fix: deleteUserConfig,
	}, {
		name: "When spec.logLevel is unknown, it should report it on both sides and keep the controller and the node plugin",
		want: []degradation{
			cpConfig(names.ReasonUnknownLogLevel, "spec.logLevel", `"Verbose"`),
			guestConfig("spec.logLevel", `"Verbose"`),
		},
		breakIt: func(t *testing.T) { setDriverLogLevels(t, e, "Verbose", operatorv1.Normal) },
		fix:     func(t *testing.T) { setDriverLogLevels(t, e, operatorv1.Normal, operatorv1.Normal) },
	}, {
		name:    "When spec.operatorLogLevel is unknown, it should report it in the guest conditions and keep everything",
		want:    []degradation{guestConfig("spec.operatorLogLevel", `"Loud"`)},
		healthy: []string{names.ConditionConfigDegraded},
		breakIt: func(t *testing.T) { setDriverLogLevels(t, e, operatorv1.Normal, "Loud") },
		fix:     func(t *testing.T) { setDriverLogLevels(t, e, operatorv1.Normal, operatorv1.Normal) },
	}}

	// The stock ClusterCSIDriver CRD only admits the four known log levels, so an unknown one
	// can only reach the operator through an older or hand-edited CRD without that enum. Check
	// the stock behaviour, then drop the enum so the operator's own handling can be tested.
	t.Run("When the CRD still restricts the log levels, the API server should refuse an unknown one", func(t *testing.T) {
		d := driver(NewWithT(t), e)
		patched := d.DeepCopy()
		patched.Spec.LogLevel = "Verbose"
		err := e.GuestClient.Patch(ctx, patched, client.MergeFrom(d))
		NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	})
	relaxLogLevelEnums(t, e)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			c.breakIt(t)
			// Put the good input back even when an assertion fails, so that one failure
			// does not cascade into every later case of this shared environment.
			fixed := false
			fix := func() {
				if !fixed {
					fixed = true
					c.fix(t)
				}
			}
			t.Cleanup(fix)

			for _, w := range c.want {
				g.Eventually(func(g Gomega) {
					cond := condition(g, e, w.condition)
					g.Expect(cond.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", w.condition, cond.Message)
					g.Expect(cond.Reason).To(Equal(w.reason), w.condition)
					for _, m := range w.mention {
						g.Expect(cond.Message).To(ContainSubstring(m), w.condition)
					}
				}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
				g.Eventually(func(g Gomega) {
					expectDegradedEvent(g, e, w, start)
				}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
			}
			// Something must NOT happen here: no rollout, no rewrite, no crash while the
			// input stays bad. That takes watching for a while.
			g.Consistently(func(g Gomega) {
				expectKept(g, e, op, good)
				for _, h := range c.healthy {
					g.Expect(env.ConditionTrue(driver(g, e).Status.Conditions, h)).To(BeFalse(), h)
				}
			}).WithTimeout(keepWindow).WithPolling(poll).Should(Succeed())

			fix()
			g.Eventually(func(g Gomega) {
				expectNotDegraded(g, driver(g, e))
			}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
			// The good input is back byte for byte, so recovering must not roll anything.
			expectKept(g, e, op, good)
			expectNoSecrets(g, e, logs, secrets)
		})
	}

	t.Run("When the guest API server is unreachable for a while, it should keep running, keep reconciling the management side and catch up by itself", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(e.Guest.Pause("kube-apiserver")).To(Succeed())
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				g.Expect(e.Guest.Resume("kube-apiserver")).To(Succeed())
			}
		}
		// Thaw it even when an assertion below fails, or the cluster could not stop cleanly.
		t.Cleanup(resume)
		outageStart := time.Now()

		// The outage is real: a guest request gets no answer.
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := e.GuestClient.Get(short, client.ObjectKey{Name: names.ClusterCSIDriverName}, &operatorv1.ClusterCSIDriver{})
		cancel()
		g.Expect(err).To(HaveOccurred(), "the frozen guest API server answered")

		// The management side does not depend on the guest answering: a deleted controller
		// object is recreated during the outage.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerMetricsService}}
		g.Expect(e.MgmtClient.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		oldUID := svc.UID
		g.Expect(e.MgmtClient.Delete(ctx, svc)).To(Succeed())
		g.Eventually(func(g Gomega) {
			now := &corev1.Service{}
			g.Expect(e.MgmtClient.Get(ctx, client.ObjectKeyFromObject(svc), now)).To(Succeed())
			g.Expect(now.UID).NotTo(Equal(oldUID))
		}).WithTimeout(guestOutage).WithPolling(poll).Should(Succeed())

		// Something must NOT happen for the rest of the outage: the operator exiting or the
		// controller being rolled or reconfigured because the guest is gone. Only the
		// management cluster can be read meanwhile.
		g.Consistently(func(g Gomega) {
			g.Expect(op.Running()).To(BeTrue(), "a manager exited")
			expectControllerKept(g, e, good)
		}).WithTimeout(max(time.Until(outageStart.Add(guestOutage)), time.Second)).WithPolling(poll).Should(Succeed())
		resume()

		g.Eventually(func(g Gomega) {
			d := driver(g, e)
			expectNotDegraded(g, d)
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable)).To(BeTrue())
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionNodeAvailable)).To(BeTrue())
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		expectKept(g, e, op, good)

		// Both managers watch the guest again, without a restart: the controlplane manager
		// recreates its deleted guest copy of cloud-conf, the guest manager its StorageClass.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.CloudConfConfigMap}}
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}}
		for _, o := range []client.Object{cm, sc} {
			g.Expect(e.GuestClient.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			uid := o.GetUID()
			g.Expect(e.GuestClient.Delete(ctx, o)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(e.GuestClient.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				g.Expect(o.GetUID()).NotTo(Equal(uid))
			}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed(), "%T %s recreated", o, o.GetName())
		}
		// The recreated copy is identical, so the node plugin is not rolled either.
		g.Eventually(func(g Gomega) {
			expectKept(g, e, op, good)
			expectNotDegraded(g, driver(g, e))
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		expectNoSecrets(g, e, logs, secrets)
	})

	t.Run("When bad input was reported, the operator's log should show it and never a secret value", func(t *testing.T) {
		g := NewWithT(t)
		// The capture works and saw the bad-input handling, so the absence checks mean something.
		g.Expect(logs.String()).To(ContainSubstring(names.ReasonInvalidCredentials))
		g.Expect(logs.String()).To(ContainSubstring(names.ReasonMissingCredentials))
		expectNoSecrets(g, e, logs, secrets)
	})
}

// readGoodState records the installed driver's objects.
func readGoodState(t *testing.T, e *env.Env) goodState {
	t.Helper()
	g := NewWithT(t)
	creds := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, creds)).To(Succeed())
	return goodState{
		deploymentGeneration: controllerDeployment(g, e).Generation,
		controllerTemplate:   controllerDeployment(g, e).Spec.Template,
		daemonSetGeneration:  nodeDaemonSet(g, e).Generation,
		controllerCloudConf:  configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap).Data,
		nodeCloudConf:        configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap).Data,
		credentials:          creds.Data,
	}
}

// expectKept checks that the operator runs and the last good objects are in place and working:
// same generations (nothing rolled), same cloud-conf copies, pods available.
func expectKept(g Gomega, e *env.Env, op *env.Operator, good goodState) {
	g.Expect(op.Running()).To(BeTrue(), "a manager exited")
	expectControllerKept(g, e, good)
	ds := nodeDaemonSet(g, e)
	g.Expect(ds.Generation).To(Equal(good.daemonSetGeneration), "node DaemonSet generation")
	expectDaemonSetRolledOut(g, ds)
	g.Expect(configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap).Data).To(Equal(good.nodeCloudConf), "guest cloud-conf")
	d := driver(g, e)
	g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable)).To(BeTrue(), names.ConditionControllerAvailable)
	g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionNodeAvailable)).To(BeTrue(), names.ConditionNodeAvailable)
}

// expectControllerKept is the management half of expectKept.
func expectControllerKept(g Gomega, e *env.Env, good goodState) {
	dep := controllerDeployment(g, e)
	g.Expect(dep.Generation).To(Equal(good.deploymentGeneration), "controller Deployment generation")
	g.Expect(apiequality.Semantic.DeepEqual(dep.Spec.Template, good.controllerTemplate)).To(BeTrue(), "controller pod template")
	expectDeploymentRolledOut(g, dep)
	g.Expect(configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap).Data).To(Equal(good.controllerCloudConf), "controller cloud-conf")
}

// expectNotDegraded checks that every Degraded condition of both managers is present and False.
func expectNotDegraded(g Gomega, d *operatorv1.ClusterCSIDriver) {
	for _, t := range degradedTypes {
		c := conditions.Find(d.Status.Conditions, t)
		g.Expect(c).NotTo(BeNil(), t)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), "%s: %s", t, c.Message)
	}
}

// expectDegradedEvent checks that a Warning Event for w was recorded at or after since.
//
// The recorders write events.k8s.io/v1 Events, whose client-side aggregation treats Events with
// the same regarding object, type, reason, action and reporter as one series whatever their
// note: a repeat within minutes bumps the first Event's series (keeping that Event's note)
// instead of creating a new one. So a recent Event either is new, and then its note must name
// what to fix, or is the series of an earlier one with the same reason, observed again now.
func expectDegradedEvent(g Gomega, e *env.Env, w degradation, since time.Time) {
	var found *eventsv1.Event
	for _, ev := range driverEvents(g, e) {
		if ev.Type != corev1.EventTypeWarning || ev.Reason != w.reason || ev.ReportingController != w.reporter {
			continue
		}
		created := !ev.EventTime.Time.Before(since)
		repeated := ev.Series != nil && !ev.Series.LastObservedTime.Time.Before(since)
		if created || repeated {
			found = &ev
			if created {
				break
			}
		}
	}
	g.Expect(found).NotTo(BeNil(), "a %s Warning Event from %s since %s", w.reason, w.reporter, since.Format(time.RFC3339Nano))
	g.Expect(found.Note).To(ContainSubstring(w.condition))
	if !found.EventTime.Time.Before(since) {
		for _, m := range w.mention {
			g.Expect(found.Note).To(ContainSubstring(m))
		}
	}
}

// expectNoSecrets checks that no secret value is in the operator's log, in any Event of the
// guest or in the ClusterCSIDriver's status.
func expectNoSecrets(g Gomega, e *env.Env, logs *logBuffer, secrets []string) {
	status, err := json.Marshal(driver(g, e).Status)
	g.Expect(err).NotTo(HaveOccurred())
	l := &eventsv1.EventList{}
	g.Expect(e.GuestClient.List(context.Background(), l)).To(Succeed())
	events, err := json.Marshal(l.Items)
	g.Expect(err).NotTo(HaveOccurred())
	log := logs.String()
	for _, s := range secrets {
		g.Expect(log).NotTo(ContainSubstring(s), "operator log")
		g.Expect(string(events)).NotTo(ContainSubstring(s), "Events")
		g.Expect(string(status)).NotTo(ContainSubstring(s), "ClusterCSIDriver status")
	}
}

// sentinel returns a unique string to plant as a secret value and look for afterwards.
func sentinel(t *testing.T, what string) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sentinel-" + what + "-" + hex.EncodeToString(b)
}

// withKey returns a copy of data with key set to value, or removed when value is nil.
func withKey(data map[string][]byte, key string, value []byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	if value == nil {
		delete(out, key)
	} else {
		out[key] = value
	}
	return out
}

// setCredentials creates the credentials Secret or replaces its data.
func setCredentials(t *testing.T, e *env.Env, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CredentialsSecret}}
	if err := e.MgmtClient.Get(context.Background(), client.ObjectKeyFromObject(s), s); apierrors.IsNotFound(err) {
		s.Data = data
		NewWithT(t).Expect(e.MgmtClient.Create(context.Background(), s)).To(Succeed())
		return
	}
	update(t, e.MgmtClient, s, "test", func(s *corev1.Secret) { s.Data = data })
}

// editCloud returns clouds.yaml with the entry of env.CloudName changed by edit.
func editCloud(t *testing.T, cloudsYAML []byte, edit func(cloud map[string]any)) []byte {
	t.Helper()
	g := NewWithT(t)
	var doc map[string]any
	g.Expect(yaml.Unmarshal(cloudsYAML, &doc)).To(Succeed())
	cloud, ok := doc["clouds"].(map[string]any)[env.CloudName].(map[string]any)
	g.Expect(ok).To(BeTrue(), "the seeded clouds.yaml should have the cloud %q", env.CloudName)
	edit(cloud)
	out, err := yaml.Marshal(doc)
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

// setDriverLogLevels sets spec.logLevel and spec.operatorLogLevel of the ClusterCSIDriver.
func setDriverLogLevels(t *testing.T, e *env.Env, level, operatorLevel operatorv1.LogLevel) {
	t.Helper()
	update(t, e.GuestClient, &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}, "test",
		func(d *operatorv1.ClusterCSIDriver) {
			d.Spec.LogLevel, d.Spec.OperatorLogLevel = level, operatorLevel
		})
}

// relaxLogLevelEnums removes the enum of spec.logLevel and spec.operatorLogLevel from the guest's
// ClusterCSIDriver CRD, as in a CRD that predates it, and waits until the API server admits an
// unknown level.
func relaxLogLevelEnums(t *testing.T, e *env.Env) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clustercsidrivers.operator.openshift.io"}}
	update(t, e.GuestClient, crd, "test", func(crd *apiextensionsv1.CustomResourceDefinition) {
		for i := range crd.Spec.Versions {
			spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			for _, field := range []string{"logLevel", "operatorLogLevel"} {
				p := spec.Properties[field]
				p.Enum = nil
				spec.Properties[field] = p
			}
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
	})
	// A dry run tells when the new schema is in force without changing the object.
	NewWithT(t).Eventually(func(g Gomega) {
		d := driver(g, e)
		patched := d.DeepCopy()
		patched.Spec.LogLevel = "Verbose"
		g.Expect(e.GuestClient.Patch(context.Background(), patched, client.MergeFrom(d), client.DryRunAll)).To(Succeed())
	}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
}
