package install

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// OperatorPlaceholder is the operator's own image in the install manifests.
const OperatorPlaceholder = "cinder-csi-operator:latest"

// OperandImage is an image the operator deploys: its environment variable, the placeholder the
// install manifests carry for it, and whether the management cluster's nodes (the CSI
// controller, on HyperShift) or the guest's (the node plugin) run it.
type OperandImage struct {
	Env         string
	Placeholder string
	Mgmt, Guest bool
}

// OperandImages are the images the install manifests name, placeholders included.
var OperandImages = []OperandImage{
	{Env: operandimages.EnvDriver, Placeholder: "cinder-csi-plugin:latest", Mgmt: true, Guest: true},
	{Env: operandimages.EnvProvisioner, Placeholder: "csi-provisioner:latest", Mgmt: true},
	{Env: operandimages.EnvAttacher, Placeholder: "csi-attacher:latest", Mgmt: true},
	{Env: operandimages.EnvResizer, Placeholder: "csi-resizer:latest", Mgmt: true},
	{Env: operandimages.EnvSnapshotter, Placeholder: "csi-snapshotter:latest", Mgmt: true},
	{Env: operandimages.EnvLivenessProbe, Placeholder: "csi-livenessprobe:latest", Mgmt: true, Guest: true},
	{Env: operandimages.EnvKubeRBACProxy, Placeholder: "kube-rbac-proxy:latest", Mgmt: true},
	{Env: operandimages.EnvNodeDriverRegistrar, Placeholder: "csi-node-driver-registrar:latest", Guest: true},
}

// Replacer fills the install manifests' placeholders as an installer does: the HostedControlPlane
// namespace (ignored by the standalone manifest, which has none), the operator's image and the
// operand images by environment variable. A placeholder without a value is left as it is, so
// that the operator's startup check names the missing image.
func Replacer(namespace, operatorImage string, operands map[string]string) *strings.Replacer {
	pairs := []string{PlaceholderNamespace, namespace, OperatorPlaceholder, operatorImage}
	for _, op := range OperandImages {
		if ref := operands[op.Env]; ref != "" {
			pairs = append(pairs, op.Placeholder, ref)
		}
	}
	return strings.NewReplacer(pairs...)
}

// Apply server-side-applies every object of an install manifest, after replace, under
// fieldOwner. Each object goes through edit first when edit is set, for what an installer
// changes beyond the placeholders (an extra flag of a test, say).
func Apply(ctx context.Context, c client.Client, path string, replace *strings.Replacer, fieldOwner string, edit func(*unstructured.Unstructured) error) error {
	docs, err := Read(path, replace)
	if err != nil {
		return err
	}
	for _, d := range docs {
		u := d.Object
		if edit != nil {
			if err := edit(u); err != nil {
				return fmt.Errorf("editing %s %s from %s: %w", u.GetKind(), u.GetName(), filepath.Base(path), err)
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), filepath.Base(path), err)
		}
	}
	return nil
}
