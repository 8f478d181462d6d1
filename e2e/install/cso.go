package install

import (
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// The Deployments cluster-storage-operator renders to run csi-operator for Cinder, relative to
// the repository root; each file's header names the commit it reflects. A cluster switches from
// csi-operator to this operator by running one of them with only the image changed
// (SwapOperatorImage): the same command line, environment, mounts and RBAC.
const (
	CSOStandaloneDeployment = "cmd/cinder-csi-operator/testdata/cso/standalone-deployment.yaml"
	CSOHyperShiftDeployment = "cmd/cinder-csi-operator/testdata/cso/hypershift-deployment.yaml"
)

// ReadDeployment decodes the Deployment in the YAML file path, refusing unknown fields.
func ReadDeployment(path string) (*appsv1.Deployment, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dep := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(b, dep); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return dep, nil
}

// SwapOperatorImage returns a copy of dep, one of cluster-storage-operator's Deployments of
// csi-operator, whose operator container (named names.OperatorName) runs image instead: that
// image only, as a cluster that replaces csi-operator by this operator changes it.
func SwapOperatorImage(dep *appsv1.Deployment, image string) (*appsv1.Deployment, error) {
	out := dep.DeepCopy()
	for i := range out.Spec.Template.Spec.Containers {
		if c := &out.Spec.Template.Spec.Containers[i]; c.Name == names.OperatorName {
			c.Image = image
			return out, nil
		}
	}
	return nil, fmt.Errorf("no container %s in Deployment %s/%s", names.OperatorName, dep.Namespace, dep.Name)
}
