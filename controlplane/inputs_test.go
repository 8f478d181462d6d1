package controlplane

import (
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func TestCheckCloudsYAML(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		data       string
		cloud      string
		hyperShift bool
		want       string
	}{
		{name: "When the cloud has an auth URL, it should accept it", data: testCloudsYAML, cloud: "openstack"},
		{name: "When the file is not YAML, it should say so without quoting it", data: "clouds: [password: s3cret", cloud: "openstack",
			want: "is not valid YAML of the clouds.yaml format."},
		{name: "When the HyperShift cloud is missing, it should point at the identityRef", data: testCloudsYAML, cloud: "shiftstack", hyperShift: true,
			want: `has no cloud named "shiftstack" (the HostedControlPlane's identityRef cloudName).`},
		{name: "When the standalone cloud is missing, it should point at the Infrastructure", data: testCloudsYAML, cloud: "shiftstack",
			want: `has no cloud named "shiftstack" (the Infrastructure cluster status.platformStatus.openstack.cloudName, "openstack" when unset).`},
		{name: "When the cloud has no auth URL, it should name the key", data: "clouds: {openstack: {auth: {password: s3cret}}}", cloud: "openstack",
			want: `has no auth.auth_url for cloud "openstack".`},
		{name: "When the cloud has no auth section, it should name the key", data: "clouds: {openstack: {region_name: RegionOne}}", cloud: "openstack",
			want: `has no auth.auth_url for cloud "openstack".`},
		{name: "When a password was pasted into verify, it should name the field and line without quoting it",
			data: "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n    verify: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.verify (line 5): it must be true or false."},
		{name: "When a mapping stands where a string belongs, it should name the field",
			data: "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n      password:\n        value: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.auth.password (line 6): it must be a string."},
		{name: "When auth is a string, it should say it must be a mapping",
			data: "clouds:\n  openstack:\n    auth: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.auth (line 3): it must be a mapping."},
		{name: "When another cloud entry has a wrong type, it should refuse the file as the driver does",
			data: "clouds:\n  openstack: {auth: {auth_url: https://keystone.example:5000}}\n  \"other cloud\": {verify: s3cret}\n", cloud: "openstack",
			want: `has a value of the wrong type at clouds."other cloud".verify (line 3): it must be true or false.`},
		{name: "When a region entry has a wrong type, it should index the list",
			data: "clouds:\n  openstack:\n    auth: {auth_url: https://keystone.example:5000}\n    regions:\n    - name: RegionOne\n    - values: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.regions[1].values (line 6): it must be a mapping."},
		{name: "When clouds is a list, it should say it must be a mapping",
			data: "clouds: [s3cret]\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds (line 1): it must be a mapping."},
		{name: "When the document is a list, it should point at the top level",
			data: "- s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at the top level (line 1): it must be a mapping."},
		{name: "When a key is given twice, it should give the line without the key",
			data: "clouds:\n  openstack:\n    auth:\n      password: a\n      password: s3cret\n", cloud: "openstack",
			want: "does not decode as clouds.yaml at line 5 (a key given twice?)."},
		{name: "When a number stands where a string belongs, it should accept it as the driver does",
			data: "clouds: {openstack: {auth: {auth_url: https://keystone.example:5000, password: 12345}}}", cloud: "openstack"},
		{name: "When verify is a YAML 1.1 boolean, it should accept it as the driver does",
			data: "clouds: {openstack: {verify: no, auth: {auth_url: https://keystone.example:5000}}}", cloud: "openstack"},
		{name: "When regions are plain names, it should accept them as the driver does",
			data: "clouds: {openstack: {regions: [RegionOne], auth: {auth_url: https://keystone.example:5000}}}", cloud: "openstack"},
		{name: "When the file has keys the driver does not know, it should ignore them as the driver does",
			data: "clouds: {openstack: {block_storage_api_version: {x: 3}, auth: {auth_url: https://keystone.example:5000}}}", cloud: "openstack"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := checkCloudsYAML([]byte(tt.data), tt.cloud, tt.hyperShift)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got).NotTo(ContainSubstring("s3cret"))
		})
	}
}

func TestCheckCA(t *testing.T) {
	t.Parallel()
	// key is a PEM block of another type that must not pass for a certificate, nor be quoted.
	key := "-----BEGIN PRIVATE KEY-----\nczNjcmV0\n-----END PRIVATE KEY-----\n"
	badCert := "-----BEGIN CERTIFICATE-----\nczNjcmV0\n-----END CERTIFICATE-----\n"
	for _, tt := range []struct {
		name string
		data string
		want string
	}{
		{name: "When the key holds one certificate, it should accept it", data: testCA},
		{name: "When the key holds a bundle with comments and blank lines, it should accept it",
			data: "# example OpenStack CA\n" + testCA + "\n\n# the same, again\r\n" + testCA},
		{name: "When the certificate is indented, it should refuse it as Go's PEM decoder does", data: "  " + testCA,
			want: "has text outside a PEM certificate at line 1."},
		{name: "When the key holds no PEM at all, it should say so", data: "s3cret",
			want: "has text outside a PEM certificate at line 1."},
		{name: "When the key holds only comments, it should say it holds no certificate", data: "# s3cret\n",
			want: "holds no PEM certificate."},
		{name: "When text follows the certificate, it should name the line", data: testCA + "s3cret\n",
			want: "has text outside a PEM certificate at line 11."},
		{name: "When a private key is in the bundle, it should refuse it", data: testCA + key,
			want: "has a PEM block at line 11 that is not a CERTIFICATE."},
		{name: "When a CERTIFICATE block is not X.509, it should refuse it", data: badCert,
			want: "has a CERTIFICATE at line 1 that is not a valid X.509 certificate."},
		{name: "When a block is not closed, it should refuse it", data: "-----BEGIN CERTIFICATE-----\nczNjcmV0\n",
			want: "has a PEM block at line 1 that does not decode."},
		{name: "When a malformed block comes before a good one, it should not skip to the good one",
			data: "-----BEGIN CERTIFICATE-----\n!!s3cret!!\n-----END CERTIFICATE-----\n" + testCA,
			want: "has a PEM block at line 1 that does not decode."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := checkCA([]byte(tt.data))
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got).NotTo(ContainSubstring("s3cret"))
			g.Expect(got).NotTo(ContainSubstring("czNjcmV0"))
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	creds := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	for _, tt := range []struct {
		name       string
		rc         Config
		driver     operatorv1.ClusterCSIDriverSpec
		in         func(*Inputs)
		wantReason []string
		// wantMessage, when set, are the problems' messages.
		wantMessage []string
		check       func(Gomega, *config)
	}{
		{name: "When a hosted cluster's inputs are complete, it should resolve the HCP's settings", rc: hyperShiftConfig(),
			check: func(g Gomega, c *config) {
				g.Expect(c.ClusterID).To(Equal("example-x7k2p"))
				g.Expect(c.NodeSelector).To(HaveKeyWithValue("node-pool", "control-plane"))
				g.Expect(c.Verbosity).To(Equal(2))
				g.Expect(c.CloudName).To(Equal(defaultCloudName))
				g.Expect(c.ControllerConf).To(ContainSubstring("ignore-volume-az"))
			}},
		{name: "When the HostedControlPlane is missing, it should say which namespace", rc: hyperShiftConfig(),
			in: func(in *Inputs) { in.HCP = nil }, wantReason: []string{names.ReasonMissingHostedControlPlane}},
		{name: "When the Secret has no clouds.yaml key, it should say so", rc: hyperShiftConfig(),
			in: func(in *Inputs) { in.Credentials = creds(map[string]string{"other": "x"}) }, wantReason: []string{names.ReasonMissingCredentials}},
		{name: "When clouds.yaml is invalid and the log level unknown, it should report both", rc: hyperShiftConfig(),
			driver:     operatorv1.ClusterCSIDriverSpec{OperatorSpec: operatorv1.OperatorSpec{LogLevel: "Loud"}},
			in:         func(in *Inputs) { in.Credentials = creds(map[string]string{names.KeyCloudsYAML: "clouds: ["}) },
			wantReason: []string{names.ReasonUnknownLogLevel, names.ReasonInvalidCredentials}},
		{name: "When cinder-csi-config has an invalid enable_topology, it should name the ConfigMap", rc: hyperShiftConfig(),
			in: func(in *Inputs) {
				in.UserConfig = &corev1.ConfigMap{Data: map[string]string{names.KeyEnableTopology: "perhaps"}}
			}, wantReason: []string{names.ReasonInvalidConfig}},
		{name: "When the Secret carries a CA, it should win over the ConfigMap's", rc: hyperShiftConfig(),
			in: func(in *Inputs) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: testCloudsYAML, names.KeyCACert: testCA})
				in.CAConfigMap = &corev1.ConfigMap{Data: map[string]string{names.KeyCABundle: "other"}}
			},
			check: func(g Gomega, c *config) { g.Expect(c.CABundle).To(Equal(testCA)) }},
		{name: "When the Secret's cacert holds no certificate, it should name the Secret and key and not the value", rc: hyperShiftConfig(),
			in: func(in *Inputs) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: testCloudsYAML, names.KeyCACert: "s3cret"})
			},
			wantReason: []string{names.ReasonInvalidConfig},
			wantMessage: []string{"cacert in Secret clusters-example/openstack-cloud-credentials has text outside a PEM certificate at line 1. " +
				"It must hold only the OpenStack CA certificates, PEM-encoded."}},
		{name: "When the Secret's cacert is good, a bad ConfigMap CA should not matter", rc: hyperShiftConfig(),
			in: func(in *Inputs) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: testCloudsYAML, names.KeyCACert: testCA})
				in.CAConfigMap = &corev1.ConfigMap{Data: map[string]string{names.KeyCABundle: "s3cret"}}
			},
			check: func(g Gomega, c *config) { g.Expect(c.CABundle).To(Equal(testCA)) }},
		{name: "When standalone with a cloud-provider config CA that is no certificate, it should name the ConfigMap", rc: standaloneConfig(),
			in: func(in *Inputs) {
				in.CAConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: "cloud-provider-config"},
					Data: map[string]string{names.KeyCABundle: "-----BEGIN CERTIFICATE-----\nczNjcmV0\n-----END CERTIFICATE-----\n"}}
			},
			wantReason: []string{names.ReasonInvalidConfig},
			wantMessage: []string{"ca-bundle.pem in ConfigMap openshift-config/cloud-provider-config has a CERTIFICATE at line 1 that is not a valid X.509 certificate. " +
				"It must hold only the OpenStack CA certificates, PEM-encoded."}},
		{name: "When clouds.yaml has a wrong type, it should name the Secret, key and field", rc: standaloneConfig(),
			in: func(in *Inputs) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: "clouds:\n  openstack:\n    verify: s3cret\n"})
			},
			wantReason: []string{names.ReasonInvalidCredentials},
			wantMessage: []string{"clouds.yaml in Secret openshift-cluster-csi-drivers/openstack-cloud-credentials has a value of the wrong type " +
				"at clouds.openstack.verify (line 3): it must be true or false."}},
		{name: "When the live cloud-conf holds a decision, it should keep it as the last known one", rc: hyperShiftConfig(),
			in: func(in *Inputs) {
				in.CloudConf = &corev1.ConfigMap{Data: map[string]string{names.KeyEnableTopology: "true"}}
			},
			check: func(g Gomega, c *config) { g.Expect(c.LastTopology).To(HaveValue(BeTrue())) }},
		{name: "When standalone without an infrastructure name yet, it should wait for it", rc: standaloneConfig(),
			in: func(in *Inputs) { in.Infrastructure.Status.InfrastructureName = "" }, wantReason: []string{names.ReasonWaitingForConfig}},
		{name: "When standalone with an External control plane, it should not pin the controller to masters", rc: standaloneConfig(),
			in: func(in *Inputs) { in.Infrastructure.Status.ControlPlaneTopology = configv1.ExternalTopologyMode },
			check: func(g Gomega, c *config) {
				g.Expect(c.NodeSelector).To(BeEmpty())
				g.Expect(c.HA).To(BeFalse())
			}},
		{name: "When standalone with an empty injected CA bundle, it should not count it as an input", rc: standaloneConfig(),
			in:    func(in *Inputs) { in.TrustedCA = &corev1.ConfigMap{} },
			check: func(g Gomega, c *config) { g.Expect(c.TrustedCA).To(BeNil()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := hyperShiftState(false, "")
			if !tt.rc.HyperShift {
				s = standaloneState(false, false)
			}
			if tt.in != nil {
				tt.in(&s.Inputs)
			}
			cfg, problems := resolve(tt.rc, &operatorv1.ClusterCSIDriver{Spec: tt.driver}, &s.Inputs)
			var reasons, messages []string
			for _, p := range problems {
				reasons = append(reasons, p.Reason)
				messages = append(messages, p.Message)
				g.Expect(p.Message).To(HaveSuffix("."), "a condition sentence")
				g.Expect(p.Message).NotTo(ContainSubstring("s3cret"))
				g.Expect(p.Message).NotTo(ContainSubstring("czNjcmV0"))
			}
			g.Expect(reasons).To(Equal(tt.wantReason))
			if tt.wantMessage != nil {
				g.Expect(messages).To(Equal(tt.wantMessage))
			}
			if tt.check != nil {
				tt.check(g, cfg)
			}
		})
	}
}
