package apply

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestClusterFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		hyperShift bool
		c          Cluster
		want       Cluster
	}{
		{name: "When on HyperShift, it should keep the cluster's name", hyperShift: true, c: ClusterGuest, want: ClusterGuest},
		{name: "When standalone, it should leave the one cluster unnamed", c: ClusterManagement, want: ClusterUnnamed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(ClusterFor(tt.hyperShift, tt.c)).To(Equal(tt.want))
		})
	}
}
