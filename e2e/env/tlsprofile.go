package env

import (
	"context"
	"errors"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// tlsFieldOwner is the field manager of the TLS profile edits, an administrator's.
const tlsFieldOwner = "cinder-csi-e2e-admin"

// SetTLSProfile sets the cluster's TLS security profile where the mode keeps it, as an
// administrator does: the HostedControlPlane's spec.configuration.apiServer, or the APIServer
// named cluster (created when missing). nil unsets it (Intermediate).
func (e *Env) SetTLSProfile(ctx context.Context, p *configv1.TLSSecurityProfile) error {
	if e.Mode == ModeHyperShift {
		hcps := &hyperv1.HostedControlPlaneList{}
		if err := e.MgmtClient.List(ctx, hcps, client.InNamespace(e.Namespace)); err != nil {
			return fmt.Errorf("finding the HostedControlPlane: %w", err)
		}
		if len(hcps.Items) != 1 {
			return fmt.Errorf("finding the HostedControlPlane: %d in %s", len(hcps.Items), e.Namespace)
		}
		return Edit(ctx, e.MgmtClient, &hcps.Items[0], tlsFieldOwner, func(h *hyperv1.HostedControlPlane) {
			if h.Spec.Configuration == nil {
				h.Spec.Configuration = &hyperv1.ClusterConfiguration{}
			}
			if h.Spec.Configuration.APIServer == nil {
				h.Spec.Configuration.APIServer = &configv1.APIServerSpec{}
			}
			h.Spec.Configuration.APIServer.TLSSecurityProfile = p
		})
	}
	a := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: names.APIServerName}, Spec: configv1.APIServerSpec{TLSSecurityProfile: p}}
	err := e.GuestClient.Create(ctx, a, client.FieldOwner(tlsFieldOwner))
	if apierrors.IsAlreadyExists(err) {
		err = Edit(ctx, e.GuestClient, a, tlsFieldOwner, func(a *configv1.APIServer) { a.Spec.TLSSecurityProfile = p })
	}
	if err != nil {
		return errors.Join(fmt.Errorf("setting APIServer %s's TLS profile", names.APIServerName), err)
	}
	return nil
}
