package main

import (
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
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
