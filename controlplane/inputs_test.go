package controlplane

import (
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"

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
		check      func(Gomega, *config)
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
			var reasons []string
			for _, p := range problems {
				reasons = append(reasons, p.Reason)
				g.Expect(p.Message).To(HaveSuffix("."), "a condition sentence")
			}
			g.Expect(reasons).To(Equal(tt.wantReason))
			if tt.check != nil {
				tt.check(g, cfg)
			}
		})
	}
}
