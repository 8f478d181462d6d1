package desired

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

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
		in         func(*Input)
		wantReason []string
		// wantMessage, when set, are the problems' messages.
		wantMessage []string
		check       func(Gomega, *settings)
	}{
		{name: "When a hosted cluster's inputs are complete, it should resolve the HCP's settings", rc: hyperShiftConfig(),
			check: func(g Gomega, c *settings) {
				g.Expect(c.ClusterID).To(Equal("example-x7k2p"))
				g.Expect(c.NodeSelector).To(HaveKeyWithValue("node-pool", "control-plane"))
				g.Expect(c.Verbosity).To(Equal(2))
				g.Expect(c.CloudName).To(Equal(defaultCloudName))
				g.Expect(c.ControllerConf).To(ContainSubstring("ignore-volume-az"))
			}},
		{name: "When the HostedControlPlane is missing, it should say which namespace", rc: hyperShiftConfig(),
			in: func(in *Input) { in.HCP = nil }, wantReason: []string{names.ReasonMissingHostedControlPlane}},
		{name: "When the HyperShift cloud is missing, it should point at the identityRef", rc: hyperShiftConfig(),
			in: func(in *Input) {
				in.HCP.Spec.Platform.OpenStack = &hyperv1.OpenStackPlatformSpec{IdentityRef: hyperv1.OpenStackIdentityReference{CloudName: "shiftstack"}}
			},
			wantReason: []string{names.ReasonInvalidCredentials},
			wantMessage: []string{`clouds.yaml in Secret clusters-example/openstack-cloud-credentials has no cloud named "shiftstack" ` +
				`(the HostedControlPlane's identityRef cloudName).`}},
		{name: "When the standalone cloud is missing, it should point at the Infrastructure", rc: standaloneConfig(),
			in: func(in *Input) {
				in.Infrastructure.Status.PlatformStatus = &configv1.PlatformStatus{OpenStack: &configv1.OpenStackPlatformStatus{CloudName: "shiftstack"}}
			},
			wantReason: []string{names.ReasonInvalidCredentials},
			wantMessage: []string{`clouds.yaml in Secret openshift-cluster-csi-drivers/openstack-cloud-credentials has no cloud named "shiftstack" ` +
				`(the Infrastructure cluster status.platformStatus.openstack.cloudName, "openstack" when unset).`}},
		{name: "When the Secret has no clouds.yaml key, it should say so", rc: hyperShiftConfig(),
			in: func(in *Input) { in.Credentials = creds(map[string]string{"other": "x"}) }, wantReason: []string{names.ReasonMissingCredentials}},
		{name: "When clouds.yaml is invalid and the log level unknown, it should report both", rc: hyperShiftConfig(),
			driver:     operatorv1.ClusterCSIDriverSpec{OperatorSpec: operatorv1.OperatorSpec{LogLevel: "Loud"}},
			in:         func(in *Input) { in.Credentials = creds(map[string]string{names.KeyCloudsYAML: "clouds: ["}) },
			wantReason: []string{names.ReasonUnknownLogLevel, names.ReasonInvalidCredentials}},
		{name: "When cinder-csi-config has an invalid enable_topology, it should name the ConfigMap", rc: hyperShiftConfig(),
			in: func(in *Input) {
				in.UserConfig = &corev1.ConfigMap{Data: map[string]string{names.KeyEnableTopology: "perhaps"}}
			}, wantReason: []string{names.ReasonInvalidConfig}},
		{name: "When the Secret carries a CA, it should win over the ConfigMap's", rc: hyperShiftConfig(),
			in: func(in *Input) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: testutil.CloudsYAML, names.KeyCACert: testutil.CA})
				in.CAConfigMap = &corev1.ConfigMap{Data: map[string]string{names.KeyCABundle: "other"}}
			},
			check: func(g Gomega, c *settings) { g.Expect(c.CABundle).To(Equal(testutil.CA)) }},
		{name: "When the Secret's cacert holds no certificate, it should name the Secret and key and not the value", rc: hyperShiftConfig(),
			in: func(in *Input) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: testutil.CloudsYAML, names.KeyCACert: "s3cret"})
			},
			wantReason: []string{names.ReasonInvalidConfig},
			wantMessage: []string{"cacert in Secret clusters-example/openstack-cloud-credentials has text outside a PEM certificate at line 1. " +
				"It must hold only the OpenStack CA certificates, PEM-encoded."}},
		{name: "When the Secret's cacert is good, a bad ConfigMap CA should not matter", rc: hyperShiftConfig(),
			in: func(in *Input) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: testutil.CloudsYAML, names.KeyCACert: testutil.CA})
				in.CAConfigMap = &corev1.ConfigMap{Data: map[string]string{names.KeyCABundle: "s3cret"}}
			},
			check: func(g Gomega, c *settings) { g.Expect(c.CABundle).To(Equal(testutil.CA)) }},
		{name: "When standalone with a cloud-provider config CA that is no certificate, it should name the ConfigMap", rc: standaloneConfig(),
			in: func(in *Input) {
				in.CAConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: "cloud-provider-config"},
					Data: map[string]string{names.KeyCABundle: "-----BEGIN CERTIFICATE-----\nczNjcmV0\n-----END CERTIFICATE-----\n"}}
			},
			wantReason: []string{names.ReasonInvalidConfig},
			wantMessage: []string{"ca-bundle.pem in ConfigMap openshift-config/cloud-provider-config has a CERTIFICATE at line 1 that is not a valid X.509 certificate. " +
				"It must hold only the OpenStack CA certificates, PEM-encoded."}},
		{name: "When clouds.yaml has a wrong type, it should name the Secret, key and field", rc: standaloneConfig(),
			in: func(in *Input) {
				in.Credentials = creds(map[string]string{names.KeyCloudsYAML: "clouds:\n  openstack:\n    verify: s3cret\n"})
			},
			wantReason: []string{names.ReasonInvalidCredentials},
			wantMessage: []string{"clouds.yaml in Secret openshift-cluster-csi-drivers/openstack-cloud-credentials has a value of the wrong type " +
				"at clouds.openstack.verify (line 3): it must be true or false."}},
		{name: "When the live cloud-conf holds a decision, it should keep it as the last known one", rc: hyperShiftConfig(),
			in: func(in *Input) {
				in.CloudConf = &corev1.ConfigMap{Data: map[string]string{nodeconf.KeyEnableTopology: "true"}}
			},
			check: func(g Gomega, c *settings) { g.Expect(c.LastTopology).To(HaveValue(BeTrue())) }},
		{name: "When standalone without an infrastructure name yet, it should wait for it", rc: standaloneConfig(),
			in: func(in *Input) { in.Infrastructure.Status.InfrastructureName = "" }, wantReason: []string{names.ReasonWaitingForConfig}},
		{name: "When standalone with an External control plane, it should not pin the controller to masters", rc: standaloneConfig(),
			in: func(in *Input) { in.Infrastructure.Status.ControlPlaneTopology = configv1.ExternalTopologyMode },
			check: func(g Gomega, c *settings) {
				g.Expect(c.NodeSelector).To(BeEmpty())
				g.Expect(c.HA).To(BeFalse())
			}},
		{name: "When standalone with an empty injected CA bundle, it should not count it as an input", rc: standaloneConfig(),
			in:    func(in *Input) { in.TrustedCA = &corev1.ConfigMap{} },
			check: func(g Gomega, c *settings) { g.Expect(c.TrustedCA).To(BeNil()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := hyperShiftState(false, "")
			if !tt.rc.HyperShift {
				s = standaloneState(false, false)
			}
			if tt.in != nil {
				tt.in(&s)
			}
			in := configured(tt.rc, s)
			cfg, problems := resolve(&operatorv1.ClusterCSIDriver{Spec: tt.driver}, &in)
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

// installerINI is the installer's cloud provider config of a cluster installed before 4.14, with a
// password in [Global] (and a line that is no "key = value") that must never surface anywhere.
const installerINI = "[Global]\nsecret-name = openstack-credentials\npassword = s3cret\ns3cret-line\n" +
	"[LoadBalancer]\nuse-octavia = true\n" +
	"[Metadata]\nsearch-order = configDrive\n" +
	"[BlockStorage]\nignore-volume-az = yes\ntrust-device-path = true\n"

// withInstallerConfig returns a standalone state without cinder-csi-config whose installer's cloud
// provider config, named by Infrastructure, holds data (and the CA).
func withInstallerConfig(s Input, data map[string]string) Input {
	s.UserConfig = nil
	s.Infrastructure.Spec.CloudConfig = configv1.ConfigMapFileReference{Name: "cloud-provider-config", Key: "config"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: "cloud-provider-config"},
		Data: map[string]string{names.KeyCABundle: testutil.CA}}
	for k, v := range data {
		cm.Data[k] = v
	}
	s.CAConfigMap = cm
	return s
}

// TestResolveConfigSource holds the driver settings to csi-operator's sources: cinder-csi-config,
// else (standalone only) [BlockStorage] and enable_topology of the installer's cloud provider config.
func TestResolveConfigSource(t *testing.T) {
	t.Parallel()
	installer := func(data map[string]string) Input { return withInstallerConfig(standaloneState(false, false), data) }
	for _, tt := range []struct {
		name  string
		rc    Config
		state Input
		// wantKind is the source; wantConf the [BlockStorage] of both copies ("" for none).
		wantKind     ConfigSourceKind
		wantConf     string
		wantOverride *bool
		// wantProblem, when set, is the one problem's message.
		wantProblem string
	}{
		{name: "When standalone without cinder-csi-config, it should take [BlockStorage] of the installer's cloud provider config without trust-device-path",
			rc: standaloneConfig(), state: installer(map[string]string{"config": installerINI}),
			wantKind: InstallerConfigSource, wantConf: "[BlockStorage]\nignore-volume-az = yes\n"},
		{name: "When both ConfigMaps exist, it should take cinder-csi-config alone, enable_topology included",
			rc: standaloneConfig(), state: func() Input {
				s := installer(map[string]string{"config": installerINI, names.KeyEnableTopology: "false"})
				s.UserConfig = userConfig()
				return s
			}(),
			wantKind: UserConfigSource, wantConf: "[BlockStorage]\nignore-volume-az = true\n"},
		{name: "When [BlockStorage] of the installer's file holds only trust-device-path, it should drop the emptied section",
			rc: standaloneConfig(), state: installer(map[string]string{"config": "[Global]\npassword = s3cret\n[BlockStorage]\ntrust-device-path = true\n"}),
			wantKind: InstallerConfigSource},
		{name: "When the installer's ConfigMap sets enable_topology, it should override topology",
			rc: standaloneConfig(), state: installer(map[string]string{"config": installerINI, names.KeyEnableTopology: "false"}),
			wantKind: InstallerConfigSource, wantConf: "[BlockStorage]\nignore-volume-az = yes\n", wantOverride: ptr.To(false)},
		{name: "When the installer's ConfigMap has no key the Infrastructure names, it should take its enable_topology only and not degrade",
			rc: standaloneConfig(), state: installer(map[string]string{"other": installerINI, names.KeyEnableTopology: "true"}),
			wantKind: InstallerConfigSource, wantOverride: ptr.To(true)},
		{name: "When the Infrastructure names another key, it should read that key",
			rc: standaloneConfig(), state: func() Input {
				s := installer(map[string]string{"cloud.conf": installerINI})
				s.Infrastructure.Spec.CloudConfig.Key = "cloud.conf"
				return s
			}(),
			wantKind: InstallerConfigSource, wantConf: "[BlockStorage]\nignore-volume-az = yes\n"},
		{name: "When standalone without either ConfigMap, it should use no settings",
			rc: standaloneConfig(), state: func() Input {
				s := installer(nil)
				s.CAConfigMap = nil
				return s
			}(),
			wantKind: NoConfigSource},
		{name: "When [BlockStorage] of the installer's file holds a value the driver refuses, it should name the ConfigMap and line and say how to override it",
			rc: standaloneConfig(), state: installer(map[string]string{"config": installerINI + "rescan-on-resize = s3cret\n"}),
			wantProblem: "ConfigMap openshift-config/cloud-provider-config: line 12: [BlockStorage] rescan-on-resize must be a boolean: " +
				"true, false, yes, no, on, off, 1 or 0. It is the installer's cloud provider config, read because ConfigMap " +
				"openshift-config/cinder-csi-config does not exist: fix it, or create cinder-csi-config, which takes precedence."},
		{name: "When the installer's ConfigMap has an invalid enable_topology, it should name the ConfigMap and key",
			rc: standaloneConfig(), state: installer(map[string]string{"config": installerINI, names.KeyEnableTopology: "s3cret"}),
			wantProblem: `ConfigMap openshift-config/cloud-provider-config: enable_topology: must be "true" or "false", or be left empty ` +
				"to detect topology support. It is the installer's cloud provider config, read because ConfigMap " +
				"openshift-config/cinder-csi-config does not exist: fix it, or create cinder-csi-config, which takes precedence."},
		{name: "When cinder-csi-config is invalid, it should name it without the installer's hint",
			rc: standaloneConfig(), state: func() Input {
				s := installer(map[string]string{"config": installerINI})
				s.UserConfig = &corev1.ConfigMap{Data: map[string]string{names.KeyUserConfig: "[BlockStorage]\nignore-volume-az = s3cret\n"}}
				return s
			}(),
			wantProblem: "ConfigMap openshift-config/cinder-csi-config: line 2: [BlockStorage] ignore-volume-az must be a boolean: " +
				"true, false, yes, no, on, off, 1 or 0."},
		{name: "When on HyperShift, it should not read HyperShift's cloud ConfigMap for settings: csi-operator has no fallback there",
			rc: hyperShiftConfig(), state: func() Input {
				s := hyperShiftState(false, "")
				s.UserConfig = nil
				s.CAConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: names.HyperShiftCloudConfigMap},
					Data: map[string]string{"config": installerINI, names.KeyEnableTopology: "true"}}
				return s
			}(),
			wantKind: NoConfigSource},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			in := configured(tt.rc, tt.state)
			cfg, problems := resolve(managedDriver(), &in)
			if tt.wantProblem != "" {
				g.Expect(problems).To(HaveLen(1))
				g.Expect(problems[0].Reason).To(Equal(names.ReasonInvalidConfig))
				g.Expect(problems[0].Message).To(Equal(tt.wantProblem))
				g.Expect(problems[0].Message).NotTo(ContainSubstring("s3cret"))
				return
			}
			g.Expect(problems).To(BeEmpty())
			g.Expect(cfg.Source.Kind).To(Equal(tt.wantKind))
			g.Expect(cfg.Override).To(Equal(tt.wantOverride))
			_, blockStorage, _ := strings.Cut(cfg.ControllerConf, "\n\n")
			g.Expect(blockStorage).To(Equal(tt.wantConf), "controller copy")
			g.Expect(cfg.NodeConf).To(Equal(tt.wantConf), "node copy: [BlockStorage] alone, no [Metadata] from the installer's file")
			// Nothing of [Global] leaves the file: not into cloud.conf, not into what the
			// condition or the Event say.
			for _, text := range []string{cfg.ControllerConf, cfg.NodeConf, cfg.Source.Describe(), cfg.Source.Record()} {
				g.Expect(text).NotTo(ContainSubstring("s3cret"))
				g.Expect(text).NotTo(ContainSubstring("secret-name"))
			}
		})
	}
}
