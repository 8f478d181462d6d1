//go:build e2e

package footprint

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
)

// reconcileMetric counts finished reconciles, labelled by controller and result.
const reconcileMetric = "controller_runtime_reconcile_total"

// reconcileTotals scrapes the /metrics of the operator process name, over HTTPS with a token
// allowed to read them, as Prometheus does, and returns reconcileMetric per controller, summed
// over results. Before the controllers have started it is empty.
func reconcileTotals(procs *env.Processes, name string) (map[string]float64, error) {
	body, err := procs.Scrape(context.Background(), name)
	if err != nil {
		return nil, err
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
