package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudconfig"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// defaultCloudName is the clouds.yaml entry OpenShift's installer and `hypershift create cluster
// openstack` write; used when the HostedControlPlane does not name one.
const defaultCloudName = "openstack"

// Inputs is everything the controlplane manager reads from the two clusters, each nil when it does
// not exist.
type Inputs struct {
	HCP         *hyperv1.HostedControlPlane
	Credentials *corev1.Secret
	// CAConfigMap holds the OpenStack CA under ca-bundle.pem: openstack-cloud-config in the HCP
	// namespace, or, standalone, the cloud-provider config Infrastructure names.
	CAConfigMap *corev1.ConfigMap
	// Infrastructure and Proxy are the cluster's (standalone only).
	Infrastructure *configv1.Infrastructure
	Proxy          *configv1.Proxy
	// TrustedCA is the CA bundle the cluster network operator injects (standalone only).
	TrustedCA  *corev1.ConfigMap
	UserConfig *corev1.ConfigMap
	// CloudConf is the live controller copy of cloud-conf: it holds the last topology decision.
	CloudConf  *corev1.ConfigMap
	Deployment *appsv1.Deployment
	// ServiceMonitorCRD is set when the API server serves ServiceMonitors (standalone only).
	ServiceMonitorCRD bool
}

// readInputs reads every input from the caches; a missing object is not an error.
func (r *Reconciler) readInputs(ctx context.Context) (*Inputs, error) {
	ns := r.Config.Namespace
	in := &Inputs{}
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
		dep                                appsv1.Deployment
		infra                              configv1.Infrastructure
		proxy                              configv1.Proxy
		monitorCRD                         apiextensionsv1.CustomResourceDefinition
	)
	errs := []error{
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.CredentialsSecret}, &creds, func() { in.Credentials = &creds }),
		get(r.Guest, client.ObjectKey{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}, &userCM, func() { in.UserConfig = &userCM }),
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.CloudConfConfigMap}, &cloudConf, func() { in.CloudConf = &cloudConf }),
		get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.ControllerDeployment}, &dep, func() { in.Deployment = &dep }),
	}
	if r.Config.HyperShift {
		errs = append(errs, get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.HyperShiftCloudConfigMap}, &caCM, func() { in.CAConfigMap = &caCM }))
	} else {
		errs = append(errs,
			get(r.Guest, client.ObjectKey{Name: names.InfrastructureName}, &infra, func() { in.Infrastructure = &infra }),
			get(r.Guest, client.ObjectKey{Name: names.ProxyName}, &proxy, func() { in.Proxy = &proxy }),
			get(r.Mgmt, client.ObjectKey{Namespace: ns, Name: names.TrustedCABundleConfigMap}, &trustedCA, func() { in.TrustedCA = &trustedCA }),
			get(r.Guest, client.ObjectKey{Name: names.ServiceMonitorCRD}, &monitorCRD, func() { in.ServiceMonitorCRD = clusters.Established(&monitorCRD) }),
		)
		if in.Infrastructure != nil && in.Infrastructure.Spec.CloudConfig.Name != "" {
			key := client.ObjectKey{Namespace: names.OpenShiftConfigNamespace, Name: in.Infrastructure.Spec.CloudConfig.Name}
			errs = append(errs, get(r.Guest, key, &caCM, func() { in.CAConfigMap = &caCM }))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if r.Config.HyperShift {
		hcps := &hyperv1.HostedControlPlaneList{}
		if err := apply.List(ctx, r.Mgmt, r.errCluster(apply.ClusterManagement), hcps, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if len(hcps.Items) == 1 {
			in.HCP = &hcps.Items[0]
		}
	}
	return in, nil
}

// problem is invalid or missing user input: it degrades the operator with a message that says
// what to fix, and the objects it would change are left as they are.
type problem struct {
	Reason  string
	Message string
}

// config is what the validated inputs resolve to.
type config struct {
	Verbosity      int
	CloudName      string
	ClusterID      string
	HA             bool
	NodeSelector   map[string]string
	Tolerations    []corev1.Toleration
	PodLabels      map[string]string
	CloudsYAML     []byte
	CABundle       string
	ControllerConf string
	NodeConf       string
	Override       *bool
	LastTopology   *bool
	// Proxy is the proxy towards OpenStack: the cluster-wide one (standalone) or the operator's
	// own (HyperShift). TrustedCA is the injected CA bundle (standalone).
	Proxy     configv1.ProxyStatus
	TrustedCA *corev1.ConfigMap
	// ServiceMonitor is set when the controller's ServiceMonitor is to be applied (standalone,
	// with the kind served).
	ServiceMonitor bool
}

// Standalone placement of the controller: the masters, unless the control plane is External
// (hosted elsewhere, so the cluster has no masters to run on).
var (
	masterNodeSelector = map[string]string{"node-role.kubernetes.io/master": ""}
	masterTolerations  = []corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
)

// resolveStandalone fills in what a standalone cluster's Infrastructure and Proxy decide.
func resolveStandalone(cfg *config, in *Inputs) []problem {
	if in.Infrastructure == nil || in.Infrastructure.Status.InfrastructureName == "" {
		return []problem{{names.ReasonWaitingForConfig,
			fmt.Sprintf("Infrastructure %s has no status.infrastructureName yet.", names.InfrastructureName)}}
	}
	st := in.Infrastructure.Status
	cfg.ClusterID = st.InfrastructureName
	cfg.HA = st.ControlPlaneTopology == configv1.HighlyAvailableTopologyMode
	if st.ControlPlaneTopology != configv1.ExternalTopologyMode {
		cfg.NodeSelector = masterNodeSelector
		cfg.Tolerations = masterTolerations
	}
	if ps := st.PlatformStatus; ps != nil && ps.OpenStack != nil && ps.OpenStack.CloudName != "" {
		cfg.CloudName = ps.OpenStack.CloudName
	}
	if in.Proxy != nil {
		cfg.Proxy = in.Proxy.Status
	}
	cfg.ServiceMonitor = in.ServiceMonitorCRD
	// The operator creates the ConfigMap empty and the cluster network operator fills it: only
	// a filled one is an input. Hashing the empty one would add a hash annotation on the
	// reconcile after the one that created it, and so roll the controller a second time.
	if in.TrustedCA != nil && in.TrustedCA.Data[names.KeyTrustedCA] != "" {
		cfg.TrustedCA = in.TrustedCA
	}
	return nil
}

// resolve validates the inputs and resolves them into a config, or returns the problems found.
func resolve(rc Config, driver *operatorv1.ClusterCSIDriver, in *Inputs) (*config, []problem) {
	var problems []problem
	cfg := &config{CloudName: defaultCloudName}

	v, err := loglevel.Verbosity(driver.Spec.LogLevel)
	if err != nil {
		problems = append(problems, problem{names.ReasonUnknownLogLevel,
			fmt.Sprintf("spec.logLevel %q of ClusterCSIDriver %s is not one of Normal, Debug, Trace, TraceAll.", driver.Spec.LogLevel, names.ClusterCSIDriverName)})
	}
	cfg.Verbosity = v

	if !rc.HyperShift {
		problems = append(problems, resolveStandalone(cfg, in)...)
	}
	if rc.HyperShift {
		cfg.Proxy = rc.Proxy
		if in.HCP == nil {
			problems = append(problems, problem{names.ReasonMissingHostedControlPlane,
				fmt.Sprintf("No single HostedControlPlane found in namespace %s.", rc.Namespace)})
		} else {
			hcp := in.HCP
			cfg.ClusterID = hcp.Spec.InfraID
			cfg.HA = hcp.Spec.ControllerAvailabilityPolicy == hyperv1.HighlyAvailable
			cfg.NodeSelector = hcp.Spec.NodeSelector
			cfg.Tolerations = hcp.Spec.Tolerations
			cfg.PodLabels = hcp.Spec.Labels
			if os := hcp.Spec.Platform.OpenStack; os != nil && os.IdentityRef.CloudName != "" {
				cfg.CloudName = os.IdentityRef.CloudName
			}
		}
	}

	switch {
	case in.Credentials == nil:
		problems = append(problems, problem{names.ReasonMissingCredentials,
			fmt.Sprintf("Secret %s/%s with the OpenStack credentials (key %s) does not exist.", rc.Namespace, names.CredentialsSecret, names.KeyCloudsYAML)})
	case len(in.Credentials.Data[names.KeyCloudsYAML]) == 0:
		problems = append(problems, problem{names.ReasonMissingCredentials,
			fmt.Sprintf("Secret %s/%s has no %s key.", rc.Namespace, names.CredentialsSecret, names.KeyCloudsYAML)})
	default:
		cfg.CloudsYAML = in.Credentials.Data[names.KeyCloudsYAML]
		if msg := checkCloudsYAML(cfg.CloudsYAML, cfg.CloudName, rc.HyperShift); msg != "" {
			problems = append(problems, problem{names.ReasonInvalidCredentials,
				fmt.Sprintf("%s in Secret %s/%s %s", names.KeyCloudsYAML, rc.Namespace, names.CredentialsSecret, msg)})
		}
	}
	cfg.CABundle = caBundle(in)

	userINI := ""
	if in.UserConfig != nil {
		userINI = in.UserConfig.Data[names.KeyUserConfig]
		o, err := cloudconfig.ParseTopologyOverride(in.UserConfig.Data[names.KeyEnableTopology])
		if err != nil {
			problems = append(problems, configProblem(err))
		}
		cfg.Override = o
	}
	ccIn := cloudconfig.Input{UserConfig: userINI, CloudName: cfg.CloudName, HasCA: cfg.CABundle != ""}
	if cfg.ControllerConf, err = cloudconfig.Controller(ccIn); err != nil {
		problems = append(problems, configProblem(err))
	} else if cfg.NodeConf, err = cloudconfig.Node(ccIn); err != nil {
		problems = append(problems, configProblem(err))
	}

	if in.CloudConf != nil {
		switch in.CloudConf.Data[names.KeyEnableTopology] {
		case "true":
			cfg.LastTopology = ptrTo(true)
		case "false":
			cfg.LastTopology = ptrTo(false)
		}
	}
	return cfg, problems
}

// caBundle returns the OpenStack CA: the credentials Secret's cacert key, where HyperShift puts
// the CA given at cluster creation, else the ca-bundle.pem key of the cloud ConfigMap (the older
// place). Neither is an error: many clouds use publicly trusted certificates.
func caBundle(in *Inputs) string {
	if in.Credentials != nil {
		if ca := strings.TrimSpace(string(in.Credentials.Data[names.KeyCACert])); ca != "" {
			return ca + "\n"
		}
	}
	if in.CAConfigMap != nil {
		if ca := strings.TrimSpace(in.CAConfigMap.Data[names.KeyCABundle]); ca != "" {
			return ca + "\n"
		}
	}
	return ""
}

// checkCloudsYAML checks, without contacting OpenStack, that clouds.yaml parses and names the
// cloud with an auth URL. It returns a message fragment (never quoting the file) or "".
// hyperShift tells where the cloud name comes from, so that the message points the user at it.
func checkCloudsYAML(data []byte, cloud string, hyperShift bool) string {
	var doc struct {
		Clouds map[string]struct {
			Auth struct {
				AuthURL string `json:"auth_url"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "is not valid YAML of the clouds.yaml format."
	}
	c, ok := doc.Clouds[cloud]
	if !ok {
		if !hyperShift {
			return fmt.Sprintf("has no cloud named %q (the Infrastructure %s status.platformStatus.openstack.cloudName, %q when unset).",
				cloud, names.InfrastructureName, defaultCloudName)
		}
		return fmt.Sprintf("has no cloud named %q (the HostedControlPlane's identityRef cloudName).", cloud)
	}
	if c.Auth.AuthURL == "" {
		return fmt.Sprintf("has no auth.auth_url for cloud %q.", cloud)
	}
	return ""
}

// configProblem words an error of the user's configuration as a problem. A cinder-csi-config
// error starts with the ConfigMap's bare name: it gets the namespace, so the message names the
// object to fix, and is not capitalised into a name that does not exist.
func configProblem(err error) problem {
	var ce *cloudconfig.ConfigError
	if errors.As(err, &ce) {
		return problem{names.ReasonInvalidConfig, sentence(fmt.Sprintf("ConfigMap %s/%s", names.OpenShiftConfigNamespace, err.Error()))}
	}
	return problem{names.ReasonInvalidConfig, sentence(err.Error())}
}

// sentence makes an error text a condition sentence.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }
