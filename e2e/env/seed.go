package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// GuestNamespace is where the node plugin (and, standalone, the controller) runs.
const GuestNamespace = names.GuestNamespace

// CloudProviderConfig is the installer's cloud-provider ConfigMap in openshift-config.
const CloudProviderConfig = "cloud-provider-config"

// Seed is what HyperShift's control-plane-operator and hosted-cluster-config-operator (or, in
// standalone mode, the installer and cluster-storage-operator) would have written before the
// operator runs. It works on any pair of clusters: the local ones Start brings up, or kind
// clusters (e2e/cmd/e2e-kind).
type Seed struct {
	// Mode is ModeHyperShift or ModeStandalone.
	Mode string
	// Mgmt and Guest are admin clients; the same cluster in standalone mode.
	Mgmt, Guest client.Client
	// Namespace is the HCP namespace (or the guest namespace in standalone mode).
	Namespace string
	// HostedCluster names the HostedControlPlane.
	HostedCluster string
	// InfraID is the cluster's infrastructure ID (default DefaultInfraID).
	InfraID string
	// HighlyAvailable seeds the HCP's controllerAvailabilityPolicy (or the standalone
	// Infrastructure's controlPlaneTopology) as HighlyAvailable.
	HighlyAvailable bool
	// OpenStack is the fake OpenStack clouds.yaml and the CA point at, unless RealCloud is set.
	OpenStack *fakeopenstack.Server
	// OpenStackURL, when set, replaces the fake's own URL in clouds.yaml: the address where the
	// operator and the CSI controller reach it (inside a real node's network namespace).
	OpenStackURL string
	// RealCloud, when set, is the cloud instead of OpenStack: clouds.yaml names its member user,
	// as OpenShift's installer does.
	RealCloud *realcloud.Cloud
	// GuestKubeconfig is the guest admin kubeconfig stored in service-network-admin-kubeconfig
	// (HyperShift), as the management cluster's pods reach the guest.
	GuestKubeconfig []byte
	// ManagementAPIServerIPs are the addresses at which pods of the management cluster reach its
	// API server, once their node has translated the kubernetes Service address: HyperShift's
	// management-kas NetworkPolicy refuses them to pods without the access label. On real nodes
	// these are the nodes' own addresses (each node translates the Service to its API forwarder at
	// <node IP>:6443, see package realnode); empty means the addresses the management cluster's
	// kubernetes EndpointSlice lists, as hypershift-operator reads them (kwok nodes, kind).
	ManagementAPIServerIPs []net.IP
}

// seed creates the seed objects of the environment.
func (e *Env) seed(ctx context.Context) error {
	s := Seed{
		Mode: e.Mode, Mgmt: e.MgmtClient, Guest: e.GuestClient, Namespace: e.Namespace,
		HostedCluster: e.options.HostedCluster, InfraID: e.options.InfraID, HighlyAvailable: e.options.HighlyAvailable, OpenStack: e.OpenStack,
		RealCloud: e.RealCloud,
	}
	switch {
	case e.Real != nil:
		s.OpenStackURL, s.GuestKubeconfig = e.Real.OpenStackURL, e.Real.GuestKubeconfigInMgmt
		s.ManagementAPIServerIPs = []net.IP{e.Real.MgmtNode.IP()}
	case e.Mode == ModeHyperShift:
		kc, err := os.ReadFile(e.Guest.KubeconfigPath())
		if err != nil {
			return err
		}
		s.GuestKubeconfig = kc
	}
	return s.Create(ctx)
}

// infraID is s.InfraID, or DefaultInfraID when unset.
func (s Seed) infraID() string {
	if s.InfraID == "" {
		return DefaultInfraID
	}
	return s.InfraID
}

// cloud returns the clouds.yaml and the CA of the credentials Secret.
func (s Seed) cloud() (cloudsYAML, caPEM []byte, err error) {
	if s.RealCloud != nil {
		cloudsYAML, err = realCloudsYAML(s.RealCloud)
		return cloudsYAML, s.RealCloud.CAPEM(), err
	}
	cloudsYAML, err = s.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{CloudName: CloudName, Versionless: true, BaseURL: s.OpenStackURL})
	return cloudsYAML, s.OpenStack.CACertPEM(), err
}

// Create creates the seed objects; those that exist already are left as they are.
func (s Seed) Create(ctx context.Context) error {
	clouds, caPEM, err := s.cloud()
	if err != nil {
		return err
	}
	var objs []client.Object
	for _, ns := range []string{GuestNamespace, names.OpenShiftConfigNamespace} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// APIServer cluster exists on every OpenShift cluster, empty until an administrator sets
	// its TLS security profile (the installer creates it standalone; in the guest of a hosted
	// cluster, hosted-cluster-config-operator creates it from the HostedControlPlane's
	// spec.configuration.apiServer, which the seed leaves unset). Tests edit it as an
	// administrator does, never create it.
	objs = append(objs, clusterCSIDriver(), &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: names.APIServerName}})
	// cluster-storage-operator's NetworkPolicies exist in the guest of a hosted cluster too: the
	// cluster-version operator applies them there (they carry the hypershift include
	// annotation). They bind the node plugin not at all (it runs in the host's network).
	objs = append(objs, peerNamespaces(false)...)
	for _, np := range StorageNetworkPolicies() {
		objs = append(objs, np)
	}
	if err := createAll(ctx, s.Guest, objs); err != nil {
		return err
	}
	if err := s.createInfrastructure(ctx); err != nil {
		return err
	}

	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: names.CredentialsSecret},
		Data: map[string][]byte{
			names.KeyCloudsYAML: clouds,
			names.KeyCACert:     caPEM,
		},
	}
	if s.Mode == ModeStandalone {
		// The installer's cloud-provider config (named by Infrastructure) carries the CA;
		// Proxy cluster exists, empty, on every OpenShift cluster; cluster-storage-operator
		// ships the sidecars' ClusterRoles.
		return createAll(ctx, s.Mgmt, append(sidecarClusterRoles(),
			creds,
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: CloudProviderConfig},
				Data: map[string]string{
					"config":          "[Global]\nsecret-name = openstack-credentials\nsecret-namespace = kube-system\n",
					names.KeyCABundle: string(caPEM),
				},
			},
			&configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: names.ProxyName}},
		))
	}

	if len(s.GuestKubeconfig) == 0 {
		return errors.New("seeding a hosted cluster needs the guest kubeconfig")
	}
	kasIPs := s.ManagementAPIServerIPs
	if len(kasIPs) == 0 {
		if kasIPs, err = ManagementAPIServerIPs(ctx, s.Mgmt); err != nil {
			return err
		}
	}
	mgmt := []client.Object{
		// The HyperShift operator creates it; without it the Priority admission plugin rejects
		// every control-plane pod, the operator's and the CSI controller's.
		&schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: names.HyperShiftPriorityClass},
			Value:       100000000,
			Description: "HyperShift control-plane pods.",
		},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace, Labels: map[string]string{names.HostedControlPlaneLabel: "true"}}},
		s.hostedControlPlane(),
		creds,
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: names.HyperShiftCloudConfigMap},
			Data:       map[string]string{names.KeyCABundle: string(caPEM)},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: names.PullSecret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: names.GuestKubeconfigSecret},
			Data:       map[string][]byte{names.KeyKubeconfig: s.GuestKubeconfig},
		},
	}
	mgmt = append(mgmt, peerNamespaces(true)...)
	for _, np := range HyperShiftNetworkPolicies(s.Namespace, kasIPs) {
		mgmt = append(mgmt, np)
	}
	return createAll(ctx, s.Mgmt, mgmt)
}

func clusterCSIDriver() *operatorv1.ClusterCSIDriver {
	return &operatorv1.ClusterCSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName},
		Spec: operatorv1.ClusterCSIDriverSpec{
			OperatorSpec: operatorv1.OperatorSpec{
				ManagementState:  operatorv1.Managed,
				LogLevel:         operatorv1.Normal,
				OperatorLogLevel: operatorv1.Normal,
			},
			DriverConfig: operatorv1.CSIDriverConfigSpec{DriverType: ""},
		},
	}
}

// createInfrastructure creates Infrastructure cluster as the installer (standalone) or the
// hosted-cluster-config-operator (guest) leaves it.
func (s Seed) createInfrastructure(ctx context.Context) error {
	topology := configv1.ExternalTopologyMode
	if s.Mode == ModeStandalone {
		topology = configv1.SingleReplicaTopologyMode
		if s.HighlyAvailable {
			topology = configv1.HighlyAvailableTopologyMode
		}
	}
	infra := &configv1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: names.InfrastructureName},
		Spec: configv1.InfrastructureSpec{
			CloudConfig:  configv1.ConfigMapFileReference{Name: CloudProviderConfig, Key: "config"},
			PlatformSpec: configv1.PlatformSpec{Type: configv1.OpenStackPlatformType},
		},
	}
	// Only a new Infrastructure gets the seed's status: an existing one is left as it is, as
	// Create promises (and an update built from this unread object would have no resourceVersion).
	if err := createRetryingDiscovery(ctx, s.Guest, infra); apierrors.IsAlreadyExists(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("creating Infrastructure %s: %w", infra.Name, err)
	}
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName:     s.infraID(),
		ControlPlaneTopology:   topology,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		PlatformStatus: &configv1.PlatformStatus{
			Type:      configv1.OpenStackPlatformType,
			OpenStack: &configv1.OpenStackPlatformStatus{CloudName: CloudName},
		},
	}
	if err := s.Guest.Status().Update(ctx, infra); err != nil {
		return fmt.Errorf("setting the Infrastructure status: %w", err)
	}
	return nil
}

// hostedControlPlane returns the HostedControlPlane control-plane-operator reconciles from, with
// what a Cinder CSI operator reads of it.
func (s Seed) hostedControlPlane() *hyperv1.HostedControlPlane {
	policy := hyperv1.SingleReplica
	if s.HighlyAvailable {
		policy = hyperv1.HighlyAvailable
	}
	svc := func(t hyperv1.ServiceType) hyperv1.ServicePublishingStrategyMapping {
		return hyperv1.ServicePublishingStrategyMapping{
			Service:                   t,
			ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route},
		}
	}
	return &hyperv1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.HostedCluster},
		Spec: hyperv1.HostedControlPlaneSpec{
			ReleaseImage: "release:4.21",
			PullSecret:   corev1.LocalObjectReference{Name: names.PullSecret},
			IssuerURL:    "https://oidc.example.com",
			InfraID:      s.infraID(),
			DNS:          hyperv1.DNSSpec{BaseDomain: "example.com"},
			Etcd:         hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{Type: hyperv1.PersistentVolumeEtcdStorage}}},
			Platform: hyperv1.PlatformSpec{
				Type: hyperv1.OpenStackPlatform,
				OpenStack: &hyperv1.OpenStackPlatformSpec{
					IdentityRef: hyperv1.OpenStackIdentityReference{Name: s.HostedCluster + "-cloud-credentials", CloudName: CloudName},
				},
			},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				svc(hyperv1.APIServer), svc(hyperv1.OAuthServer), svc(hyperv1.Konnectivity), svc(hyperv1.Ignition),
			},
			ControllerAvailabilityPolicy: policy,
			NodeSelector:                 map[string]string{names.ControlPlaneNodeLabel: "true"},
			Labels:                       map[string]string{"example.com/team": "storage"},
		},
	}
}

func createAll(ctx context.Context, c client.Client, objs []client.Object) error {
	for _, o := range objs {
		if err := createRetryingDiscovery(ctx, c, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

// createRetryingDiscovery creates o, retrying while the API server's discovery does not serve its
// kind yet: a CRD can be Established a moment before discovery (and so the client's REST mapper)
// knows its resource.
func createRetryingDiscovery(ctx context.Context, c client.Client, o client.Object) error {
	for {
		err := c.Create(ctx, o)
		if !meta.IsNoMatchError(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
