package desired

import (
	"errors"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudconfig"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudsyaml"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
)

// This file resolves what the controlplane manager read (Input) into the settings its objects
// are computed from, and finds the invalid or missing input on the way. It is pure:
// clouds.yaml and the CA bundle are checked by their owner, shared/cloudsyaml, and only
// worded here, with the object and key they came from.

// defaultCloudName is the clouds.yaml entry OpenShift's installer and `hypershift create cluster
// openstack` write; used when the HostedControlPlane does not name one.
const defaultCloudName = "openstack"

// Problem is invalid or missing user input: it degrades the operator with a message that says
// what to fix, and the objects it would change are left as they are.
type Problem struct {
	Reason  string
	Message string
}

// settings is what the validated input resolves to.
type settings struct {
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
	// Features are the opt-in feature keys of cinder-csi-config; Report what the user's
	// configuration holds that the driver never sees or does not know (the warnings').
	Features features
	Report   cloudconfig.Report
	// LiveNode is the live node copy of cloud-conf, decoded: the zones it records stay in force
	// while OpenStack cannot be asked.
	LiveNode nodeconf.Contents
	// Source is where the driver settings (the [BlockStorage] of both confs, Override) come
	// from.
	Source ConfigSource
	// Proxy is the proxy towards OpenStack: the cluster-wide one (standalone) or the operator's
	// own (HyperShift). TrustedCA is the injected CA bundle (standalone).
	Proxy     configv1.ProxyStatus
	TrustedCA *corev1.ConfigMap
	// Monitoring is which monitoring objects are applied next to the controller.
	Monitoring Monitoring
	// TLS is the cluster's TLS security profile, for the controller's kube-rbac-proxies.
	TLS tlsprofile.Settings
	// Owner is the HostedControlPlane as the owner of the objects next to the controller
	// (HyperShift); AdditionalTrustBundle the filled ConfigMap it names for extra CAs.
	Owner                 *metav1.OwnerReference
	AdditionalTrustBundle *corev1.ConfigMap
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
func resolveStandalone(cfg *settings, in *Input) []Problem {
	if in.Infrastructure == nil || in.Infrastructure.Status.InfrastructureName == "" {
		return []Problem{{names.ReasonWaitingForConfig,
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
	cfg.TLS = tlsprofile.Resolve(tlsprofile.FromAPIServer(in.APIServer))
	return nil
}

// resolveHostedControlPlane fills in what the HostedControlPlane and the operator's own
// environment decide on HyperShift.
func resolveHostedControlPlane(cfg *settings, in *Input) []Problem {
	rc := in.Config
	cfg.Proxy = rc.Proxy
	hcp := in.HCP
	if hcp == nil {
		return []Problem{{names.ReasonMissingHostedControlPlane,
			fmt.Sprintf("No single HostedControlPlane found in namespace %s.", rc.Namespace)}}
	}
	cfg.ClusterID = hcp.Spec.InfraID
	cfg.HA = hcp.Spec.ControllerAvailabilityPolicy == hyperv1.HighlyAvailable
	cfg.NodeSelector = hcp.Spec.NodeSelector
	cfg.Tolerations = hcp.Spec.Tolerations
	cfg.PodLabels = hcp.Spec.Labels
	cfg.TLS = tlsprofile.Resolve(tlsprofile.FromHostedControlPlane(hcp))
	if platform := hcp.Spec.Platform.OpenStack; platform != nil && platform.IdentityRef.CloudName != "" {
		cfg.CloudName = platform.IdentityRef.CloudName
	}
	cfg.Owner = hostedControlPlaneOwner(hcp)
	// hypershift-operator writes the ConfigMap before it names it in the HostedControlPlane;
	// one that is missing or empty is not there yet, and its arrival rolls the controller once.
	if cm := in.AdditionalTrustBundle; cm != nil && cm.Data[names.KeyTrustedCA] != "" {
		cfg.AdditionalTrustBundle = cm
	}
	return nil
}

// resolve validates the inputs and resolves them into settings, or returns the problems found.
func resolve(driver *operatorv1.ClusterCSIDriver, in *Input) (*settings, []Problem) {
	rc := in.Config
	var problems []Problem
	// HyperShift's profile comes with the HostedControlPlane; standalone's, from APIServer.
	cfg := &settings{CloudName: defaultCloudName, TLS: tlsprofile.Intermediate(), Monitoring: in.Monitoring}

	v, err := loglevel.Verbosity(driver.Spec.LogLevel)
	if err != nil {
		problems = append(problems, Problem{names.ReasonUnknownLogLevel,
			fmt.Sprintf("spec.logLevel %q of ClusterCSIDriver %s is not one of Normal, Debug, Trace, TraceAll.", driver.Spec.LogLevel, names.ClusterCSIDriverName)})
	}
	cfg.Verbosity = v

	if rc.HyperShift {
		problems = append(problems, resolveHostedControlPlane(cfg, in)...)
	} else {
		problems = append(problems, resolveStandalone(cfg, in)...)
	}
	// The operator creates the ConfigMap empty and the cluster network operator fills it: only
	// a filled one is an input. Hashing the empty one would add a hash annotation on the
	// reconcile after the one that created it, and so roll the controller a second time.
	if in.TrustedCA != nil && in.TrustedCA.Data[names.KeyTrustedCA] != "" {
		cfg.TrustedCA = in.TrustedCA
	}
	problems = append(problems, resolveCredentials(cfg, in)...)
	problems = append(problems, resolveDriverConfig(cfg, in)...)

	if in.NodeCloudConf != nil {
		// Only its zones are read, and they decode whatever else does not: a key that does
		// not decode is the guest manager's to report, and must not cost the recorded zones.
		cfg.LiveNode, _ = nodeconf.Decode(in.NodeCloudConf.Data)
	}
	if in.CloudConf != nil {
		// Absent or not a switch (a controller copy not yet written, or edited): no last known
		// decision.
		switch in.CloudConf.Data[nodeconf.KeyEnableTopology] {
		case "true":
			cfg.LastTopology = ptr.To(true)
		case "false":
			cfg.LastTopology = ptr.To(false)
		}
	}
	return cfg, problems
}

// resolveCredentials fills in clouds.yaml and the OpenStack CA, each checked.
func resolveCredentials(cfg *settings, in *Input) []Problem {
	rc := in.Config
	var problems []Problem
	switch {
	case in.Credentials == nil:
		problems = append(problems, Problem{names.ReasonMissingCredentials,
			fmt.Sprintf("Secret %s/%s with the OpenStack credentials (key %s) does not exist.", rc.Namespace, names.CredentialsSecret, names.KeyCloudsYAML)})
	case len(in.Credentials.Data[names.KeyCloudsYAML]) == 0:
		problems = append(problems, Problem{names.ReasonMissingCredentials,
			fmt.Sprintf("Secret %s/%s has no %s key.", rc.Namespace, names.CredentialsSecret, names.KeyCloudsYAML)})
	default:
		cfg.CloudsYAML = in.Credentials.Data[names.KeyCloudsYAML]
		if msg := cloudsyaml.Check(cfg.CloudsYAML, cfg.CloudName, cloudNameFrom(rc.HyperShift)); msg != "" {
			problems = append(problems, Problem{names.ReasonInvalidCredentials,
				fmt.Sprintf("%s in Secret %s/%s %s", names.KeyCloudsYAML, rc.Namespace, names.CredentialsSecret, msg)})
		}
	}
	ca, caProblem := caBundle(rc.Namespace, in)
	if caProblem != nil {
		problems = append(problems, *caProblem)
	}
	cfg.CABundle = ca
	return problems
}

// resolveDriverConfig fills in the driver's settings from the configuration source the user
// chose: both confs, the topology override, the report on the user's configuration and the
// opt-in features. It needs the cloud name and the CA resolved first.
func resolveDriverConfig(cfg *settings, in *Input) []Problem {
	var problems []Problem
	cfg.Source = chooseConfigSource(in)
	userINI, enableTopology := cfg.Source.settings()
	var err error
	if cfg.Override, err = cloudconfig.ParseTopologyOverride(enableTopology); err != nil {
		problems = append(problems, configProblem(cfg.Source, err))
	}
	ccIn := cloudconfig.Input{UserConfig: userINI, CloudName: cfg.CloudName, HasCA: cfg.CABundle != "",
		BlockStorageOnly: cfg.Source.Kind == InstallerConfigSource}
	if cfg.ControllerConf, err = cloudconfig.Controller(ccIn); err != nil {
		problems = append(problems, configProblem(cfg.Source, err))
	} else if cfg.NodeConf, err = cloudconfig.Node(ccIn); err != nil {
		problems = append(problems, configProblem(cfg.Source, err))
	} else if cfg.Report, err = cloudconfig.Inspect(ccIn); err != nil {
		problems = append(problems, configProblem(cfg.Source, err))
	}
	var featureErrs []error
	cfg.Features, featureErrs = parseFeatures(cfg.Source)
	for _, err := range featureErrs {
		problems = append(problems, configProblem(cfg.Source, err))
	}
	return problems
}

// caBundle returns the OpenStack CA: the credentials Secret's cacert key, where HyperShift puts
// the CA given at cluster creation, else the ca-bundle.pem key of the cloud ConfigMap (the older
// place). Neither is an error: many clouds use publicly trusted certificates. A CA that is there
// but is no PEM certificate bundle is a problem naming the object and key it came from: the
// driver fails to start on a ca-file without a certificate, and the key lands in the cloud-conf
// ConfigMap, which must never carry anything else (a private key pasted by mistake, say).
func caBundle(namespace string, in *Input) (string, *Problem) {
	var ca, where string
	switch {
	case in.Credentials != nil && strings.TrimSpace(string(in.Credentials.Data[names.KeyCACert])) != "":
		ca = string(in.Credentials.Data[names.KeyCACert])
		where = fmt.Sprintf("%s in Secret %s/%s", names.KeyCACert, namespace, names.CredentialsSecret)
	case in.CAConfigMap != nil && strings.TrimSpace(in.CAConfigMap.Data[names.KeyCABundle]) != "":
		ca = in.CAConfigMap.Data[names.KeyCABundle]
		where = fmt.Sprintf("%s in ConfigMap %s/%s", names.KeyCABundle, in.CAConfigMap.Namespace, in.CAConfigMap.Name)
	default:
		return "", nil
	}
	if msg := cloudsyaml.CheckCA([]byte(ca)); msg != "" {
		return "", &Problem{names.ReasonInvalidConfig,
			fmt.Sprintf("%s %s It must hold only the OpenStack CA certificates, PEM-encoded.", where, msg)}
	}
	return strings.TrimSpace(ca) + "\n", nil
}

// cloudNameFrom says where the cloud name comes from, so that a clouds.yaml without that cloud
// points the user at the setting to check.
func cloudNameFrom(hyperShift bool) string {
	if hyperShift {
		return "the HostedControlPlane's identityRef cloudName"
	}
	return fmt.Sprintf("the Infrastructure %s status.platformStatus.openstack.cloudName, %q when unset", names.InfrastructureName, defaultCloudName)
}

// configProblem words an error of the driver settings from src as a problem. A
// cloudconfig.ConfigError names the ConfigMap by its bare name: it gets the namespace, so the
// message names the object to fix, and is not capitalised into a name that does not exist. An
// error in the installer's cloud provider config names that ConfigMap and its key, and says why
// it was read and how to stop it being read.
func configProblem(src ConfigSource, err error) Problem {
	var ce *cloudconfig.ConfigError
	if !errors.As(err, &ce) {
		return Problem{names.ReasonInvalidConfig, conditions.Sentence(err.Error())}
	}
	named := *ce
	named.ConfigMap = src.Name
	if named.Key == names.KeyUserConfig {
		named.Key = src.Key
	}
	msg := conditions.Sentence(fmt.Sprintf("ConfigMap %s/%s", names.OpenShiftConfigNamespace, named.Error()))
	if src.Kind == InstallerConfigSource {
		msg += fmt.Sprintf(" It is the installer's cloud provider config, read because ConfigMap %s/%s does not exist: "+
			"fix it, or create %s, which takes precedence.", names.OpenShiftConfigNamespace, names.UserConfigMap, names.UserConfigMap)
	}
	return Problem{names.ReasonInvalidConfig, msg}
}
