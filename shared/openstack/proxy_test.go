package openstack_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

func TestProxyFunc(t *testing.T) {
	t.Parallel()
	const (
		httpProxy  = "http://proxy.example.com:3128"
		httpsProxy = "http://secure-proxy.example.com:3129"
	)
	both := openstack.ProxySettings{HTTPProxy: httpProxy, HTTPSProxy: httpsProxy}
	withNoProxy := func(noProxy string) openstack.ProxySettings {
		s := both
		s.NoProxy = noProxy
		return s
	}
	tests := []struct {
		name     string
		settings openstack.ProxySettings
		url      string
		// want is the proxy URL chosen, "" for a direct connection.
		want string
	}{
		{name: "When an https URL is requested, it should use HTTPSProxy",
			settings: both, url: "https://keystone.example.com:5000/v3", want: httpsProxy},
		{name: "When an http URL is requested, it should use HTTPProxy",
			settings: both, url: "http://keystone.example.com:5000/v3", want: httpProxy},
		{name: "When only HTTPProxy is set, it should reach https URLs directly, as Go does",
			settings: openstack.ProxySettings{HTTPProxy: httpProxy}, url: "https://keystone.example.com/v3"},
		{name: "When only HTTPSProxy is set, it should reach http URLs directly",
			settings: openstack.ProxySettings{HTTPSProxy: httpsProxy}, url: "http://keystone.example.com/v3"},
		{name: "When the proxy has no scheme, it should take it as http",
			settings: openstack.ProxySettings{HTTPSProxy: "proxy.example.com:3128"}, url: "https://keystone.example.com/v3",
			want: "http://proxy.example.com:3128"},
		{name: "When the proxy URL has credentials, it should keep them for the proxy",
			settings: openstack.ProxySettings{HTTPSProxy: "http://user:pa55@proxy.example.com:3128"}, url: "https://keystone.example.com/v3",
			want: "http://user:pa55@proxy.example.com:3128"},
		{name: "When noProxy names the host, it should connect directly",
			settings: withNoProxy("keystone.example.com"), url: "https://keystone.example.com:5000/v3"},
		{name: "When noProxy names a parent domain, it should connect directly to its subdomains",
			settings: withNoProxy("example.com"), url: "https://keystone.example.com/v3"},
		{name: "When noProxy names a domain with a leading dot, it should connect directly to its subdomains",
			settings: withNoProxy(".example.com"), url: "https://keystone.example.com/v3"},
		{name: "When noProxy names a domain with a leading dot, it should still proxy a longer name that merely ends like it",
			settings: withNoProxy(".example.com"), url: "https://keystone.notexample.com/v3", want: httpsProxy},
		{name: "When noProxy names *.domain, it should connect directly to its subdomains",
			settings: withNoProxy("*.example.com"), url: "https://keystone.example.com/v3"},
		{name: "When noProxy is *, it should never proxy",
			settings: withNoProxy("*"), url: "https://keystone.example.com/v3"},
		{name: "When noProxy lists several entries with spaces, it should match any of them",
			settings: withNoProxy(".cluster.local, .svc ,keystone.example.com"), url: "https://keystone.example.com/v3"},
		{name: "When noProxy names the host with another port, it should proxy",
			settings: withNoProxy("keystone.example.com:5000"), url: "https://keystone.example.com:13000/v3", want: httpsProxy},
		{name: "When noProxy names the host with its port, it should connect directly",
			settings: withNoProxy("keystone.example.com:13000"), url: "https://keystone.example.com:13000/v3"},
		{name: "When noProxy has a CIDR holding the IP of the URL, it should connect directly",
			settings: withNoProxy("10.0.0.0/16"), url: "https://10.0.4.5:5000/v3"},
		{name: "When noProxy has a CIDR that does not hold the IP, it should proxy",
			settings: withNoProxy("10.0.0.0/16"), url: "https://10.1.4.5:5000/v3", want: httpsProxy},
		{name: "When noProxy names the IP of the URL, it should connect directly",
			settings: withNoProxy("192.0.2.10"), url: "https://192.0.2.10:5000/v3"},
		{name: "When noProxy names an unrelated host, it should proxy",
			settings: withNoProxy("other.example.org"), url: "https://keystone.example.com/v3", want: httpsProxy},
		{name: "When the host is localhost, it should never proxy",
			settings: both, url: "https://localhost:5000/v3"},
		{name: "When the host is a loopback IP, it should never proxy",
			settings: both, url: "https://127.0.0.1:5000/v3"},
		{name: "When the host is the IPv6 loopback, it should never proxy",
			settings: both, url: "https://[::1]:5000/v3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			proxy, err := openstack.ProxyFunc(tt.settings)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxy).NotTo(BeNil())
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.url, nil)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := proxy(req)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.String()).To(Equal(tt.want))
		})
	}

	t.Run("When no proxy is set, it should return no function, so the client connects directly", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		for _, s := range []openstack.ProxySettings{{}, {NoProxy: ".example.com"}} {
			proxy, err := openstack.ProxyFunc(s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proxy).To(BeNil())
		}
	})
}

func TestProxyFuncInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		settings openstack.ProxySettings
		want     string
	}{
		{name: "When httpsProxy has an unsupported scheme, it should say which setting",
			settings: openstack.ProxySettings{HTTPSProxy: "ftp://user:s3cret@proxy.example.com:21"}, want: "httpsProxy"},
		{name: "When httpProxy is not a URL, it should say which setting",
			settings: openstack.ProxySettings{HTTPProxy: "http://user:s3cret@[::1"}, want: "httpProxy"},
		{name: "When httpsProxy names no host, it should say which setting",
			settings: openstack.ProxySettings{HTTPSProxy: "http://user:s3cret@:3128"}, want: "httpsProxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			proxy, err := openstack.ProxyFunc(tt.settings)
			g.Expect(proxy).To(BeNil())
			g.Expect(openstack.Classify(err)).To(Equal(openstack.ReasonInvalidProxy), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
			// The value may hold credentials: neither the error nor the message repeats it.
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
			g.Expect(openstack.Describe(err)).NotTo(ContainSubstring("s3cret"))
		})
	}
}
