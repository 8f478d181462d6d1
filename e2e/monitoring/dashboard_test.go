package monitoring

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const dashboardFile = "../../manifests/install/monitoring/dashboard.yaml"

// TestDashboard reads the console dashboard and has a real Prometheus (with nothing to scrape)
// evaluate each of its queries: every one must parse. That each returns data in a world with the
// operator running is e2e/storage's to check; here, that the panels draw into a PNG.
func TestDashboard(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Dir(promtool(t))
	title, panels, err := ReadDashboard(dashboardFile, "clusters-example")
	t.Logf("%d panels", len(panels))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(title).NotTo(BeEmpty())
	g.Expect(panels).To(HaveLen(7))

	work := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(work, "prometheus.yml"), []byte("global: {}\n"), 0o600)).To(Succeed())
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	p, err := startProcess(ctx, Options{Binary: filepath.Join(dir, "prometheus"), Dir: work, Listen: addr})
	g.Expect(err).NotTo(HaveOccurred())
	defer p.Stop()
	for _, panel := range panels {
		g.Expect(panel.Queries).NotTo(BeEmpty(), panel.Title)
		for _, q := range panel.Queries {
			g.Expect(q.Expr).To(ContainSubstring(`namespace="clusters-example"`), "every query is of the chosen namespace")
			_, err := p.Query(ctx, q.Expr)
			g.Expect(err).NotTo(HaveOccurred(), "%s: %s", panel.Title, q.Expr)
		}
	}
	end := time.Now()
	out := filepath.Join(work, "dashboard.png")
	g.Expect(DrawDashboard(ctx, p, title, panels, end.Add(-5*time.Minute), end, out)).To(Succeed())
	st, err := os.Stat(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Size()).To(BeNumerically(">", 1000))
}

func TestSegments(t *testing.T) {
	g := NewWithT(t)
	start := time.Unix(1000, 0)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Minute) }
	segs := segments(Series{
		Times:  []time.Time{at(0), at(1), at(2), at(3), at(4), at(5)},
		Values: []float64{math.NaN(), 1, 2, math.NaN(), math.Inf(1), 3},
	}, start)
	g.Expect(segs).To(HaveLen(2), "a gap where there is no number")
	g.Expect(segs[0]).To(HaveLen(2))
	g.Expect(segs[0][0].X).To(Equal(1.0))
	g.Expect(segs[1]).To(HaveLen(1))
	g.Expect(segs[1][0].Y).To(Equal(3.0))
	g.Expect(segments(Series{Times: []time.Time{at(0)}, Values: []float64{math.NaN()}}, start)).To(BeEmpty())
}

func TestLegend(t *testing.T) {
	g := NewWithT(t)
	g.Expect(legend("{{openstack_service}} {{outcome}}", map[string]string{"openstack_service": "volume", "outcome": "Timeout"})).To(Equal("volume Timeout"))
	g.Expect(legend("{{phase}}", map[string]string{"phase": "attaching"})).To(Equal("attaching"))
	// A label the series lacks shows empty, as in Grafana; a legend left empty names the value.
	g.Expect(legend("{{openstack_service}} zones", map[string]string{})).To(Equal("zones"))
	g.Expect(legend("{{zone}}", nil)).To(Equal("value"))
	g.Expect(legend("", map[string]string{"zone": "a"})).To(Equal("value"))
}
