// Case 3, topology: --with-topology on the controller and the node plugin follows the OpenStack
// availability zones, re-checked on an interval; the user's enable_topology override wins; and
// an OpenStack that cannot be reached at startup neither stops the driver nor leaks a secret, and
// clears its condition by itself once OpenStack is back.
package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// recheckInterval makes the operator list the zones again soon, so "the next check" comes within
// a test's patience.
const recheckInterval = 3 * time.Second

var topologyOperatorOptions = env.OperatorOptions{TopologyRecheckInterval: recheckInterval, OpenStackTimeout: 5 * time.Second}

func TestTopology(t *testing.T) {
	t.Parallel()

	t.Run("When OpenStack answers, it should follow the zones unless the user overrides them", func(t *testing.T) {
		t.Parallel()
		e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
		e.RunOperatorForTest(t, topologyOperatorOptions)

		t.Run("When every compute zone is also a volume zone, it should enable topology on both sides", func(t *testing.T) {
			waitAvailable(t, e)
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				expectTopology(g, e, true)
				c := condition(g, e, names.ConditionTopologyDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
				g.Expect(c.Message).To(ContainSubstring("Topology is enabled"))
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		})

		t.Run("When a compute zone without a volume zone appears, it should disable topology on both sides at the next check", func(t *testing.T) {
			e.OpenStack.SetComputeZones(
				fakeopenstack.Zone{Name: fakeopenstack.DefaultZone, Available: true},
				fakeopenstack.Zone{Name: "az2", Available: true},
			)
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				expectTopology(g, e, false)
				c := condition(g, e, names.ConditionTopologyDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
				g.Expect(c.Message).To(ContainSubstring("Topology is disabled"))
				g.Expect(c.Message).To(ContainSubstring("some compute availability zone has no volume availability zone"))
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			waitRolledOut(g, e)
		})

		t.Run("When the zones are listed again with the same credentials, it should ask Keystone for no new token", func(t *testing.T) {
			g := NewWithT(t)
			computeListings := func() int {
				return e.OpenStack.CountFunc(func(r fakeopenstack.Request) bool {
					return r.Endpoint == fakeopenstack.EndpointCompute && strings.Contains(r.Path, "os-availability-zone")
				})
			}
			tokens, listings := e.OpenStack.CountTokenRequests(), computeListings()
			g.Eventually(computeListings).WithTimeout(installTimeout).WithPolling(poll).Should(BeNumerically(">=", listings+2), "two more rechecks")
			g.Expect(e.OpenStack.CountTokenRequests()).To(Equal(tokens), "the rechecks reuse the client and its token")
		})

		t.Run("When the user sets enable_topology to true, it should enable topology on both sides although the zones do not match", func(t *testing.T) {
			setUserConfig(t, e, map[string]string{names.KeyEnableTopology: "true"})
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				expectTopology(g, e, true)
				c := condition(g, e, names.ConditionTopologyDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
				g.Expect(c.Message).To(ContainSubstring("Topology is enabled"))
				g.Expect(c.Message).To(ContainSubstring("enable_topology in openshift-config/cinder-csi-config"))
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			// What must not happen: a later zone check overriding the user. Watch over more
			// than two recheck intervals while the zones still do not match.
			g.Consistently(func(g Gomega) {
				expectTopology(g, e, true)
			}).WithTimeout(3 * recheckInterval).WithPolling(poll).Should(Succeed())
		})
	})

	t.Run("When OpenStack cannot be reached at startup, it should run the driver anyway and recover by itself", func(t *testing.T) {
		t.Parallel()
		e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
		e.OpenStack.Stop()
		logs := &logBuffer{}
		opts := topologyOperatorOptions
		opts.LogOutput = logs
		e.RunOperatorForTest(t, opts)

		t.Run("When OpenStack is down before the operator starts, it should run the driver with topology disabled and say why", func(t *testing.T) {
			waitAvailable(t, e)
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				controllerDeployment(g, e)
				nodeDaemonSet(g, e)
				// Nothing was ever decided: the deterministic fallback is disabled.
				expectTopology(g, e, false)
				c := condition(g, e, names.ConditionTopologyDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Message)
				g.Expect(c.Reason).To(Equal(names.ReasonOpenStackUnavailable))
				g.Expect(c.Message).To(ContainSubstring("cannot be reached"))
				// Two sentences: what failed and what to check, then what stays in force.
				g.Expect(c.Message).To(ContainSubstring(openstack.Message(openstack.ReasonUnreachable) + ". Topology stays disabled"))
				g.Expect(c.Message).NotTo(ContainSubstring(fakeopenstack.DefaultPassword))
				// The outage is the topology's problem only.
				d := driver(g, e)
				for _, typ := range []string{names.ConditionControllerDegraded, names.ConditionConfigDegraded, names.ConditionNodeDegraded} {
					g.Expect(env.ConditionTrue(d.Status.Conditions, typ)).To(BeFalse(), typ)
				}
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			// What must not happen: the retries flapping the decision or the condition while
			// OpenStack stays down. Watch over more than two retries.
			g.Consistently(func(g Gomega) {
				expectTopology(g, e, false)
				g.Expect(condition(g, e, names.ConditionTopologyDegraded).Status).To(Equal(operatorv1.ConditionTrue))
			}).WithTimeout(3 * recheckInterval).WithPolling(poll).Should(Succeed())
			g.Expect(e.OpenStack.Running()).To(BeFalse())

			// The Event says the same, and neither it nor the operator's log (which has the
			// classified error with its detail) carries the password.
			g.Eventually(func(g Gomega) {
				var found bool
				for _, ev := range driverEvents(g, e) {
					g.Expect(ev.Note).NotTo(ContainSubstring(fakeopenstack.DefaultPassword))
					if ev.Reason == names.ReasonOpenStackUnavailable && ev.Type == corev1.EventTypeWarning {
						found = true
						g.Expect(ev.Note).To(ContainSubstring("cannot be reached"))
					}
				}
				g.Expect(found).To(BeTrue(), "a Warning Event with reason %s", names.ReasonOpenStackUnavailable)
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			// The condition is a stable sentence; what exactly failed (the address that
			// refused the connection) must be in the log for whoever has to fix it.
			g.Expect(logs.String()).To(ContainSubstring(strings.TrimPrefix(e.OpenStack.URL(), "https://")))
			g.Expect(logs.String()).To(ContainSubstring("connection refused"))
			g.Expect(logs.String()).NotTo(ContainSubstring(fakeopenstack.DefaultPassword))
		})

		t.Run("When OpenStack comes back, it should clear the topology condition by itself", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(e.OpenStack.Start()).To(Succeed())
			g.Eventually(func(g Gomega) {
				c := condition(g, e, names.ConditionTopologyDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
				g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
				// The zones match, so the first real decision turns topology on everywhere.
				expectTopology(g, e, true)
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			waitAvailable(t, e)
		})
	})
}

// expectTopology checks that the controller and the node plugin both run with
// --with-topology=<enabled>, given exactly once, and that both cloud-conf copies carry the same
// decision.
func expectTopology(g Gomega, e *env.Env, enabled bool) {
	want := strconv.FormatBool(enabled)
	dep := controllerDeployment(g, e)
	g.Expect(flagValues(containerArgs(dep.Spec.Template.Spec, "csi-driver"), "--with-topology")).To(Equal([]string{want}), "controller --with-topology")
	ds := nodeDaemonSet(g, e)
	g.Expect(flagValues(containerArgs(ds.Spec.Template.Spec, "csi-driver"), "--with-topology")).To(Equal([]string{want}), "node --with-topology")
	g.Expect(configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap).Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, want), "controller cloud-conf")
	g.Expect(configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap).Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, want), "node cloud-conf")
}
