package controlplane

import (
	"errors"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
)

// RenderInputs are the inputs of an offline render: the objects the manager would read, each
// optional unless the mode needs it (the HostedControlPlane on HyperShift, Infrastructure in
// standalone mode, the credentials Secret in both).
type RenderInputs struct {
	Config         Config
	Driver         *operatorv1.ClusterCSIDriver
	HCP            *hyperv1.HostedControlPlane
	Infrastructure *configv1.Infrastructure
	Proxy          *configv1.Proxy
	Credentials    *corev1.Secret
	CAConfigMap    *corev1.ConfigMap
	UserConfig     *corev1.ConfigMap
	TrustedCA      *corev1.ConfigMap
	// EnableTopology is the topology decision when cinder-csi-config has no override: offline,
	// the availability zones cannot be listed.
	EnableTopology bool
	// ServiceMonitorCRD says the cluster serves ServiceMonitors (standalone only).
	ServiceMonitorCRD bool
}

// Render returns what the controlplane manager would apply for the inputs: the objects next to
// the controller, in apply order, and the node copy of cloud-conf for the guest. It runs the same
// validation and the same pure functions as the reconciler; invalid input is an error carrying
// the messages the Degraded condition would show.
func Render(d *manifests.Decoder, in RenderInputs) ([]client.Object, *corev1.ConfigMap, error) {
	r := &Reconciler{Config: in.Config}
	driver := in.Driver
	if driver == nil {
		driver = &operatorv1.ClusterCSIDriver{}
	}
	cfg, problems := r.resolve(driver, &inputs{
		HCP: in.HCP, Credentials: in.Credentials, CAConfigMap: in.CAConfigMap,
		Infrastructure: in.Infrastructure, Proxy: in.Proxy, TrustedCA: in.TrustedCA, UserConfig: in.UserConfig,
		ServiceMonitorCRD: in.ServiceMonitorCRD,
	})
	if len(problems) > 0 {
		return nil, nil, errors.New(problemsMessage(problems))
	}
	enabled := in.EnableTopology
	if cfg.Override != nil {
		enabled = *cfg.Override
	}
	return desiredAll(d, in.Config, cfg, in.Credentials, enabled)
}
