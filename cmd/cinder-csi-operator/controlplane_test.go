package main

import (
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
