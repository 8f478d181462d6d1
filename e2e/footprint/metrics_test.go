//go:build e2e

package footprint

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// reconcileMetric counts finished reconciles, labelled by controller and result.
const reconcileMetric = "controller_runtime_reconcile_total"

// reconcileTotals scrapes the operator's /metrics at addr and returns reconcileMetric per
// controller, summed over results. Before the controllers have started it is empty.
func reconcileTotals(addr string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %s", resp.Status)
	}
	out := map[string]float64{}
	// The text exposition format: name{label="value",...} value
	for line := range strings.Lines(string(body)) {
		rest, ok := strings.CutPrefix(line, reconcileMetric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return nil, fmt.Errorf("unexpected %s line %q", reconcileMetric, line)
		}
		_, controller, ok := strings.Cut(labels, `controller="`)
		if !ok {
			return nil, fmt.Errorf("no controller label in %q", line)
		}
		controller, _, _ = strings.Cut(controller, `"`)
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		out[controller] += v
	}
	return out, nil
}
