package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// The fixtures of what cluster-storage-operator creates to run csi-operator for Cinder, relative
// to the repository root, beside its Deployments (install.CSO*Deployment): the ServiceAccount
// and RBAC per mode, and the operator's configuration file.
const (
	csoStandaloneRBAC = "cmd/cinder-csi-operator/testdata/cso/standalone-rbac.yaml"
	csoHyperShiftRBAC = "cmd/cinder-csi-operator/testdata/cso/hypershift-rbac.yaml"
	csoOperatorConfig = "cmd/cinder-csi-operator/testdata/cso/operator-config.yaml"
	// csoConfigMap and csoServingSecret are the ConfigMap and the service-ca Secret the
	// Deployment mounts.
	csoConfigMap     = names.OperatorName + "-config"
	csoServingSecret = names.OperatorName + "-serving-cert"
)

// DeployFromClusterStorageOperator runs the operator as a cluster that replaces csi-operator by
// an image swap runs it: what cluster-storage-operator creates for csi-operator (its
// ServiceAccount and RBAC, its configuration ConfigMap, the serving certificate service-ca
// issues, and its Deployment) from the fixtures, with only the operator's image changed and the
// operand image variables pointed at the images built here, as a release payload fills them. The
// operator then holds csi-operator's permissions, not those of manifests/install. It returns once
// the pod is Ready.
func (e *Env) DeployFromClusterStorageOperator(ctx context.Context, binary string) (*OperatorPod, error) {
	if e.Real == nil {
		return nil, errors.New("the operator runs as a pod only on real nodes")
	}
	img, root, err := e.operatorImage(ctx, binary, "")
	if err != nil {
		return nil, err
	}
	rbac, deployment := csoStandaloneRBAC, install.CSOStandaloneDeployment
	if e.Mode == ModeHyperShift {
		rbac, deployment = csoHyperShiftRBAC, install.CSOHyperShiftDeployment
	}
	replace := install.Replacer(e.Namespace, img.Ref, e.Real.Images.Env())
	if err := install.Apply(ctx, e.MgmtClient, filepath.Join(root, rbac), replace, installFieldOwner, nil); err != nil {
		return nil, err
	}
	config, err := os.ReadFile(filepath.Join(root, csoOperatorConfig))
	if err != nil {
		return nil, err
	}
	cert, key, err := e.servingCert(names.OperatorMetricsService + "." + e.Namespace + ".svc")
	if err != nil {
		return nil, err
	}
	dep, err := install.ReadDeployment(filepath.Join(root, deployment))
	if err != nil {
		return nil, err
	}
	if dep, err = install.SwapOperatorImage(dep, img.Ref); err != nil {
		return nil, err
	}
	dep.Namespace = e.Namespace
	operands := e.Real.Images.Env()
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		for j := range c.Env {
			if ref, ok := operands[c.Env[j].Name]; ok {
				c.Env[j].Value = ref
			}
		}
	}
	objs := []client.Object{
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: csoConfigMap},
			Data:       map[string]string{"config.yaml": string(config)},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: csoServingSecret},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
		},
		dep,
	}
	for _, o := range objs {
		if err := createOrReplace(ctx, e.MgmtClient, o); err != nil {
			return nil, err
		}
	}
	return e.watchOperator(ctx, img, dep.Name, dep.Spec.Selector.MatchLabels)
}

// createOrReplace creates o, or replaces the object of its name with it.
func createOrReplace(ctx context.Context, c client.Client, o client.Object) error {
	err := c.Create(ctx, o)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	live, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not an object", o)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		return err
	}
	o.SetResourceVersion(live.GetResourceVersion())
	return c.Update(ctx, o)
}
