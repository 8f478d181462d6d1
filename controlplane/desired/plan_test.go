package desired

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/policylabels"
)

// testUserConfig is a cinder-csi-config with one setting, so the fixtures show it carried over.
const testUserConfig = "[BlockStorage]\nignore-volume-az = true\n"

func managedDriver() *operatorv1.ClusterCSIDriver {
	return &operatorv1.ClusterCSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName},
		Spec:       operatorv1.ClusterCSIDriverSpec{OperatorSpec: operatorv1.OperatorSpec{ManagementState: operatorv1.Managed}},
	}
}

func userConfig() *corev1.ConfigMap {
	return &corev1.ConfigMap{Data: map[string]string{names.KeyUserConfig: testUserConfig}}
}

// hyperShiftState is a hosted cluster whose HostedControlPlane sets a nodeSelector, a toleration and
// labels (one of which, app, collides with the operator's own pod label), with the CA (when ca is
// set) in the credentials Secret, as HyperShift writes it.
func hyperShiftState(ha bool, ca string) Input {
	creds := &corev1.Secret{Data: map[string][]byte{names.KeyCloudsYAML: []byte(testutil.CloudsYAML)}}
	if ca != "" {
		creds.Data[names.KeyCACert] = []byte(ca)
	}
	policy := hyperv1.SingleReplica
	if ha {
		policy = hyperv1.HighlyAvailable
	}
	return Input{
		Driver: managedDriver(),
		HCP: &hyperv1.HostedControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: "example", UID: testHCPUID},
			Spec: hyperv1.HostedControlPlaneSpec{
				InfraID:                      "example-x7k2p",
				ControllerAvailabilityPolicy: policy,
				NodeSelector:                 map[string]string{"node-pool": "control-plane"},
				Tolerations: []corev1.Toleration{
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "hcp", Effect: corev1.TaintEffectNoSchedule},
				},
				Labels: map[string]string{"team": "storage", "app": "hcp-wants-this"},
			},
		},
		Credentials: creds,
		UserConfig:  userConfig(),
	}
}

// testHCPUID is the HostedControlPlane's UID in the fixtures: what its owner references name.
const testHCPUID = "0b7e5a52-3c1d-4e8f-9a26-5d4c3b2a1f00"

// hyperShiftPlatformState is hyperShiftState with what a full management cluster adds: its
// cluster network operator's trusted CA bundle, the HostedControlPlane's additional trust bundle,
// and a controller Deployment rolled out for release 4.21.3.
func hyperShiftPlatformState() Input {
	s := hyperShiftState(false, testutil.CA)
	s.HCP.Spec.AdditionalTrustBundle = &corev1.LocalObjectReference{Name: "user-ca-bundle"}
	s.AdditionalTrustBundle = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: hcpNamespace, Name: "user-ca-bundle"},
		Data:       map[string]string{names.KeyTrustedCA: testutil.CA},
	}
	s.TrustedCA = &corev1.ConfigMap{Data: map[string]string{names.KeyTrustedCA: testutil.CA}}
	s.Deployment = rolledOutDeployment("4.21.3", "4.21.3")
	return s
}

// hyperShiftPlatformConfig is the configuration a control-plane operator gives on a management
// cluster without SecurityContextConstraints: the release version and a UID.
func hyperShiftPlatformConfig() Config {
	rc := hyperShiftConfig()
	rc.ReleaseVersion = "4.21.3"
	rc.RunAsUser = ptr.To[int64](1001)
	return rc
}

func hyperShiftConfig() Config {
	return Config{HyperShift: true, Namespace: hcpNamespace, Images: testImages()}
}

// standaloneState is a highly available standalone cluster with the monitoring stack, optionally
// behind a proxy and with an injected trusted CA bundle.
func standaloneState(proxy, trustedCA bool) Input {
	s := Input{
		Driver: managedDriver(),
		Infrastructure: &configv1.Infrastructure{
			ObjectMeta: metav1.ObjectMeta{Name: names.InfrastructureName},
			Status: configv1.InfrastructureStatus{
				InfrastructureName:   "ocp-4r7kz",
				ControlPlaneTopology: configv1.HighlyAvailableTopologyMode,
			},
		},
		Credentials: &corev1.Secret{Data: map[string][]byte{names.KeyCloudsYAML: []byte(testutil.CloudsYAML)}},
		CAConfigMap: &corev1.ConfigMap{Data: map[string]string{names.KeyCABundle: testutil.CA}},
		UserConfig:  userConfig(),
		Monitoring:  Monitoring{ServiceMonitors: true},
	}
	if proxy {
		s.Proxy = &configv1.Proxy{Status: configv1.ProxyStatus{
			HTTPProxy: "http://proxy.example:3128", HTTPSProxy: "http://proxy.example:3128", NoProxy: ".cluster.local,10.0.0.0/16",
		}}
	}
	if trustedCA {
		s.TrustedCA = &corev1.ConfigMap{Data: map[string]string{names.KeyTrustedCA: testutil.CA}}
	}
	return s
}

func standaloneConfig() Config {
	return Config{Namespace: names.GuestNamespace, Images: testImages()}
}

// configured returns s with the manager's configuration rc: the tests keep the two apart, as
// each mode pairs one configuration with several states.
func configured(rc Config, s Input) Input {
	s.Config = rc
	return s
}

func desiredPlan(t testing.TB, rc Config, s Input) *Plan {
	return testutil.Build(t, func(d *manifests.Decoder) (*Plan, error) { return Compute(d, configured(rc, s)) })
}

// TestDesired snapshots the whole plan of each mode: the fixtures are the review surface of
// everything the controlplane manager applies.
func TestDesired(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		rc       Config
		state    Input
		topology bool
		// features turns every feature of cinder-csi-config on, with listed zones.
		features bool
	}{
		{name: "When on HyperShift, SingleReplica, without topology or CA, it should match the fixture", rc: hyperShiftConfig(), state: hyperShiftState(false, "")},
		{name: "When on HyperShift, SingleReplica, with topology and a CA, it should match the fixture", rc: hyperShiftConfig(), state: hyperShiftState(false, testutil.CA), topology: true},
		{name: "When on HyperShift, HighlyAvailable, with topology and a CA, it should match the fixture", rc: hyperShiftConfig(), state: hyperShiftState(true, testutil.CA), topology: true},
		{name: "When on HyperShift, HighlyAvailable, without topology or CA, it should match the fixture", rc: hyperShiftConfig(), state: hyperShiftState(true, "")},
		{name: "When on HyperShift with a release version, a UID and both trust bundles, it should match the fixture", rc: hyperShiftPlatformConfig(), state: hyperShiftPlatformState()},
		{name: "When standalone without proxy or trusted CA, it should match the fixture", rc: standaloneConfig(), state: standaloneState(false, false)},
		{name: "When standalone behind a proxy, it should match the fixture", rc: standaloneConfig(), state: standaloneState(true, false), topology: true},
		{name: "When standalone with a trusted CA bundle, it should match the fixture", rc: standaloneConfig(), state: standaloneState(false, true)},
		{name: "When standalone behind a proxy with a trusted CA bundle, it should match the fixture", rc: standaloneConfig(), state: standaloneState(true, true), topology: true},
		// A cluster installed before 4.14: its settings are in the installer's cloud provider
		// config, enable_topology included, which wins over the detection.
		{name: "When standalone with only the installer's cloud provider config, it should match the fixture", rc: standaloneConfig(),
			state: withInstallerConfig(standaloneState(false, false), map[string]string{"config": installerINI, names.KeyEnableTopology: "false"}), topology: true},
		// The fixtures above serve Intermediate, the profile of a cluster that sets none.
		{name: "When on HyperShift with the Modern TLS profile, it should match the fixture", rc: hyperShiftConfig(), state: withProfile(hyperShiftState(false, ""), modernProfile())},
		{name: "When standalone with the Modern TLS profile, it should match the fixture", rc: standaloneConfig(), state: withProfile(standaloneState(false, false), modernProfile())},
		// Per-zone classes (nova mapped to ceph), the backup class in az2, placement hints and
		// force-create off: the node copy carries the decisions, the driver --pvc-annotations.
		{name: "When on HyperShift with every feature on, it should match the fixture", rc: hyperShiftConfig(), state: hyperShiftState(false, testutil.CA), topology: true, features: true},
		{name: "When standalone with every feature on, it should match the fixture", rc: standaloneConfig(), state: standaloneState(false, false), features: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			tt.state.Detection = Offline(tt.topology)
			if tt.features {
				tt.state = withFeatures(tt.state, tt.topology)
			}
			p := desiredPlan(t, tt.rc, tt.state)
			g.Expect(p.Problems).To(BeEmpty())
			g.Expect(p.Delete).To(BeEmpty())
			golden.CompareWithFixture(t, testutil.Objects(p.Apply)...)
		})
	}

	t.Run("When on HyperShift, it should write the node copy to the guest first, then the controller's objects next to it in apply order", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		p := desiredPlan(t, hyperShiftConfig(), hyperShiftState(false, testutil.CA))
		g.Expect(testutil.StepNames(p.Apply)).To(Equal([]string{
			"guest/ConfigMap/openshift-cluster-csi-drivers/cloud-conf",
			"management/ConfigMap/clusters-example/cloud-conf",
			"management/ConfigMap/clusters-example/openstack-cinder-csi-driver-trusted-ca-bundle",
			"management/ServiceAccount/clusters-example/openstack-cinder-csi-driver-controller-sa",
			"management/Service/clusters-example/openstack-cinder-csi-driver-controller-metrics",
			"management/PodDisruptionBudget/clusters-example/openstack-cinder-csi-driver-controller-pdb",
			"management/Deployment/clusters-example/openstack-cinder-csi-driver-controller",
		}))
		for _, s := range p.Apply {
			g.Expect(s.Group).To(Equal(GroupController))
			g.Expect(s.Object.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue), s.Object.GetName())
		}
	})

	t.Run("When on HyperShift, the HostedControlPlane should own every object next to the controller and nothing in the guest", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		p := desiredPlan(t, hyperShiftConfig(), hyperShiftState(false, testutil.CA))
		for _, s := range p.Apply {
			refs := s.Object.GetOwnerReferences()
			if s.Cluster == apply.ClusterGuest {
				g.Expect(refs).To(BeEmpty(), s.Object.GetName())
				continue
			}
			g.Expect(refs).To(ConsistOf(metav1.OwnerReference{
				APIVersion: "hypershift.openshift.io/v1beta1", Kind: "HostedControlPlane", Name: "example", UID: testHCPUID,
				Controller: ptr.To(true),
			}), s.Object.GetName())
		}
	})

	t.Run("When standalone, it should set no owner reference", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		for _, s := range desiredPlan(t, standaloneConfig(), standaloneState(true, true)).Apply {
			g.Expect(s.Object.GetOwnerReferences()).To(BeEmpty(), s.Object.GetName())
		}
	})

	t.Run("When the controller Deployment is planned in either mode, its pods should carry every NetworkPolicy label the platform requires", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		for _, p := range []*Plan{
			desiredPlan(t, hyperShiftConfig(), hyperShiftState(true, testutil.CA)),
			desiredPlan(t, hyperShiftPlatformConfig(), hyperShiftPlatformState()),
			desiredPlan(t, standaloneConfig(), standaloneState(true, true)),
		} {
			var dep *appsv1.Deployment
			for _, s := range p.Apply {
				if d, ok := s.Object.(*appsv1.Deployment); ok {
					dep = d
				}
			}
			g.Expect(dep).NotTo(BeNil())
			for k, v := range policylabels.Controller() {
				g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
			}
		}
	})

	t.Run("When standalone, it should give the node copy a name of its own and apply the ServiceMonitors last", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		p := desiredPlan(t, standaloneConfig(), standaloneState(false, true))
		g.Expect(testutil.StepNames(p.Apply)).To(Equal([]string{
			"guest/ConfigMap/openshift-cluster-csi-drivers/cloud-conf-node",
			"management/ConfigMap/openshift-cluster-csi-drivers/cloud-conf",
			"management/ConfigMap/openshift-cluster-csi-drivers/openstack-cinder-csi-driver-trusted-ca-bundle",
			"management/ServiceAccount/openshift-cluster-csi-drivers/openstack-cinder-csi-driver-controller-sa",
			"management/Service/openshift-cluster-csi-drivers/openstack-cinder-csi-driver-controller-metrics",
			"management/PodDisruptionBudget/openshift-cluster-csi-drivers/openstack-cinder-csi-driver-controller-pdb",
			"management/Deployment/openshift-cluster-csi-drivers/openstack-cinder-csi-driver-controller",
			"management/ServiceMonitor/openshift-cluster-csi-drivers/" + names.ControllerServiceMonitor,
			"management/ServiceMonitor/openshift-cluster-csi-drivers/" + names.OperatorServiceMonitor,
		}))
		g.Expect(p.Monitoring).To(Equal(Monitoring{ServiceMonitors: true}))
	})

	t.Run("When standalone without the ServiceMonitor CRD, it should not apply a ServiceMonitor", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := standaloneState(false, false)
		s.Monitoring = Monitoring{}
		p := desiredPlan(t, standaloneConfig(), s)
		g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(ContainSubstring("ServiceMonitor")))
		g.Expect(p.Monitoring).To(BeZero())
	})

	t.Run("When on HyperShift with the kinds served and writable, it should apply the ServiceMonitors and the alerts next to the controller, owned by the HostedControlPlane", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := hyperShiftState(false, "")
		s.Monitoring = Monitoring{ServiceMonitors: true, PrometheusRules: true}
		p := desiredPlan(t, hyperShiftConfig(), s)
		g.Expect(testutil.StepNames(p.Apply)).To(ContainElements(
			"management/ServiceMonitor/"+hcpNamespace+"/"+names.ControllerServiceMonitor,
			"management/ServiceMonitor/"+hcpNamespace+"/"+names.OperatorServiceMonitor,
			"management/PrometheusRule/"+hcpNamespace+"/"+names.AlertsRule))
		for _, step := range p.Apply {
			if o := step.Object; o.GetObjectKind().GroupVersionKind().Group == ServiceMonitorGVK.Group {
				g.Expect(o.GetOwnerReferences()).To(HaveLen(1), o.GetName())
			}
		}
		g.Expect(p.Monitoring).To(Equal(s.Monitoring))
	})

	t.Run("When the installer's cloud provider config sets enable_topology, it should name it as the override and record it as the source", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := withInstallerConfig(standaloneState(false, false), map[string]string{"config": installerINI, names.KeyEnableTopology: "true"})
		s.Detection = Offline(false)
		p := desiredPlan(t, standaloneConfig(), s)
		g.Expect(p.Problems).To(BeEmpty())
		g.Expect(p.Topology.Enabled).To(BeTrue())
		g.Expect(p.Topology.Source).To(Equal(SourceOverride))
		g.Expect(p.Topology.OverrideFrom).To(Equal("openshift-config/cloud-provider-config"))
		g.Expect(p.ConfigSource.Kind).To(Equal(InstallerConfigSource))
		for _, st := range p.Apply {
			cm, ok := st.Object.(*corev1.ConfigMap)
			if !ok || !strings.HasPrefix(cm.Name, names.CloudConfConfigMap) {
				continue
			}
			g.Expect(cm.Data[nodeconf.KeyCloudConf]).To(ContainSubstring("ignore-volume-az = yes"), cm.Name)
			g.Expect(cm.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("trust-device-path"), cm.Name)
			if cm.Name == names.CloudConfConfigMap {
				g.Expect(cm.Annotations).To(HaveKeyWithValue(names.ConfigSourceAnnotation, "openshift-config/cloud-provider-config, key config"))
			} else {
				g.Expect(cm.Annotations).NotTo(HaveKey(names.ConfigSourceAnnotation), "the node copy")
			}
		}
	})

	t.Run("When Unmanaged, it should plan nothing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := hyperShiftState(false, "")
		s.Driver.Spec.ManagementState = operatorv1.Unmanaged
		p := desiredPlan(t, hyperShiftConfig(), s)
		g.Expect(p.Apply).To(BeEmpty())
		g.Expect(p.Delete).To(BeEmpty())
	})

	t.Run("When the input is invalid, it should plan no apply and report every problem", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := hyperShiftState(false, "")
		s.Credentials = nil
		s.Driver.Spec.LogLevel = "Loud"
		p := desiredPlan(t, hyperShiftConfig(), s)
		g.Expect(p.Apply).To(BeEmpty())
		g.Expect(p.Delete).To(BeEmpty())
		g.Expect(p.Problems).To(HaveLen(2))
		g.Expect(p.ProblemMessages()).To(ContainElement(ContainSubstring("spec.logLevel")))
		g.Expect(p.ProblemMessages()).To(ContainElement(ContainSubstring("does not exist")))
	})
}

// modernProfile is OpenShift's Modern TLS security profile.
func modernProfile() *configv1.TLSSecurityProfile {
	return &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
}

// withProfile sets the cluster's TLS security profile where the mode keeps it: the
// HostedControlPlane's API server configuration, or the APIServer named cluster.
func withProfile(s Input, p *configv1.TLSSecurityProfile) Input {
	if s.HCP != nil {
		hcp := s.HCP.DeepCopy()
		hcp.Spec.Configuration = &hyperv1.ClusterConfiguration{APIServer: &configv1.APIServerSpec{TLSSecurityProfile: p}}
		s.HCP = hcp
		return s
	}
	s.APIServer = &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: names.APIServerName},
		Spec: configv1.APIServerSpec{TLSSecurityProfile: p}}
	return s
}

// TestDesiredTLSProfile checks what the cluster's TLS security profile changes: the arguments of
// every kube-rbac-proxy, so one new template of the controller Deployment, and nothing else.
func TestDesiredTLSProfile(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name  string
		rc    Config
		state Input
	}{
		{name: "on HyperShift", rc: hyperShiftConfig(), state: hyperShiftState(true, testutil.CA)},
		{name: "standalone", rc: standaloneConfig(), state: standaloneState(true, true)},
	} {
		t.Run("When the profile changes from Intermediate to Modern "+mode.name+", it should change the Deployment's kube-rbac-proxy arguments and no other object", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			before := desiredPlan(t, mode.rc, mode.state)
			after := desiredPlan(t, mode.rc, withProfile(mode.state, modernProfile()))
			g.Expect(testutil.StepNames(after.Apply)).To(Equal(testutil.StepNames(before.Apply)))
			for i := range before.Apply {
				b, a := before.Apply[i].Object, after.Apply[i].Object
				if _, ok := b.(*appsv1.Deployment); ok {
					continue
				}
				g.Expect(a).To(Equal(b), "%s changed with the profile", testutil.StepNames(before.Apply[i : i+1])[0])
			}
			proxies := 0
			for _, c := range planDeployment(g, after).Spec.Template.Spec.Containers {
				if !strings.Contains(c.Name, "kube-rbac-proxy") {
					g.Expect(c).To(Equal(containerNamed(planDeployment(g, before), c.Name)), "container %s changed with the profile", c.Name)
					continue
				}
				proxies++
				g.Expect(c.Args).To(ContainElements("--tls-min-version=VersionTLS13",
					"--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256"))
				g.Expect(containerNamed(planDeployment(g, before), c.Name).Args).To(ContainElement("--tls-min-version=VersionTLS12"))
			}
			g.Expect(proxies).To(Equal(len(metricsProxies)))
			g.Expect(after.TLS.Problem).To(BeEmpty())
		})
	}

	t.Run("When the cluster's profile cannot be served, it should apply Intermediate and say why, without a problem that stops the apply", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		bad := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
			TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"DHE-RSA-AES256-GCM-SHA384"}}}}
		p := desiredPlan(t, standaloneConfig(), withProfile(standaloneState(false, false), bad))
		g.Expect(p.Problems).To(BeEmpty())
		g.Expect(p.Apply).NotTo(BeEmpty())
		g.Expect(p.TLS.Problem).To(ContainSubstring("none of its ciphers"))
		intermediate := desiredPlan(t, standaloneConfig(), standaloneState(false, false))
		g.Expect(planDeployment(g, p)).To(Equal(planDeployment(g, intermediate)))
	})
}

// planDeployment returns the controller Deployment a plan applies.
func planDeployment(g Gomega, p *Plan) *appsv1.Deployment {
	for _, s := range p.Apply {
		if d, ok := s.Object.(*appsv1.Deployment); ok {
			return d
		}
	}
	g.Expect(false).To(BeTrue(), "the plan applies no Deployment")
	return nil
}

// containerNamed returns the container name of d's pod template.
func containerNamed(d *appsv1.Deployment, name string) corev1.Container {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}

// TestDesiredRemoved checks that managementState Removed deletes exactly what Managed applies, in
// both modes, whatever state the inputs are in: the removal list is not written by hand.
func TestDesiredRemoved(t *testing.T) {
	t.Parallel()
	identities := func(steps []plan.Step) []string { return testutil.StepNames(plan.Identities(steps)) }
	for _, tt := range []struct {
		name  string
		rc    Config
		state Input
	}{
		{name: "on HyperShift", rc: hyperShiftConfig(), state: hyperShiftState(true, testutil.CA)},
		{name: "on HyperShift with the monitoring kinds", rc: hyperShiftConfig(), state: func() Input {
			s := hyperShiftState(true, testutil.CA)
			s.Monitoring = Monitoring{ServiceMonitors: true, PrometheusRules: true}
			return s
		}()},
		{name: "standalone with the ServiceMonitor CRD", rc: standaloneConfig(), state: standaloneState(true, true)},
		{name: "standalone without the ServiceMonitor CRD", rc: standaloneConfig(), state: func() Input {
			s := standaloneState(false, false)
			s.Monitoring = Monitoring{}
			return s
		}()},
	} {
		t.Run("When Removed "+tt.name+", it should delete every object Managed applies, and apply nothing", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			managed := desiredPlan(t, tt.rc, tt.state)
			removed := tt.state
			removed.Driver = managedDriver()
			removed.Driver.Spec.ManagementState = operatorv1.Removed
			p := desiredPlan(t, tt.rc, removed)
			g.Expect(p.Apply).To(BeEmpty())
			g.Expect(testutil.StepNames(p.Delete)).To(ConsistOf(identities(managed.Apply)))
			for _, s := range p.Delete {
				g.Expect(s.Object.GetLabels()).To(BeEmpty(), "a deletion carries only an identity")
			}
		})
		t.Run("When Removed "+tt.name+" with the inputs gone, it should still delete every object", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			managed := desiredPlan(t, tt.rc, tt.state)
			removed := Input{Driver: managedDriver(), Monitoring: tt.state.Monitoring}
			removed.Driver.Spec.ManagementState = operatorv1.Removed
			p := desiredPlan(t, tt.rc, removed)
			g.Expect(testutil.StepNames(p.Delete)).To(ConsistOf(identities(managed.Apply)))
		})
	}
}

// TestDesiredRemovedHoldsServiceAccount checks that under managementState Removed the controller's
// ServiceAccount outlives its pods in standalone mode only, where their sidecars use its token.
func TestDesiredRemovedHoldsServiceAccount(t *testing.T) {
	t.Parallel()
	sa := "management/ServiceAccount/" + standaloneConfig().Namespace + "/" + names.ControllerServiceAccount
	for _, tt := range []struct {
		name    string
		rc      Config
		state   Input
		pods    []string
		held    []string
		waiting string
	}{
		{name: "When Removed standalone while a controller pod runs, it should keep the ServiceAccount and say for which pods",
			rc: standaloneConfig(), state: standaloneState(true, true), pods: []string{"pod-a", "pod-b"},
			held:    []string{sa},
			waiting: "ServiceAccount " + names.ControllerServiceAccount + " stays until the controller's pods (pod-a, pod-b) have ended, so that their sidecars can release their leader leases."},
		{name: "When Removed standalone with no controller pod left, it should delete the ServiceAccount",
			rc: standaloneConfig(), state: standaloneState(true, true)},
		{name: "When Removed on HyperShift while a controller pod runs, it should delete the ServiceAccount: the sidecars use the guest's kubeconfig",
			rc: hyperShiftConfig(), state: hyperShiftState(true, testutil.CA), pods: []string{"pod-a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			removed := tt.state
			removed.Driver = managedDriver()
			removed.Driver.Spec.ManagementState = operatorv1.Removed
			everything := testutil.StepNames(desiredPlan(t, tt.rc, removed).Delete)
			removed.ControllerPods = tt.pods
			p := desiredPlan(t, tt.rc, removed)
			g.Expect(testutil.StepNames(p.Held)).To(ConsistOf(tt.held))
			g.Expect(p.Waiting).To(Equal(tt.waiting))
			g.Expect(append(testutil.StepNames(p.Delete), testutil.StepNames(p.Held)...)).To(ConsistOf(everything), "nothing is lost")
		})
	}
}

func TestChooseTopology(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	for _, tt := range []struct {
		name       string
		override   *bool
		det        Detection
		lastKnown  *bool
		want       bool
		wantSource string
	}{
		{name: "When the user overrides, it should use the override over a detection", override: &no, det: Detection{Enabled: &yes}, want: false, wantSource: SourceOverride},
		{name: "When the listing succeeded, it should use it over the last known", det: Detection{Enabled: &yes}, lastKnown: &no, want: true, wantSource: SourceDetected},
		{name: "When the listing failed, it should keep the decision in the live cloud-conf", det: Detection{Enabled: &yes, Failure: openstack.ReasonUnreachable}, lastKnown: &no, want: false, wantSource: SourceLastKnown},
		{name: "When the listing failed without a live decision, it should keep this process's last success", det: Detection{Enabled: &yes, Failure: openstack.ReasonUnreachable}, want: true, wantSource: SourceLastKnown},
		{name: "When nothing is known, it should fall back to false", det: Detection{Failure: openstack.ReasonUnreachable}, want: false, wantSource: SourceDefault},
		{name: "When no listing was made and a live decision exists, it should keep it", lastKnown: &yes, want: true, wantSource: SourceLastKnown},
		{name: "When the user overrides and the listing for the per-zone classes failed, it should keep the override and carry the failure",
			override: &yes, det: Detection{Enabled: &no, Failure: openstack.ReasonUnreachable}, want: true, wantSource: SourceOverride},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			d := chooseTopology(tt.override, tt.det, tt.lastKnown)
			g.Expect(d.Enabled).To(Equal(tt.want))
			g.Expect(d.Source).To(Equal(tt.wantSource))
			g.Expect(d.Failure).To(Equal(tt.det.Failure))
		})
	}
}

// TestDesiredDetection checks when the plan needs a zone listing, with what, and that it uses the
// answer.
func TestDesiredDetection(t *testing.T) {
	t.Parallel()
	withOverride := hyperShiftState(false, testutil.CA)
	withOverride.UserConfig.Data[names.KeyEnableTopology] = "true"
	invalid := hyperShiftState(false, "")
	invalid.Credentials = nil
	removed := hyperShiftState(false, "")
	removed.Driver.Spec.ManagementState = operatorv1.Removed
	unmanaged := hyperShiftState(false, "")
	unmanaged.Driver.Spec.ManagementState = operatorv1.Unmanaged

	for _, tt := range []struct {
		name  string
		state Input
	}{
		{name: "When the user decides topology in cinder-csi-config, it should not list zones", state: withOverride},
		{name: "When the input is invalid, it should not list zones", state: invalid},
		{name: "When Removed, it should not list zones", state: removed},
		{name: "When Unmanaged, it should not list zones", state: unmanaged},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			_, ok := Resolve(configured(hyperShiftConfig(), tt.state)).Listing()
			g.Expect(ok).To(BeFalse())
		})
	}

	t.Run("When the installer's cloud provider config decides topology, it should not list zones", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := withInstallerConfig(standaloneState(false, false), map[string]string{names.KeyEnableTopology: "false"})
		_, ok := Resolve(configured(standaloneConfig(), s)).Listing()
		g.Expect(ok).To(BeFalse())
	})

	t.Run("When Managed with valid input, it should list zones with the credentials, cloud and CA, and decide from the answer", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := hyperShiftState(false, testutil.CA)
		in, ok := Resolve(configured(hyperShiftConfig(), s)).Listing()
		g.Expect(ok).To(BeTrue())
		g.Expect(string(in.CloudsYAML)).To(Equal(testutil.CloudsYAML))
		g.Expect(in.CloudName).To(Equal(defaultCloudName))
		g.Expect(string(in.CAPEM)).To(Equal(testutil.CA))
		enabled := true
		s.Detection = Detection{Enabled: &enabled}
		p, err := Compute(testutil.Decoder(t), configured(hyperShiftConfig(), s))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Topology.Enabled).To(BeTrue())
		g.Expect(p.Topology.Source).To(Equal(SourceDetected))
	})
}

func TestDesiredMutatesNothing(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		rc    Config
		state func() Input
	}{
		{"When on HyperShift with every feature on and both trust bundles, it should leave its state and resolution as they were",
			hyperShiftPlatformConfig(), func() Input { return withFeatures(hyperShiftPlatformState(), true) }},
		{"When standalone with every feature on behind a proxy, it should leave its state and resolution as they were",
			standaloneConfig(), func() Input { return withFeatures(standaloneState(true, true), false) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			in := configured(tt.rc, tt.state())
			res := Resolve(in)
			testutil.Build(t, func(d *manifests.Decoder) (*Plan, error) { return res.Plan(d, in.Detection) })
			// Fresh copies of both, made the same way, are what planning must leave.
			g.Expect(in).To(Equal(configured(tt.rc, tt.state())))
			g.Expect(res).To(Equal(Resolve(configured(tt.rc, tt.state()))))
		})
	}
}
