package csioperator

import (
	"testing"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestHashKey checks HashKey against keys seen on csi-operator's standalone workloads (the
// credentials and trusted CA ones are on the pods quoted in cluster-storage-operator issue 428).
func TestHashKey(t *testing.T) {
	for _, tc := range []struct{ name, kind, want string }{
		{names.CloudConfConfigMap, KindConfigMap, "operator.openshift.io/dep-2a78a60e2cfb360d9fe72d1859d93b0fdd3bc"},
		{names.CredentialsSecret, KindSecret, "operator.openshift.io/dep-4b51488ec5b742a098d092dfe49449df0986e"},
		{names.ControllerMetricsSecret, KindSecret, "operator.openshift.io/dep-12129a17758a4339b718cd8f746bebe59b0e2"},
		{names.TrustedCABundleConfigMap, KindConfigMap, "operator.openshift.io/dep-28104e6bcb20f4d44a571c8e2f3f0a1f5a880"},
	} {
		t.Run("When the input is "+tc.name+", it should give csi-operator's key", func(t *testing.T) {
			if got := HashKey(names.GuestNamespace, tc.name, tc.kind); got != tc.want {
				t.Errorf("HashKey = %s, want %s", got, tc.want)
			}
		})
	}
}
