package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// promtool returns the promtool of PROMETHEUS_BIN_DIR, which the Makefile sets and builds.
func promtool(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PROMETHEUS_BIN_DIR")
	if dir == "" {
		t.Fatal("PROMETHEUS_BIN_DIR is not set: run the tests through make, which builds promtool into ./bin")
	}
	p := filepath.Join(dir, "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("promtool: %v (make builds it)", err)
	}
	return p
}

// operand reads the operand manifest name, one object.
func operand(t *testing.T, name string) unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "operands", name))
	if err != nil {
		t.Fatal(err)
	}
	var u unstructured.Unstructured
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAlertRules runs promtool's unit tests of every alert of the operator's PrometheusRule:
// when each fires, for which hosted cluster, with which labels and annotations, and when it
// clears.
func TestAlertRules(t *testing.T) {
	g := NewWithT(t)
	tool := promtool(t)
	dir := t.TempDir()
	rules, err := RuleFile([]unstructured.Unstructured{operand(t, "prometheusrule.yaml")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o600)).To(Succeed())
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o600)).To(Succeed())

	out, err := exec.Command(tool, "check", "rules", filepath.Join(dir, "rules.yml")).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "promtool check rules:\n%s", out)
	out, err = exec.Command(tool, "test", "rules", filepath.Join(dir, "alerts_test.yaml")).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "promtool test rules:\n%s", out)
	t.Logf("promtool test rules:\n%s", out)

	// Every alert of the rule file has a test.
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	g.Expect(yaml.Unmarshal(rules, &file)).To(Succeed())
	for _, gr := range file.Groups {
		for _, r := range gr.Rules {
			g.Expect(string(tests)).To(ContainSubstring("alertname: "+r.Alert+"\n"), "every alert is tested")
		}
	}
}

// TestScrapeConfig checks with promtool that the configuration made from the operator's
// ServiceMonitors is one Prometheus loads, and that each endpoint became a job that keeps only
// its Service's port and checks the certificate against the Service's name.
func TestScrapeConfig(t *testing.T) {
	g := NewWithT(t)
	tool := promtool(t)
	dir := t.TempDir()
	const ns = "openshift-cluster-csi-drivers"
	var jobs []map[string]any
	for _, file := range []string{"controller_servicemonitor.yaml", "operator_servicemonitor.yaml"} {
		sm := operand(t, file)
		sm.SetNamespace(ns)
		js, err := scrapeConfigs(&sm, sdFiles{Dir: dir, APIServer: "https://127.0.0.1:6443"}, 0)
		g.Expect(err).NotTo(HaveOccurred())
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		g.Expect(js).To(HaveLen(len(endpoints)))
		jobs = append(jobs, js...)
	}
	g.Expect(jobs).To(HaveLen(6), "five controller ports and the operator's")
	for _, j := range jobs {
		g.Expect(j).To(HaveKeyWithValue("scheme", "https"))
		g.Expect(j).To(HaveKey("tls_config"))
		g.Expect(j).To(HaveKey("authorization"))
	}
	for _, name := range []string{"token", "apiserver-ca.crt", "service-ca.crt"} {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)).To(Succeed())
	}
	cfg, err := yaml.Marshal(map[string]any{"scrape_configs": jobs})
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, "prometheus.yml")
	g.Expect(os.WriteFile(path, cfg, 0o600)).To(Succeed())
	out, err := exec.Command(tool, "check", "config", "--syntax-only", path).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "promtool check config:\n%s\n%s", out, cfg)
	g.Expect(strings.Count(string(cfg), "job_name:")).To(Equal(6))
}
