// Slow or hanging OpenStack: the zone listings run beside the reconciles, so a credential
// rotation reaches the controller's pod template before OpenStack has answered anything, and a
// fresh install applies the controller after a short bound (controlplane.DefaultFirstTopologyWait)
// instead of the whole OpenStack timeout.
package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// fastPoll observes a change soon after it happens, for the figures the tests log.
const fastPoll = 20 * time.Millisecond

// slowOpenStack makes every Keystone, Nova and Cinder request hang: for hangFor, after which it
// is answered, or, when hangFor is zero, until the client gives up. The faults are cleared when
// the test ends.
func slowOpenStack(t *testing.T, cloud *fakeopenstack.Server, hangFor time.Duration) {
	cloud.SetHangFor(hangFor)
	for _, ep := range []fakeopenstack.Endpoint{fakeopenstack.EndpointIdentity, fakeopenstack.EndpointCompute, fakeopenstack.EndpointVolume} {
		cloud.SetFault(ep, fakeopenstack.FaultHang)
	}
	t.Cleanup(func() {
		cloud.ClearFaults()
		cloud.SetHangFor(0)
	})
}

// zonesAnsweredSince counts the zone lists (Nova's or Cinder's) asked for after since that got an
// answer: a listing has ended only once both have.
func zonesAnsweredSince(cloud *fakeopenstack.Server, since time.Time) int {
	return cloud.CountFunc(func(r fakeopenstack.Request) bool {
		return !r.Time.Before(since) && r.Status != 0 &&
			(r.Endpoint == fakeopenstack.EndpointCompute || r.Endpoint == fakeopenstack.EndpointVolume)
	})
}

func TestSlowOpenStack(t *testing.T) {
	t.Parallel()

	t.Run("When OpenStack is slow or hangs, a credential rotation should reach the controller's pod template before OpenStack answers", func(t *testing.T) {
		t.Parallel()
		e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
		// The default OpenStack timeout (30 s): a listing inside the reconcile would hold a
		// rotation that long against a hanging cloud.
		e.RunOperatorForTest(t, env.OperatorOptions{})
		waitAvailable(t, e)

		for _, tc := range []struct {
			name    string
			hangFor time.Duration
		}{
			{name: "When every OpenStack answer comes 5 s late, it should apply the new template at once", hangFor: 5 * time.Second},
			{name: "When OpenStack never answers, it should apply the new template at once", hangFor: 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := NewWithT(t)
				slowOpenStack(t, e.OpenStack, tc.hangFor)
				secret := &corev1.Secret{}
				secret.Namespace, secret.Name = e.Namespace, names.CredentialsSecret
				rotated := time.Now()
				update(t, e.MgmtClient, secret, "rotate-credentials", func(s *corev1.Secret) {
					// Still the same working credentials: a comment makes a new clouds.yaml.
					s.Data[names.KeyCloudsYAML] = fmt.Appendf(s.Data[names.KeyCloudsYAML], "# rotated at %s\n", rotated.Format(time.RFC3339Nano))
				})
				want := confighash.SecretKeys(secret, names.KeyCloudsYAML)

				var answered int
				g.Eventually(func(g Gomega) {
					dep := controllerDeployment(g, e)
					answered = zonesAnsweredSince(e.OpenStack, rotated)
					g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue(credentialsHashKey, want))
				}).WithTimeout(installTimeout).WithPolling(fastPoll).Should(Succeed())
				took := time.Since(rotated)
				t.Logf("The new controller pod template was applied %s after the Secret changed; OpenStack had answered %d zone lists since",
					took.Round(time.Millisecond), answered)
				g.Expect(answered).To(BeZero(), "the new template must not have waited for the zone listing")
			})
		}
	})

	t.Run("When OpenStack hangs during a fresh install, the controller should be applied after the first-decision bound and topology decided once OpenStack answers", func(t *testing.T) {
		t.Parallel()
		e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
		// Each answer 5 s late: the first listing (Keystone's version document, a token, the
		// two zone lists) ends after about 20 s, within the 30 s OpenStack timeout and well
		// after the 10 s first-decision bound.
		const hangFor = 5 * time.Second
		slowOpenStack(t, e.OpenStack, hangFor)
		start := time.Now()
		e.RunOperatorForTest(t, env.OperatorOptions{})

		g := NewWithT(t)
		var answered int
		g.Eventually(func(g Gomega) {
			dep := &appsv1.Deployment{}
			err := e.MgmtClient.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: names.ControllerDeployment}, dep)
			answered = zonesAnsweredSince(e.OpenStack, start)
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(installTimeout).WithPolling(fastPoll).Should(Succeed())
		t.Logf("The controller Deployment was applied %s after the operator started (first-decision bound %s, each OpenStack answer %s late); OpenStack had answered %d zone lists",
			time.Since(start).Round(time.Millisecond), controlplane.DefaultFirstTopologyWait, hangFor, answered)
		g.Expect(answered).To(BeZero(), "the controller must be applied before the first listing ends")
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
			g.Expect(c.Message).To(ContainSubstring("still being listed"))
		}).WithTimeout(installTimeout).WithPolling(fastPoll).Should(Succeed())

		// The default zones match: once the listing ends, topology is enabled.
		g.Eventually(func(g Gomega) {
			expectTopology(g, e, true)
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
			g.Expect(c.Message).To(ContainSubstring("every compute availability zone has a volume availability zone"))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("Topology was decided %s after the operator started", time.Since(start).Round(time.Millisecond))
		waitAvailable(t, e)
	})
}
