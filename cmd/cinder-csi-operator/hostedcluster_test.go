package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRunHostedCluster is not parallel: t.Setenv changes the whole process.
func TestRunHostedCluster(t *testing.T) {
	images := []string{
		"DRIVER_IMAGE", "DRIVER_CONTROL_PLANE_IMAGE", "PROVISIONER_IMAGE", "ATTACHER_IMAGE", "RESIZER_IMAGE",
		"SNAPSHOTTER_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE", "LIVENESS_PROBE_IMAGE",
		"LIVENESS_PROBE_CONTROL_PLANE_IMAGE", "KUBE_RBAC_PROXY_IMAGE", "KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE",
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{
			name: "When --guest-kubeconfig is missing, it should say so",
			args: []string{"--namespace=clusters-example"},
			want: []string{"--guest-kubeconfig is required"},
		},
		{
			name: "When only the controlplane container's images are set, it should name the node images that are missing",
			args: []string{"--namespace=clusters-example", "--guest-kubeconfig=guest.kubeconfig"},
			env: map[string]string{
				"DRIVER_CONTROL_PLANE_IMAGE": "cinder-csi-plugin:cp", "PROVISIONER_IMAGE": "csi-provisioner:1",
				"ATTACHER_IMAGE": "csi-attacher:1", "RESIZER_IMAGE": "csi-resizer:1", "SNAPSHOTTER_IMAGE": "csi-snapshotter:1",
				"LIVENESS_PROBE_CONTROL_PLANE_IMAGE": "csi-livenessprobe:cp", "KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE": "kube-rbac-proxy:cp",
			},
			want: []string{"DRIVER_IMAGE", "LIVENESS_PROBE_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE"},
		},
		{
			name: "When no image is set, it should name the missing images of both managers",
			args: []string{"--namespace=clusters-example", "--guest-kubeconfig=guest.kubeconfig"},
			want: []string{"DRIVER_CONTROL_PLANE_IMAGE (or DRIVER_IMAGE)", "PROVISIONER_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE"},
		},
		{
			name: "When an argument follows the flags, it should refuse it",
			args: []string{"--namespace=clusters-example", "--guest-kubeconfig=guest.kubeconfig", "extra"},
			want: []string{"unexpected arguments: extra"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, k := range images {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			g.Expect(run(append([]string{"hostedcluster"}, tt.args...), &stdout, &stderr)).To(Equal(1))
			for _, w := range tt.want {
				g.Expect(stderr.String()).To(ContainSubstring(w))
			}
		})
	}

	t.Run("When asked for its flags, it should list the union of the controlplane and guest commands' flags", func(t *testing.T) {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		g.Expect(run([]string{"hostedcluster", "-h"}, &stdout, &stderr)).To(Equal(1))
		for _, f := range []string{"-kubeconfig", "-guest-kubeconfig", "-namespace", "-leader-elect", "-leader-election-namespace",
			"-metrics-bind-address", "-health-probe-bind-address", "-topology-recheck-interval", "-openstack-timeout", "-zap-log-level"} {
			g.Expect(stderr.String()).To(ContainSubstring(f))
		}
	})
}
