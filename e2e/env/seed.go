package env

import (
	"context"
	"fmt"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// GuestNamespace is where the node plugin (and, standalone, the controller) runs.
const GuestNamespace = names.GuestNamespace

// CloudProviderConfig is the installer's cloud-provider ConfigMap in openshift-config.
const CloudProviderConfig = "cloud-provider-config"

// seed creates what HyperShift (or a standalone installation) provides before the operator runs.
func (e *Env) seed(ctx context.Context) error {
	clouds, err := e.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{CloudName: CloudName, Versionless: true})
	if err != nil {
		return err
	}
	var objs []client.Object
	for _, ns := range []string{GuestNamespace, names.OpenShiftConfigNamespace} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	objs = append(objs, e.clusterCSIDriver())
	if err := createAll(ctx, e.GuestClient, objs); err != nil {
		return err
	}
	if err := e.seedInfrastructure(ctx); err != nil {
		return err
	}

	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CredentialsSecret},
		Data: map[string][]byte{
			names.KeyCloudsYAML: clouds,
			names.KeyCACert:     e.OpenStack.CACertPEM(),
		},
	}
	if e.Mode == ModeStandalone {
		// The installer's cloud-provider config (named by Infrastructure) carries the CA;
		// Proxy cluster exists, empty, on every OpenShift cluster.
		return createAll(ctx, e.MgmtClient, []client.Object{
			creds,
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: CloudProviderConfig},
				Data: map[string]string{
					"config":          "[Global]\nsecret-name = openstack-credentials\nsecret-namespace = kube-system\n",
					names.KeyCABundle: string(e.OpenStack.CACertPEM()),
				},
			},
			&configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: names.ProxyName}},
		})
	}

	guestKubeconfig, err := os.ReadFile(e.Guest.KubeconfigPath())
	if err != nil {
		return err
	}
	mgmt := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace, Labels: map[string]string{"hypershift.openshift.io/hosted-control-plane": "true"}}},
		e.hostedControlPlane(),
		creds,
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.HyperShiftCloudConfigMap},
			Data:       map[string]string{names.KeyCABundle: string(e.OpenStack.CACertPEM())},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.PullSecret},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.GuestKubeconfigSecret},
			Data:       map[string][]byte{names.KeyKubeconfig: guestKubeconfig},
		},
	}
	return createAll(ctx, e.MgmtClient, mgmt)
}

func (e *Env) clusterCSIDriver() *operatorv1.ClusterCSIDriver {
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

// seedInfrastructure creates Infrastructure cluster as the installer (standalone) or the
// hosted-cluster-config-operator (guest) leaves it.
func (e *Env) seedInfrastructure(ctx context.Context) error {
	topology := configv1.ExternalTopologyMode
	if e.Mode == ModeStandalone {
		topology = configv1.SingleReplicaTopologyMode
		if e.options.HighlyAvailable {
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
	if err := createAll(ctx, e.GuestClient, []client.Object{infra}); err != nil {
		return err
	}
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName:     DefaultInfraID,
		ControlPlaneTopology:   topology,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		PlatformStatus: &configv1.PlatformStatus{
			Type:      configv1.OpenStackPlatformType,
			OpenStack: &configv1.OpenStackPlatformStatus{CloudName: CloudName},
		},
	}
	if err := e.GuestClient.Status().Update(ctx, infra); err != nil {
		return fmt.Errorf("setting the Infrastructure status: %w", err)
	}
	return nil
}

// hostedControlPlane returns the HostedControlPlane control-plane-operator reconciles from, with
// what a Cinder CSI operator reads of it.
func (e *Env) hostedControlPlane() *hyperv1.HostedControlPlane {
	policy := hyperv1.SingleReplica
	if e.options.HighlyAvailable {
		policy = hyperv1.HighlyAvailable
	}
	svc := func(t hyperv1.ServiceType) hyperv1.ServicePublishingStrategyMapping {
		return hyperv1.ServicePublishingStrategyMapping{
			Service:                   t,
			ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route},
		}
	}
	return &hyperv1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.options.HostedCluster},
		Spec: hyperv1.HostedControlPlaneSpec{
			ReleaseImage: "release:4.21",
			PullSecret:   corev1.LocalObjectReference{Name: names.PullSecret},
			IssuerURL:    "https://oidc.example.com",
			InfraID:      DefaultInfraID,
			DNS:          hyperv1.DNSSpec{BaseDomain: "example.com"},
			Etcd:         hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{Type: hyperv1.PersistentVolumeEtcdStorage}}},
			Platform: hyperv1.PlatformSpec{
				Type: hyperv1.OpenStackPlatform,
				OpenStack: &hyperv1.OpenStackPlatformSpec{
					IdentityRef: hyperv1.OpenStackIdentityReference{Name: e.options.HostedCluster + "-cloud-credentials", CloudName: CloudName},
				},
			},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				svc(hyperv1.APIServer), svc(hyperv1.OAuthServer), svc(hyperv1.Konnectivity), svc(hyperv1.Ignition),
			},
			ControllerAvailabilityPolicy: policy,
			NodeSelector:                 map[string]string{"hypershift.openshift.io/control-plane": "true"},
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
