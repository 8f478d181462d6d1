package env

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// tlsFieldOwner is the field manager of the TLS profile edits, an administrator's.
const tlsFieldOwner = "cinder-csi-e2e-admin"

// SetTLSProfile sets the cluster's TLS security profile where the mode keeps it, as an
// administrator does: the HostedControlPlane's spec.configuration.apiServer, or the APIServer
// named cluster, which the seed made as every OpenShift cluster has it. nil unsets it
// (Intermediate).
func (e *Env) SetTLSProfile(ctx context.Context, p *configv1.TLSSecurityProfile) error {
	if e.Mode == ModeHyperShift {
		hcps := &hyperv1.HostedControlPlaneList{}
		if err := e.MgmtClient.List(ctx, hcps, client.InNamespace(e.Namespace)); err != nil {
			return fmt.Errorf("finding the HostedControlPlane: %w", err)
		}
		if len(hcps.Items) != 1 {
			return fmt.Errorf("finding the HostedControlPlane: %d in %s", len(hcps.Items), e.Namespace)
		}
		err := Edit(ctx, e.MgmtClient, &hcps.Items[0], tlsFieldOwner, func(h *hyperv1.HostedControlPlane) {
			if h.Spec.Configuration == nil {
				h.Spec.Configuration = &hyperv1.ClusterConfiguration{}
			}
			if h.Spec.Configuration.APIServer == nil {
				h.Spec.Configuration.APIServer = &configv1.APIServerSpec{}
			}
			h.Spec.Configuration.APIServer.TLSSecurityProfile = p
		})
		if err != nil {
			return fmt.Errorf("setting the HostedControlPlane's TLS profile: %w", err)
		}
		// hosted-cluster-config-operator copies spec.configuration.apiServer into the guest's
		// APIServer cluster (control-plane-operator/hostedclusterconfigoperator, resources.go),
		// so that the guest's own components follow the profile too; no such operator runs
		// here, so the world does its part.
	}
	a := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: names.APIServerName}}
	if err := Edit(ctx, e.GuestClient, a, tlsFieldOwner, func(a *configv1.APIServer) { a.Spec.TLSSecurityProfile = p }); err != nil {
		return fmt.Errorf("setting APIServer %s's TLS profile: %w", names.APIServerName, err)
	}
	return nil
}
