package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestLeaderIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{
			name: "When the pod's name and namespace are set, it should be namespace/name",
			env:  map[string]string{"POD_NAME": "cinder-csi-operator-7d9f8-x2k4q", "POD_NAMESPACE": "clusters-example"},
			want: "clusters-example/cinder-csi-operator-7d9f8-x2k4q",
		},
		{
			name: "When only the pod's name is set, it should be the name",
			env:  map[string]string{"POD_NAME": "cinder-csi-operator-7d9f8-x2k4q"},
			want: "cinder-csi-operator-7d9f8-x2k4q",
		},
		{
			name: "When the pod's name has surrounding blanks, it should trim them",
			env:  map[string]string{"POD_NAME": " operator-0\n", "POD_NAMESPACE": " ns "},
			want: "ns/operator-0",
		},
		{
			name: "When no pod name is set, it should be empty so that every start gets a new identity",
			env:  map[string]string{"POD_NAMESPACE": "clusters-example"},
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(leaderIdentity(func(k string) string { return tt.env[k] })).To(Equal(tt.want))
		})
	}
}
