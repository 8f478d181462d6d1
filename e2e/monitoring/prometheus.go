// Package monitoring runs a real Prometheus in a test world, configured as OpenShift's monitoring
// configures its own from the objects the operator creates: every endpoint of the ServiceMonitors
// in a namespace becomes a scrape job that finds its targets through the Kubernetes API
// (endpoints) and scrapes them over TLS with a ServiceAccount token, as prometheus-operator turns
// ServiceMonitors into configuration; the PrometheusRules' groups become its rule file. The binary
// is Prometheus itself, built from the Go module proxy (e2e/hack/build-upstream.sh prometheus).
package monitoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// Options describe one Prometheus.
type Options struct {
	// Binary is the prometheus executable.
	Binary string
	// Dir receives its configuration, rule file, token, CAs, data and log.
	Dir string
	// Netns, when set, is the network namespace it runs in, one from which the pods' addresses
	// and APIServer are reached (a real node's); its API is then reached through Dial.
	Netns string
	// Dial reaches addresses inside Netns; nil dials from here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Listen is its address, inside Netns when set (default 127.0.0.1:19090).
	Listen string
	// APIServer is the URL of the API server the targets are discovered through, as reached
	// from Netns, and APIServerCA its CA (PEM).
	APIServer   string
	APIServerCA []byte
	// Token is a ServiceAccount token that may list and watch endpoints, services and pods in
	// Namespace and get /metrics: what OpenShift's prometheus-k8s holds.
	Token string
	// ServingCA verifies the metrics endpoints' certificates (PEM): the CA of the service-ca
	// operator, which the ServiceMonitors' caFile names on OpenShift.
	ServingCA []byte
	// Namespace holds the ServiceMonitors and PrometheusRules, read through Client.
	Namespace string
	Client    client.Reader
	// Interval is how often targets are scraped and rules evaluated; zero keeps each
	// ServiceMonitor endpoint's own interval and OpenShift's 30 s evaluation.
	Interval time.Duration
}

// Prometheus is a running Prometheus.
type Prometheus struct {
	o    Options
	proc *procs.Process
	http *http.Client
	base string
}

// DefaultListen is where Prometheus listens unless told otherwise.
const DefaultListen = "127.0.0.1:19090"

// Start writes the configuration from the ServiceMonitors and PrometheusRules of o.Namespace,
// starts Prometheus and returns once it is ready.
func Start(ctx context.Context, o Options) (*Prometheus, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	cfg, rules, err := configFromCluster(ctx, o)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"prometheus.yml": cfg, "rules.yml": rules, "token": []byte(o.Token),
		"apiserver-ca.crt": o.APIServerCA, "service-ca.crt": o.ServingCA}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(o.Dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return startProcess(ctx, o)
}

// startProcess starts Prometheus on the configuration in o.Dir and returns once it is ready.
func startProcess(ctx context.Context, o Options) (*Prometheus, error) {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "data"), 0o755); err != nil {
		return nil, err
	}
	proc, err := procs.Start(procs.Options{
		Name: "prometheus", Path: o.Binary, Netns: o.Netns, LogDir: o.Dir,
		Args: []string{
			"--config.file=" + filepath.Join(o.Dir, "prometheus.yml"),
			"--storage.tsdb.path=" + filepath.Join(o.Dir, "data"),
			"--web.listen-address=" + o.Listen,
		},
	})
	if err != nil {
		return nil, err
	}
	p := &Prometheus{o: o, proc: proc, base: "http://" + o.Listen}
	p.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: o.Dial}}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	wait := procs.Wait{What: "Prometheus ready", Interval: 200 * time.Millisecond, Log: proc.LogPath(),
		Alive: func() error { return procs.FirstExit(proc) }}
	if err := procs.Poll(ctx, wait, func() (bool, error) {
		// Not answering yet is not ready yet.
		res, err := p.get(ctx, "/-/ready")
		if err == nil {
			_ = res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusOK, nil
	}); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Stop stops Prometheus.
func (p *Prometheus) Stop() { p.proc.Stop(10 * time.Second) }

// URL is its address, inside Options.Netns when set.
func (p *Prometheus) URL() string { return p.base }

// LogPath is its log.
func (p *Prometheus) LogPath() string { return p.proc.LogPath() }

// Sample is one series of an instant query's vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query evaluates expr now.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.api(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, not a vector", expr, data.ResultType)
	}
	out := make([]Sample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", expr, r.Value[1], err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// Alert is one alert Prometheus holds, pending or firing.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
}

// Alerts returns the alerts pending or firing now.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := p.api(ctx, "/api/v1/alerts", &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

// Target is one scrape target and its health.
type Target struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// Targets returns the active scrape targets.
func (p *Prometheus) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		ActiveTargets []Target `json:"activeTargets"`
	}
	if err := p.api(ctx, "/api/v1/targets?state=active", &data); err != nil {
		return nil, err
	}
	return data.ActiveTargets, nil
}

// RuleGroups returns the names of the rules loaded, by group, and the last evaluation error of
// any that failed.
func (p *Prometheus) RuleGroups(ctx context.Context) (map[string][]string, error) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api(ctx, "/api/v1/rules", &data); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	var errs []error
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[g.Name] = append(out[g.Name], r.Name)
			if r.Health == "err" {
				errs = append(errs, fmt.Errorf("rule %s: %s", r.Name, r.LastError))
			}
		}
	}
	return out, errors.Join(errs...)
}

func (p *Prometheus) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return nil, err
	}
	return p.http.Do(req)
}

// api reads one answer of Prometheus' HTTP API into data.
func (p *Prometheus) api(ctx context.Context, path string, data any) error {
	res, err := p.get(ctx, path)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s answered %d: %s", path, res.StatusCode, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// configFromCluster reads the ServiceMonitors and PrometheusRules of o.Namespace and returns the
// Prometheus configuration and rule file they make.
func configFromCluster(ctx context.Context, o Options) (cfg, rules []byte, err error) {
	monitors := &unstructured.UnstructuredList{}
	monitors.SetAPIVersion("monitoring.coreos.com/v1")
	monitors.SetKind("ServiceMonitorList")
	if err := o.Client.List(ctx, monitors, client.InNamespace(o.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing ServiceMonitors: %w", err)
	}
	ruleList := &unstructured.UnstructuredList{}
	ruleList.SetAPIVersion("monitoring.coreos.com/v1")
	ruleList.SetKind("PrometheusRuleList")
	if err := o.Client.List(ctx, ruleList, client.InNamespace(o.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing PrometheusRules: %w", err)
	}
	files := sdFiles{Dir: o.Dir, APIServer: o.APIServer}
	var jobs []map[string]any
	for i := range monitors.Items {
		js, err := scrapeConfigs(&monitors.Items[i], files, o.Interval)
		if err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, js...)
	}
	global := map[string]any{"scrape_interval": "30s", "evaluation_interval": "30s"}
	if o.Interval > 0 {
		global = map[string]any{"scrape_interval": o.Interval.String(), "evaluation_interval": o.Interval.String()}
	}
	cfg, err = yaml.Marshal(map[string]any{
		"global":         global,
		"rule_files":     []string{filepath.Join(o.Dir, "rules.yml")},
		"scrape_configs": jobs,
	})
	if err != nil {
		return nil, nil, err
	}
	rules, err = RuleFile(ruleList.Items)
	return cfg, rules, err
}

// RuleFile returns the Prometheus rule file of PrometheusRules: their spec.groups, one after the
// other, as prometheus-operator loads them.
func RuleFile(rules []unstructured.Unstructured) ([]byte, error) {
	var groups []any
	for _, r := range rules {
		gs, _, err := unstructured.NestedSlice(r.Object, "spec", "groups")
		if err != nil {
			return nil, fmt.Errorf("PrometheusRule %s: %w", r.GetName(), err)
		}
		groups = append(groups, gs...)
	}
	return yaml.Marshal(map[string]any{"groups": groups})
}

// sdFiles are what each scrape job reads from Dir: the token, the CAs.
type sdFiles struct {
	Dir       string
	APIServer string
}

// unsafeLabel matches what a Kubernetes label name has and a Prometheus label name may not.
var unsafeLabel = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// scrapeConfigs returns the scrape jobs of ServiceMonitor sm, one per endpoint, as
// prometheus-operator makes them: targets are the endpoints of the Services in sm's namespace
// whose labels match its selector, on the endpoint's port name; each scrape sends the token and
// checks the target's certificate against the ServingCA and the endpoint's serverName. The
// ServiceMonitor's caFile and bearerTokenFile are paths in OpenShift's Prometheus pod; the files
// in Dir stand in for them. interval, when set, replaces each endpoint's.
func scrapeConfigs(sm *unstructured.Unstructured, f sdFiles, interval time.Duration) ([]map[string]any, error) {
	selector, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return nil, fmt.Errorf("ServiceMonitor %s: selector: %w", sm.GetName(), err)
	}
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil {
		return nil, fmt.Errorf("ServiceMonitor %s: endpoints: %w", sm.GetName(), err)
	}
	jobLabel, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
	token, ca := filepath.Join(f.Dir, "token"), filepath.Join(f.Dir, "service-ca.crt")
	var jobs []map[string]any
	for i, e := range endpoints {
		ep, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("ServiceMonitor %s: endpoint %d is not an object", sm.GetName(), i)
		}
		port, _ := ep["port"].(string)
		relabel := []map[string]any{}
		for k, v := range selector {
			relabel = append(relabel, map[string]any{"action": "keep",
				"source_labels": []string{"__meta_kubernetes_service_label_" + unsafeLabel.ReplaceAllString(k, "_")},
				"regex":         regexp.QuoteMeta(v)})
		}
		relabel = append(relabel,
			map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_endpoint_port_name"}, "regex": regexp.QuoteMeta(port)},
			map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "service"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
			map[string]any{"target_label": "endpoint", "replacement": port},
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job"})
		if jobLabel != "" {
			relabel = append(relabel, map[string]any{"source_labels": []string{"__meta_kubernetes_service_label_" + unsafeLabel.ReplaceAllString(jobLabel, "_")},
				"regex": "(.+)", "target_label": "job"})
		}
		job := map[string]any{
			"job_name":        fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.GetNamespace(), sm.GetName(), i),
			"metrics_path":    stringOr(ep["path"], "/metrics"),
			"scheme":          stringOr(ep["scheme"], "http"),
			"relabel_configs": relabel,
			"kubernetes_sd_configs": []map[string]any{{
				"role": "endpoints", "api_server": f.APIServer,
				"namespaces":    map[string]any{"names": []string{sm.GetNamespace()}},
				"authorization": map[string]any{"credentials_file": token},
				"tls_config":    map[string]any{"ca_file": filepath.Join(f.Dir, "apiserver-ca.crt")},
			}},
		}
		if d := stringOr(ep["interval"], ""); d != "" {
			job["scrape_interval"] = d
		}
		if interval > 0 {
			job["scrape_interval"] = interval.String()
		}
		if _, ok := ep["bearerTokenFile"]; ok {
			job["authorization"] = map[string]any{"credentials_file": token}
		}
		if tc, ok := ep["tlsConfig"].(map[string]any); ok {
			t := map[string]any{"ca_file": ca}
			if sn := stringOr(tc["serverName"], ""); sn != "" {
				t["server_name"] = sn
			}
			job["tls_config"] = t
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

func stringOr(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}
