package controlplane

import (
	"context"
	"errors"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// readInputs reads every object the plan is computed from out of the caches, into an Input for
// the driver; a missing object is not an error. The listing's Detection and the controller pods
// are the reconciler's to add.
func (r *Reconciler) readInputs(ctx context.Context, driver *operatorv1.ClusterCSIDriver) (*desired.Input, error) {
	ns := r.Config.Namespace
	in := &desired.Input{Config: r.Config.plan(), Driver: driver}
	// get reads one optional object; found is called when it exists.
	get := func(c client.Client, key client.ObjectKey, obj client.Object, found func()) error {
		cluster := r.errCluster(apply.ClusterGuest)
		if c == r.Mgmt {
			cluster = r.errCluster(apply.ClusterManagement)
		}
		ok, err := apply.GetOptional(ctx, c, cluster, key, obj)
		if ok {
			found()
		}
		return err
	}
	var (
		creds                              corev1.Secret
		caCM, userCM, cloudConf, trustedCA corev1.ConfigMap
		nodeConf                           corev1.ConfigMap
		additionalTrust                    corev1.ConfigMap
		dep                                appsv1.Deployment
		infra                              configv1.Infrastructure
		proxy                              configv1.Proxy
		apiServer                          configv1.APIServer
		monitorCRD                         apiextensionsv1.CustomResourceDefinition
	)
	errs := []error{
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.CredentialsSecret}, &creds, func() { in.Credentials = &creds }),
		get(r.Guest, client.ObjectKey{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}, &userCM, func() { in.UserConfig = &userCM }),
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.CloudConfConfigMap}, &cloudConf, func() { in.CloudConf = &cloudConf }),
		get(r.Guest, client.ObjectKey{Namespace: names.GuestNamespace, Name: nodeconf.Name(r.Config.HyperShift)}, &nodeConf, func() { in.NodeCloudConf = &nodeConf }),
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.ControllerDeployment}, &dep, func() { in.Deployment = &dep }),
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.TrustedCABundleConfigMap}, &trustedCA, func() { in.TrustedCA = &trustedCA }),
	}
	if r.Config.HyperShift {
		errs = append(errs, get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.HyperShiftCloudConfigMap}, &caCM, func() { in.CAConfigMap = &caCM }))
	} else {
		errs = append(errs,
			get(r.Guest, client.ObjectKey{Name: names.InfrastructureName}, &infra, func() { in.Infrastructure = &infra }),
			get(r.Guest, client.ObjectKey{Name: names.ProxyName}, &proxy, func() { in.Proxy = &proxy }),
			get(r.Guest, client.ObjectKey{Name: names.APIServerName}, &apiServer, func() { in.APIServer = &apiServer }),
			get(r.Guest, client.ObjectKey{Name: names.ServiceMonitorCRD}, &monitorCRD, func() { in.Monitoring.ServiceMonitors = clusters.Established(&monitorCRD) }),
		)
		if in.Infrastructure != nil && in.Infrastructure.Spec.CloudConfig.Name != "" {
			key := client.ObjectKey{Namespace: names.OpenShiftConfigNamespace, Name: in.Infrastructure.Spec.CloudConfig.Name}
			errs = append(errs, get(r.Guest, key, &caCM, func() { in.CAConfigMap = &caCM }))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	in.Monitoring = r.monitoring(ctx, in.Monitoring.ServiceMonitors)
	if r.Config.HyperShift {
		hcps := &hyperv1.HostedControlPlaneList{}
		if err := apply.List(ctx, r.Mgmt, r.errCluster(apply.ClusterManagement), hcps, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if len(hcps.Items) == 1 {
			in.HCP = &hcps.Items[0]
		}
		if ref := desired.AdditionalTrustBundleRef(in.HCP); ref != "" {
			key := client.ObjectKey{Namespace: ns, Name: ref}
			if err := get(r.Mgmt, key, &additionalTrust, func() { in.AdditionalTrustBundle = &additionalTrust }); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}
