//go:build e2e

package storage

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/monitoring"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

var (
	prometheusBinary = flag.String("prometheus", "../../bin/prometheus-v0.316.0/prometheus", "the Prometheus of the test world's monitoring (make builds it)")
	dashboardPNG     = flag.String("dashboard-png", "", "when set, the HyperShift world on the real cloud draws the console dashboard's panels from its Nova outage into this PNG file")
)

// dashboardFile is the console dashboard of the install manifests, relative to this package.
const dashboardFile = "../../manifests/install/monitoring/dashboard.yaml"

// monitoringInterval is the test world's scrape and rule evaluation interval, shorter than the
// ServiceMonitors' 30 s so that a scenario waits on the rules' own durations, not on scrapes.
const monitoringInterval = 5 * time.Second

// The alerts the scenario expects, from manifests/operands/prometheusrule.yaml.
const (
	alertStuck       = "OpenStackCinderVolumeAttachmentStuck"
	alertUnreachable = "OpenStackCinderOpenStackUnreachable"
	// unreachableFor is that alert's for.
	unreachableFor = 5 * time.Minute
)

// attacherFlag returns the duration that the controller manifest the operator applies gives
// csi-attacher's flag name: retry-interval-max, its longest wait between two tries of an
// attach, or timeout, how long one try may wait on the driver. Waits read it there, so that
// none falls behind a change of the manifest.
func attacherFlag(t testing.TB, name string) time.Duration {
	t.Helper()
	g := NewWithT(t)
	dep, err := manifests.Object[*appsv1.Deployment](testutil.Decoder(t), "controller.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name != manifests.ContainerAttacher {
			continue
		}
		v, ok := testutil.FlagValue(c.Args, name)
		g.Expect(ok).To(BeTrue(), "the controller manifest gives %s --%s once", c.Name, name)
		d, err := time.ParseDuration(v)
		g.Expect(err).NotTo(HaveOccurred(), "%s's --%s", c.Name, name)
		return d
	}
	t.Fatalf("the controller manifest has no %s container", manifests.ContainerAttacher)
	return 0
}

// startPrometheus starts the world's Prometheus once the operator has created its ServiceMonitors
// and PrometheusRule, and waits until every target is scraped and the rules load.
func (w *world) startPrometheus(t *testing.T) *monitoring.Prometheus {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		rule := &unstructured.Unstructured{}
		rule.SetAPIVersion("monitoring.coreos.com/v1")
		rule.SetKind("PrometheusRule")
		g.Expect(w.Mgmt.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: names.AlertsRule}, rule)).To(Succeed())
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed(), "the operator creates its PrometheusRule next to the controller")
	bin, err := filepath.Abs(*prometheusBinary)
	g.Expect(err).NotTo(HaveOccurred())
	up := took(t, "Prometheus started, every target up")
	p, err := w.Env.StartPrometheus(ctx, bin, monitoringInterval)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Prometheus log:\n%s", procs.LogTail(p.LogPath(), 40))
		}
		p.Stop()
	})
	g.Eventually(func(g Gomega) {
		targets, err := p.Targets(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		byService := map[string]int{}
		for _, tg := range targets {
			g.Expect(tg.Health).To(Equal("up"), "%s: %s", tg.ScrapeURL, tg.LastError)
			byService[tg.Labels["service"]]++
		}
		g.Expect(byService).To(HaveKeyWithValue(names.OperatorMetricsService, BeNumerically(">=", 1)), "the operator's /metrics")
		g.Expect(byService).To(HaveKeyWithValue(names.ControllerMetricsService, BeNumerically(">=", 5)), "the controller's five kube-rbac-proxies")
	}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	up()
	groups, err := p.RuleGroups(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(HaveKeyWithValue("openstack-cinder-csi-driver", ContainElements(alertStuck, alertUnreachable)))
	g.Eventually(func(g Gomega) {
		s, err := p.Query(ctx, `cinder_csi_operator_condition{condition="`+names.ConditionControllerAvailable+`"}`)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s).NotTo(BeEmpty())
		g.Expect(s[0].Labels).To(HaveKeyWithValue("namespace", w.Namespace))
		g.Expect(s[0].Value).To(Equal(1.0))
	}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	return p
}

// alert returns the alert name of the world's namespace Prometheus holds, and whether it holds it.
func (w *world) alert(g Gomega, p *monitoring.Prometheus, name string) (monitoring.Alert, bool) {
	alerts, err := p.Alerts(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range alerts {
		if a.Labels["alertname"] == name && a.Labels["namespace"] == w.Namespace {
			return a, true
		}
	}
	return monitoring.Alert{}, false
}

// realNovaOutageAlerts stops Nova's API with a real Prometheus watching the world as OpenShift's
// monitoring watches it. A pod's volume then stays attaching: VolumeAttachmentWarning says so
// with what Cinder says of the volume, and the stuck-attachment alert fires. The operator's zone
// listings fail too: TopologyDegraded rises at once and the unreachable alert becomes pending,
// then fires once the outage has lasted its five minutes. Once nova-api is back the attacher's
// next try, at most its --retry-interval-max later, attaches the volume, the pod runs, both conditions
// clear and both alerts resolve. The worlds on the cloud see the outage together.
func realNovaOutageAlerts(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	prom := w.startPrometheus(t)
	w.mergeUserConfig(t, map[string]string{names.KeyAttachmentWarningAfter: "10s"})

	begun := time.Now()
	startNova := w.stopService(t, realcloud.ServiceNovaAPI)
	// After the lockstep: the other world may have kept this one waiting.
	stopped := time.Now()
	ns := w.realNamespace(t, "nova-outage")
	g.Expect(w.Guest.Create(ctx, claim(ns, "data", "", "1Gi"))).To(Succeed())
	g.Expect(w.Guest.Create(ctx, w.pod(ns, "user", "data", "echo ok > /data/file; sleep 3600", corev1.RestartPolicyNever))).To(Succeed())
	pv := w.waitBound(t, ns, "data")
	volumeID := pv.Spec.CSI.VolumeHandle
	// The operator counts the new volume in its zone, from its watch of PersistentVolumes.
	zone := ""
	if z := pvZones(pv); len(z) > 0 {
		zone = z[0]
	}
	g.Eventually(func(g Gomega) {
		s, err := prom.Query(ctx, fmt.Sprintf(`cinder_csi_operator_volumes{namespace=%q,zone=%q}`, w.Namespace, zone))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s).To(HaveLen(1), "the volumes of zone %q", zone)
		g.Expect(s[0].Value).To(BeNumerically(">=", 1))
	}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())

	var va storagev1.VolumeAttachment
	g.Eventually(func(g Gomega) {
		var vas storagev1.VolumeAttachmentList
		g.Expect(w.Guest.List(ctx, &vas)).To(Succeed())
		found := false
		for _, a := range vas.Items {
			if a.Spec.Source.PersistentVolumeName != nil && *a.Spec.Source.PersistentVolumeName == pv.Name {
				va, found = a, true
			}
		}
		g.Expect(found).To(BeTrue(), "a VolumeAttachment of %s", pv.Name)
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	created := va.CreationTimestamp.Time

	var warned, fired time.Time
	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionVolumeAttachmentWarning)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Message).To(ContainSubstring(va.Name))
		g.Expect(c.Message).To(ContainSubstring(volumeID))
		g.Expect(c.Message).To(ContainSubstring("Cinder has it available"), "Cinder's view of the volume: %s", c.Message)
		if warned.IsZero() {
			warned = time.Now()
			t.Logf("%s: %s", names.ConditionVolumeAttachmentWarning, c.Message)
		}
		a, ok := w.alert(g, prom, alertStuck)
		g.Expect(ok).To(BeTrue(), "%s is held", alertStuck)
		g.Expect(a.State).To(Equal("firing"))
		g.Expect(a.Labels).To(HaveKeyWithValue("phase", "attaching"))
		fired = time.Now()
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	t.Logf("VolumeAttachment created to condition: %s; to %s firing: %s", warned.Sub(created).Round(time.Second),
		alertStuck, fired.Sub(created).Round(time.Second))

	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionTopologyDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		a, ok := w.alert(g, prom, alertUnreachable)
		g.Expect(ok).To(BeTrue(), "%s is held", alertUnreachable)
		g.Expect(a.State).To(Equal("pending"))
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
	t.Logf("nova-api stopped to %s pending: %s", alertUnreachable, time.Since(stopped).Round(time.Second))
	g.Expect(w.available(ctx)).To(BeTrue(), "the driver stays Available while Nova's API is down")
	g.Eventually(func(g Gomega) {
		a, ok := w.alert(g, prom, alertUnreachable)
		g.Expect(ok).To(BeTrue(), "%s is held", alertUnreachable)
		g.Expect(a.State).To(Equal("firing"))
	}).WithTimeout(unreachableFor + 2*time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("nova-api stopped to %s firing: %s", alertUnreachable, time.Since(stopped).Round(time.Second))
	g.Expect(w.available(ctx)).To(BeTrue(), "the driver stays Available through the outage")

	startNova()
	// Once nova-api serves again (the start waits for it) and the other world has started it too.
	back := time.Now()
	// The attacher tries again after a backoff that doubles up to its --retry-interval-max; a try
	// may wait out its --timeout, and the attach then takes Nova's and the node's time, as a first
	// attach does. On a loaded machine it took 4 min 50 s from nova-api serving again to the pod
	// running, with the operator's own OpenStack requests timing out meanwhile.
	w.waitRunning(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user"}},
		attacherFlag(t, "retry-interval-max")+attacherFlag(t, "timeout")+podTimeout)
	t.Logf("nova-api back to the pod running (the attacher's next try): %s", time.Since(back).Round(time.Second))
	g.Eventually(func(g Gomega) {
		g.Expect(w.condition(g, names.ConditionVolumeAttachmentWarning).Status).To(Equal(operatorv1.ConditionFalse))
		g.Expect(w.condition(g, names.ConditionTopologyDegraded).Status).To(Equal(operatorv1.ConditionFalse))
		for _, name := range []string{alertStuck, alertUnreachable} {
			_, held := w.alert(g, prom, name)
			g.Expect(held).To(BeFalse(), "%s resolved", name)
		}
	}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("nova-api back to both conditions cleared and both alerts resolved: %s", time.Since(back).Round(time.Second))
	w.deletePod(t, ns, "user")
	g.Expect(w.Guest.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}})).To(Succeed())
	w.expectCinderClean(t)
	w.expectDashboardData(t, prom, begun, w.Env.Mode == env.ModeHyperShift)
}

// expectDashboardData checks that every query of the console dashboard returns data for the
// world's namespace in its Prometheus, and with draw and -dashboard-png draws its panels from
// since on.
func (w *world) expectDashboardData(t *testing.T, p *monitoring.Prometheus, since time.Time, draw bool) {
	ctx := context.Background()
	g := NewWithT(t)
	title, panels, err := monitoring.ReadDashboard(dashboardFile, w.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	for _, panel := range panels {
		for _, q := range panel.Queries {
			s, err := p.Query(ctx, q.Expr)
			g.Expect(err).NotTo(HaveOccurred(), "%s: %s", panel.Title, q.Expr)
			g.Expect(s).NotTo(BeEmpty(), "the dashboard's panel %q has data: %s", panel.Title, q.Expr)
		}
	}
	if draw && *dashboardPNG != "" {
		out, err := filepath.Abs(*dashboardPNG)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.MkdirAll(filepath.Dir(out), 0o755)).To(Succeed())
		g.Expect(monitoring.DrawDashboard(ctx, p, title+" (nova-api stopped, then back)", panels, since.Add(-time.Minute), time.Now(), out)).To(Succeed())
		t.Logf("Dashboard drawn into %s", out)
	}
}

// mergeUserConfig sets the keys of data in cinder-csi-config, keeping the others, and puts the
// ConfigMap back as it was when the test ends.
func (w *world) mergeUserConfig(t testing.TB, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}
	var before map[string]string
	existed := w.Guest.Get(ctx, key, cm) == nil
	if existed {
		before = maps.Clone(cm.Data)
	}
	merged := maps.Clone(before)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, data)
	w.setUserConfig(t, merged)
	t.Cleanup(func() {
		if existed {
			w.setUserConfig(t, before)
			return
		}
		_ = w.Guest.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	})
}

// stopService stops service name of the world's cloud, in step with the other worlds on it, and
// returns what starts it again (in step too); if the test ends without, its cleanup does.
func (w *world) stopService(t testing.TB, name string) (startAgain func()) {
	t.Helper()
	ctx := context.Background()
	w.cloudChange(t, "stop "+name, func() error { return w.Cloud.StopService(name) })
	started := false
	t.Cleanup(func() {
		if !started {
			// Starting a service that runs only waits until it serves.
			_ = w.Cloud.StartService(ctx, name)
		}
	})
	return func() {
		t.Helper()
		w.cloudChange(t, "start "+name, func() error { return w.Cloud.StartService(ctx, name) })
		started = true
	}
}
