package controlplane

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	yamlv3 "gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudconfig"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/tlsprofile"
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
	// APIServer holds the cluster's TLS security profile (standalone only; HyperShift's is in
	// the HostedControlPlane).
	APIServer *configv1.APIServer
	// TrustedCA is the CA bundle the cluster network operator injects into the controller's
	// trusted-CA ConfigMap: standalone, the cluster's; on HyperShift, the management cluster's,
	// when it is an OpenShift cluster (nothing fills it elsewhere).
	TrustedCA *corev1.ConfigMap
	// AdditionalTrustBundle is the ConfigMap the HostedControlPlane's
	// spec.additionalTrustBundle names (HyperShift only): the CAs the hosted cluster's owner
	// added for the control plane and the nodes.
	AdditionalTrustBundle *corev1.ConfigMap
	UserConfig            *corev1.ConfigMap
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
		if ref := additionalTrustBundleRef(in.HCP); ref != "" {
			key := client.ObjectKey{Namespace: ns, Name: ref}
			if err := get(r.Mgmt, key, &additionalTrust, func() { in.AdditionalTrustBundle = &additionalTrust }); err != nil {
				return nil, err
			}
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
	cfg.TLS = tlsprofile.Resolve(tlsprofile.FromAPIServer(in.APIServer))
	return nil
}

// resolve validates the inputs and resolves them into a config, or returns the problems found.
func resolve(rc Config, driver *operatorv1.ClusterCSIDriver, in *Inputs) (*config, []problem) {
	var problems []problem
	// HyperShift's profile comes with the HostedControlPlane; standalone's, from APIServer.
	cfg := &config{CloudName: defaultCloudName, TLS: tlsprofile.Intermediate()}

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
			cfg.TLS = tlsprofile.Resolve(tlsprofile.FromHostedControlPlane(hcp))
			if os := hcp.Spec.Platform.OpenStack; os != nil && os.IdentityRef.CloudName != "" {
				cfg.CloudName = os.IdentityRef.CloudName
			}
			cfg.Owner = hostedControlPlaneOwner(hcp)
			// hypershift-operator writes the ConfigMap before it names it in the
			// HostedControlPlane; one that is missing or empty is not there yet, and its
			// arrival rolls the controller once.
			if cm := in.AdditionalTrustBundle; cm != nil && cm.Data[names.KeyTrustedCA] != "" {
				cfg.AdditionalTrustBundle = cm
			}
		}
	}
	// The operator creates the ConfigMap empty and the cluster network operator fills it: only
	// a filled one is an input. Hashing the empty one would add a hash annotation on the
	// reconcile after the one that created it, and so roll the controller a second time.
	if in.TrustedCA != nil && in.TrustedCA.Data[names.KeyTrustedCA] != "" {
		cfg.TrustedCA = in.TrustedCA
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
	ca, caProblem := caBundle(rc, in)
	if caProblem != nil {
		problems = append(problems, *caProblem)
	}
	cfg.CABundle = ca

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
// place). Neither is an error: many clouds use publicly trusted certificates. A CA that is there
// but is no PEM certificate bundle is a problem naming the object and key it came from: the
// driver fails to start on a ca-file without a certificate, and the key lands in the cloud-conf
// ConfigMap, which must never carry anything else (a private key pasted by mistake, say).
func caBundle(rc Config, in *Inputs) (string, *problem) {
	var ca, where string
	switch {
	case in.Credentials != nil && strings.TrimSpace(string(in.Credentials.Data[names.KeyCACert])) != "":
		ca = string(in.Credentials.Data[names.KeyCACert])
		where = fmt.Sprintf("%s in Secret %s/%s", names.KeyCACert, rc.Namespace, names.CredentialsSecret)
	case in.CAConfigMap != nil && strings.TrimSpace(in.CAConfigMap.Data[names.KeyCABundle]) != "":
		ca = in.CAConfigMap.Data[names.KeyCABundle]
		where = fmt.Sprintf("%s in ConfigMap %s/%s", names.KeyCABundle, in.CAConfigMap.Namespace, in.CAConfigMap.Name)
	default:
		return "", nil
	}
	if msg := checkCA([]byte(ca)); msg != "" {
		return "", &problem{names.ReasonInvalidConfig,
			fmt.Sprintf("%s %s It must hold only the OpenStack CA certificates, PEM-encoded.", where, msg)}
	}
	return strings.TrimSpace(ca) + "\n", nil
}

// checkCA checks that data is a bundle of PEM certificates: at least one CERTIFICATE block, each
// one an X.509 certificate Go parses, and outside the blocks nothing but blank lines and '#'
// comment lines (the distributions' trust bundles annotate each certificate that way). It
// returns a message fragment naming a line, never quoting it, or "".
//
// The driver (client-go's cert.NewPool) is laxer: it skips text and blocks of other types, and
// fails only without any certificate or on one that does not parse. Anything else here is
// refused all the same, because it is copied into a ConfigMap that anyone who can read the
// namespace sees.
func checkCA(data []byte) string {
	rest := data
	certs := 0
	for {
		// Skip blank and comment lines up to the next block or the end.
		for len(rest) > 0 {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) > 0 && trimmed[0] != '#' {
				break
			}
			rest = after
		}
		if len(rest) == 0 {
			break
		}
		at := lineOf(data, rest)
		// Go's PEM decoder, the driver's too, finds a block only at the start of a line.
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return fmt.Sprintf("has text outside a PEM certificate at line %d.", at)
		}
		// Decode this block alone: pem.Decode skips a malformed block and returns the next one.
		end := len(rest)
		if i := bytes.Index(rest, []byte("\n-----END ")); i >= 0 {
			if j := bytes.IndexByte(rest[i+1:], '\n'); j >= 0 {
				end = i + 1 + j + 1
			}
		}
		block, tail := pem.Decode(rest[:end])
		if block == nil || len(bytes.TrimSpace(tail)) > 0 {
			return fmt.Sprintf("has a PEM block at line %d that does not decode.", at)
		}
		after := rest[end:]
		if block.Type != "CERTIFICATE" {
			return fmt.Sprintf("has a PEM block at line %d that is not a CERTIFICATE.", at)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("has a CERTIFICATE at line %d that is not a valid X.509 certificate.", at)
		}
		certs++
		rest = after
	}
	if certs == 0 {
		return "holds no PEM certificate."
	}
	return ""
}

// lineOf returns the 1-based line of data at which its suffix rest starts.
func lineOf(data, rest []byte) int {
	return bytes.Count(data[:len(data)-len(rest)], []byte("\n")) + 1
}

// checkCloudsYAML checks, without contacting OpenStack, that clouds.yaml decodes as the driver
// decodes it and names the cloud with an auth URL. It returns a message fragment (never quoting
// the file) or "". hyperShift tells where the cloud name comes from, so that the message points
// the user at it.
//
// cinder-csi-plugin reads clouds.yaml with gophercloud/utils' clientconfig, which decodes the
// whole file with gopkg.in/yaml.v3 into its Clouds type and fails on any value of the wrong type
// (a password where `verify` wants true or false, a mapping where a string belongs), in any cloud
// entry. The decode here is the same: yaml.v3 into gophercloud's clouds.Clouds, whose fields,
// types and Region decoder are those of clientconfig.Clouds (it adds only auth.trust_id, a
// string). Unknown keys are ignored by both.
func checkCloudsYAML(data []byte, cloud string, hyperShift bool) string {
	var doc clouds.Clouds
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		var te *yamlv3.TypeError
		if errors.As(err, &te) {
			return wrongType(data, te)
		}
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
	if c.AuthInfo == nil || c.AuthInfo.AuthURL == "" {
		return fmt.Sprintf("has no auth.auth_url for cloud %q.", cloud)
	}
	return ""
}

// typeErrorLine matches the one kind of yaml.v3 decoding error wrongType can place: a node of
// the wrong kind for its field, "line N: cannot unmarshal !!tag[ `value`] into T".
var typeErrorLine = regexp.MustCompile("^line ([0-9]+): cannot unmarshal (!![a-z]+)")

// wrongType words the first error of a yaml.v3 decode of clouds.yaml into clouds.Clouds. yaml.v3
// quotes the offending value (a password pasted into the wrong field, perhaps), so the message is
// made anew: the field's path, found by walking the document along clouds.Clouds, its line, and
// what the field takes.
func wrongType(data []byte, te *yamlv3.TypeError) string {
	if len(te.Errors) == 0 {
		return "does not decode as clouds.yaml."
	}
	m := typeErrorLine.FindStringSubmatch(te.Errors[0])
	if m == nil {
		// The other kind is a key given twice in one mapping.
		if line, _, ok := strings.Cut(strings.TrimPrefix(te.Errors[0], "line "), ":"); ok {
			if _, err := strconv.Atoi(line); err == nil {
				return fmt.Sprintf("does not decode as clouds.yaml at line %s (a key given twice?).", line)
			}
		}
		return "does not decode as clouds.yaml."
	}
	line, _ := strconv.Atoi(m[1])
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err == nil && len(root.Content) == 1 {
		if path, t, ok := findWrongType(root.Content[0], reflect.TypeFor[clouds.Clouds](), "", line, m[2], 0); ok {
			if path == "" {
				path = "the top level"
			}
			return fmt.Sprintf("has a value of the wrong type at %s (line %d): it must be %s.", path, line, kindName(t))
		}
	}
	return fmt.Sprintf("has a value of the wrong type at line %d.", line)
}

// findWrongType walks the YAML node n, which decodes into t, and returns the path and type of the
// first node at line with tag: the one yaml.v3 refused. Only keys that are fields of clouds.Clouds
// and cloud names make up the path, so it holds no value of the file.
func findWrongType(n *yamlv3.Node, t reflect.Type, path string, line int, tag string, depth int) (string, reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// Aliases are not followed: a few anchors can stand for exponentially many nodes. yaml.v3
	// reports a wrong type behind an alias at the anchor's line, which the walk may then not
	// reach; the message gives the line alone.
	if n.Kind == yamlv3.AliasNode || depth > 32 {
		return "", nil, false
	}
	if n.Line == line && n.ShortTag() == tag {
		return path, t, true
	}
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, ok := yamlField(t, n.Content[i].Value); ok {
				if p, ft, ok := findWrongType(n.Content[i+1], f.Type, join(n.Content[i].Value), line, tag, depth+1); ok {
					return p, ft, true
				}
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			// A cloud name: quoted unless it is a plain word, so the path reads unambiguously.
			name := n.Content[i].Value
			if !plainName.MatchString(name) {
				name = strconv.Quote(name)
			}
			if p, ft, ok := findWrongType(n.Content[i+1], t.Elem(), join(name), line, tag, depth+1); ok {
				return p, ft, true
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yamlv3.SequenceNode:
		for i, item := range n.Content {
			if p, ft, ok := findWrongType(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), line, tag, depth+1); ok {
				return p, ft, true
			}
		}
	}
	return "", nil, false
}

// plainName is a cloud name that needs no quoting in a path.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)

// yamlField returns the field of struct t whose yaml tag names key.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// kindName says what a field of type t takes, in clouds.yaml words.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	default:
		return "a " + t.Kind().String()
	}
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
