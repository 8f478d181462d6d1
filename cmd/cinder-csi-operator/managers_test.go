package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane"
)

// TestEnvironmentProxy is not parallel: t.Setenv changes the whole process.
func TestEnvironmentProxy(t *testing.T) {
	unset := func(t *testing.T) {
		for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
			t.Setenv(v, "")
		}
	}
	tests := []struct {
		name string
		env  map[string]string
		want configv1.ProxyStatus
	}{
		{
			name: "When HyperShift sets the proxy variables, it should read all three",
			env: map[string]string{
				"HTTP_PROXY": "http://proxy.example.com:3128", "HTTPS_PROXY": "http://proxy.example.com:3129",
				"NO_PROXY": ".cluster.local,.svc,kube-apiserver",
			},
			want: configv1.ProxyStatus{
				HTTPProxy: "http://proxy.example.com:3128", HTTPSProxy: "http://proxy.example.com:3129",
				NoProxy: ".cluster.local,.svc,kube-apiserver",
			},
		},
		{
			name: "When only the lower-case variables are set, it should read them",
			env:  map[string]string{"https_proxy": "http://proxy.example.com:3129", "no_proxy": ".svc"},
			want: configv1.ProxyStatus{HTTPSProxy: "http://proxy.example.com:3129", NoProxy: ".svc"},
		},
		{
			name: "When both cases are set, it should prefer the upper-case one, as net/http does",
			env:  map[string]string{"HTTPS_PROXY": "http://upper.example.com:3129", "https_proxy": "http://lower.example.com:3129"},
			want: configv1.ProxyStatus{HTTPSProxy: "http://upper.example.com:3129"},
		},
		{
			name: "When no proxy variable is set, it should return no proxy",
			want: configv1.ProxyStatus{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			unset(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			g.Expect(environmentProxy()).To(Equal(tt.want))
		})
	}
}

func TestHostedEnvironment(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		env     map[string]string
		version string
		uid     *int64
		err     string
	}{
		{name: "When neither variable is set, it should set neither", version: ""},
		{
			name:    "When HyperShift sets the release version and a UID, it should read both",
			env:     map[string]string{"OPERATOR_IMAGE_VERSION": "4.21.3", "RUN_AS_USER": "1001"},
			version: "4.21.3", uid: ptr.To[int64](1001),
		},
		{name: "When RUN_AS_USER is 0, it should keep it (root is the management cluster's choice)", env: map[string]string{"RUN_AS_USER": "0"}, uid: ptr.To[int64](0)},
		{name: "When RUN_AS_USER is negative, it should fail naming the variable", env: map[string]string{"RUN_AS_USER": "-1"}, err: `RUN_AS_USER="-1"`},
		{name: "When RUN_AS_USER is not a number, it should fail naming the variable", env: map[string]string{"RUN_AS_USER": "nobody"}, err: `RUN_AS_USER="nobody"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			var cfg controlplane.Config
			err := hostedEnvironment(func(k string) string { return tt.env[k] }, &cfg)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.ReleaseVersion).To(Equal(tt.version))
			g.Expect(cfg.RunAsUser).To(Equal(tt.uid))
		})
	}
}

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

// TestManagersFlags checks that each command of managers offers the flags of the reconcilers it
// runs and no others.
func TestManagersFlags(t *testing.T) {
	tests := []struct {
		command   string
		want, not []string
	}{
		{command: "controlplane", want: []string{"-guest-kubeconfig", "-topology-recheck-interval", `(default ":8443")`}},
		{command: "guest", want: []string{"-guest-kubeconfig", `(default ":8444")`, `(default ":8083")`}, not: []string{"-topology-recheck-interval", "-openstack-timeout"}},
		{command: "standalone", want: []string{"-topology-recheck-interval", `(default ":8443")`}, not: []string{"-guest-kubeconfig"}},
	}
	for _, tt := range tests {
		t.Run("When asked for the flags of "+tt.command+", it should list those of the reconcilers it runs", func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			g.Expect(run([]string{tt.command, "-h"}, &stdout, &stderr)).To(Equal(1))
			for _, f := range tt.want {
				g.Expect(stderr.String()).To(ContainSubstring(f))
			}
			for _, f := range tt.not {
				g.Expect(stderr.String()).NotTo(ContainSubstring(f))
			}
		})
	}
}
