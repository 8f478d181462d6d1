package desired

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// The prometheus-operator kinds; the scheme has no Go type for them.
var (
	// ServiceMonitorGVK is the kind of the ServiceMonitors of the controller and the operator.
	ServiceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	// PrometheusRuleGVK is the kind of the operator's alerts.
	PrometheusRuleGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}
)

// Monitoring says which of the monitoring stack's kinds the operator applies next to the
// controller: the ServiceMonitors when the cluster of the controller serves the kind, the
// PrometheusRule when it serves that kind too and the operator may write it.
type Monitoring struct {
	ServiceMonitors bool
	PrometheusRules bool
}

// desiredMonitoring returns the monitoring objects m asks for, in namespace: the controller's
// and the operator's ServiceMonitors, and the operator's alerts.
func desiredMonitoring(d *manifests.Decoder, m Monitoring, namespace string) ([]plan.Object, error) {
	var out []plan.Object
	if m.ServiceMonitors {
		for _, sm := range []struct{ file, service string }{
			{"controller_servicemonitor.yaml", names.ControllerMetricsService},
			{"operator_servicemonitor.yaml", names.OperatorMetricsService},
		} {
			obj, err := desiredServiceMonitor(d, sm.file, sm.service, namespace)
			if err != nil {
				return nil, fmt.Errorf("computing the ServiceMonitor of %s: %w", sm.service, err)
			}
			out = append(out, obj)
		}
	}
	if m.PrometheusRules {
		rule, err := manifests.Object[*unstructured.Unstructured](d, "prometheusrule.yaml")
		if err != nil {
			return nil, fmt.Errorf("computing the PrometheusRule: %w", err)
		}
		rule.SetNamespace(namespace)
		operand.Managed(rule)
		out = append(out, rule)
	}
	return out, nil
}

// desiredServiceMonitor returns the ServiceMonitor in file: every endpoint checks the serving
// certificate against the DNS name of service in namespace, which the service-ca operator's
// serving certificate for that Service carries.
func desiredServiceMonitor(d *manifests.Decoder, file, service, namespace string) (*unstructured.Unstructured, error) {
	sm, err := manifests.Object[*unstructured.Unstructured](d, file)
	if err != nil {
		return nil, err
	}
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil {
		return nil, fmt.Errorf("reading the ServiceMonitor endpoints: %w", err)
	}
	serverName := service + "." + namespace + ".svc"
	for i, e := range endpoints {
		ep, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("ServiceMonitor endpoint %d is not an object", i)
		}
		if err := unstructured.SetNestedField(ep, serverName, "tlsConfig", "serverName"); err != nil {
			return nil, fmt.Errorf("ServiceMonitor endpoint %d: %w", i, err)
		}
	}
	if err := unstructured.SetNestedSlice(sm.Object, endpoints, "spec", "endpoints"); err != nil {
		return nil, err
	}
	sm.SetNamespace(namespace)
	operand.Managed(sm)
	return sm, nil
}
