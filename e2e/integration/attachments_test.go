package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestAttachments: the attachment monitor explains an attachment that does not finish with what
// Cinder says of its volume, names a node at its attach limit, records an Event for each, clears
// both once the attachment finishes, and asks Cinder nothing while nothing is stuck. The world's
// nodes are simulated, so no attacher runs: a VolumeAttachment stays attaching until the test
// marks it attached, as an attacher that cannot attach would leave it.
func TestAttachments(t *testing.T) {
	t.Parallel()
	const bound = 10 * time.Second
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	setUserConfig(t, e, map[string]string{names.KeyAttachmentWarningAfter: bound.String()})
	e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)
	ctx := t.Context()

	// A volume Nova attached to a server that is not the node's: the case an administrator
	// most often has to untangle by hand.
	cloud := newCloudClients(t, e.OpenStack)
	const nodeServer, otherServer = "7d3a8d6e-0000-4000-8000-00000000a001", "7d3a8d6e-0000-4000-8000-00000000a002"
	for _, id := range []string{nodeServer, otherServer} {
		NewWithT(t).Expect(e.OpenStack.AddServer(fakeopenstack.ServerInfo{ID: id, Name: "server-" + id[len(id)-4:]})).To(Succeed())
	}
	volumeID := cloud.attachedVolume(t, otherServer)

	// What the guest would hold: the node plugin's registration (its server and a limit of one
	// volume), the claim's PersistentVolume and the attachment the attacher cannot finish.
	g := NewWithT(t)
	node := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "worker-a"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
		Name: names.DriverName, NodeID: nodeServer, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](1)},
	}}}}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-stuck"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.DriverName, VolumeHandle: volumeID}},
		},
	}
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-stuck"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: names.DriverName, NodeName: node.Name,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv.Name)}},
	}
	// The operator's reads of the volume, counted from here: the test's own are before.
	gets := func() int {
		return e.OpenStack.CountFunc(func(r fakeopenstack.Request) bool {
			return r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/volumes/"+volumeID)
		})
	}
	seeded := gets()
	cinderReads := func() int { return gets() - seeded }
	for _, o := range []client.Object{node, pv, va} {
		g.Expect(e.GuestClient.Create(ctx, o)).To(Succeed())
	}
	// The API server's clock, to the second: what the monitor measures the bound from.
	created := va.CreationTimestamp.Time

	t.Run("When an attachment is younger than the bound, it should not be reported, nor Cinder asked", func(t *testing.T) {
		g := NewWithT(t)
		g.Consistently(func(g Gomega) {
			c := condition(g, e, names.ConditionVolumeAttachmentWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(bound / 2).WithPolling(time.Second).Should(Succeed())
		g.Expect(cinderReads()).To(BeZero())
	})

	var stuckAfter time.Duration
	t.Run("When the attachment passes the bound, it should say what Cinder says of the volume and what to do", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionVolumeAttachmentWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(names.ReasonVolumeAttachmentsStuck))
			g.Expect(c.Message).To(ContainSubstring("csi-stuck (volume " + volumeID + ", node worker-a) is stuck attaching: "))
			g.Expect(c.Message).To(ContainSubstring("Cinder has it in-use on server " + otherServer + ", not on the node's server " + nodeServer))
			g.Expect(c.Message).To(ContainSubstring("openstack server remove volume " + otherServer + " " + volumeID))
		}).WithTimeout(bound + 20*time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		stuckAfter = time.Since(created)
		t.Logf("reported %s after the attachment was created (bound %s)", stuckAfter.Round(100*time.Millisecond), bound)
		g.Expect(stuckAfter).To(BeNumerically(">=", bound))
		g.Expect(cinderReads()).To(BeNumerically(">=", 1))
	})

	t.Run("When a node has as many volumes as its plugin can attach, it should name it", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionNodeAttachLimitWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("worker-a (1 of 1)"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})

	t.Run("When the attachment is reported, it should record a Warning Event on it", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) []eventsv1.Event {
			return attachmentEvents(g, e, va.Name, names.ReasonVolumeAttachmentStuck)
		}).WithTimeout(10 * time.Second).Should(ContainElement(HaveField("Note", And(HavePrefix("Attaching since "), ContainSubstring("not on the node's server")))))
	})

	t.Run("When the attachment stays stuck, it should ask Cinder about it at most once a minute", func(t *testing.T) {
		g := NewWithT(t)
		before := cinderReads()
		time.Sleep(5 * time.Second)
		g.Expect(cinderReads() - before).To(BeNumerically("<=", 1))
	})

	t.Run("When the attachment finishes, it should clear both warnings and say so in an Event", func(t *testing.T) {
		g := NewWithT(t)
		cur := &storagev1.VolumeAttachment{}
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKeyFromObject(va), cur)).To(Succeed())
		cur.Status.Attached = true
		g.Expect(e.GuestClient.Status().Update(ctx, cur)).To(Succeed())
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionVolumeAttachmentWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		g.Eventually(func(g Gomega) []eventsv1.Event {
			return attachmentEvents(g, e, va.Name, names.ReasonVolumeAttachmentFinished)
		}).WithTimeout(10 * time.Second).ShouldNot(BeEmpty())
		// The node still has its one volume attached: still at its limit, until it is detached.
		g.Expect(e.GuestClient.Delete(ctx, cur)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(condition(g, e, names.ConditionNodeAttachLimitWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})

	t.Run("When nothing is stuck, it should ask Cinder nothing", func(t *testing.T) {
		g := NewWithT(t)
		before := cinderReads()
		time.Sleep(5 * time.Second)
		g.Expect(cinderReads()).To(Equal(before))
	})
}

// attachmentEvents returns the Events on VolumeAttachment name with reason.
func attachmentEvents(g Gomega, e *env.Env, name, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(e.GuestClient.List(context.Background(), &list)).To(Succeed())
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "VolumeAttachment" && ev.Regarding.Name == name && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// cloudClients are a client of the fake's Nova and Cinder, as an administrator's.
type cloudClients struct {
	compute, volume *gophercloud.ServiceClient
}

func newCloudClients(t *testing.T, s *fakeopenstack.Server) *cloudClients {
	t.Helper()
	g := NewWithT(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	pc, err := config.NewProviderClient(t.Context(), gophercloud.AuthOptions{
		IdentityEndpoint: s.AuthURL(), Username: fakeopenstack.DefaultUserName, Password: fakeopenstack.DefaultPassword,
		DomainName: "Default", TenantID: fakeopenstack.DefaultProjectID,
	}, config.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	g.Expect(err).NotTo(HaveOccurred())
	eo := gophercloud.EndpointOpts{Region: s.Region()}
	c := &cloudClients{}
	c.compute, err = openstack.NewComputeV2(pc, eo)
	g.Expect(err).NotTo(HaveOccurred())
	c.volume, err = openstack.NewBlockStorageV3(pc, eo)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// attachedVolume creates a volume and attaches it to server.
func (c *cloudClients) attachedVolume(t *testing.T, server string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	v, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "held-elsewhere", Size: 1}, nil).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) string {
		got, err := volumes.Get(ctx, c.volume, v.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		return got.Status
	}).WithTimeout(10 * time.Second).Should(Equal("available"))
	_, err = volumeattach.Create(ctx, c.compute, server, &volumeattach.CreateOpts{VolumeID: v.ID}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	return v.ID
}
