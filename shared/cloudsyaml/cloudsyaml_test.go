package cloudsyaml

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		data  string
		cloud string
		want  string
	}{
		{name: "When the cloud has an auth URL, it should accept it", data: testutil.CloudsYAML, cloud: "openstack"},
		{name: "When the file is not YAML, it should say so without quoting it", data: "clouds: [password: s3cret", cloud: "openstack",
			want: "is not valid YAML of the clouds.yaml format."},
		{name: "When the cloud has no auth URL, it should name the key", data: "clouds: {openstack: {auth: {password: s3cret}}}", cloud: "openstack",
			want: `has no auth.auth_url for cloud "openstack".`},
		{name: "When the cloud has no auth section, it should name the key", data: "clouds: {openstack: {region_name: RegionOne}}", cloud: "openstack",
			want: `has no auth.auth_url for cloud "openstack".`},
		{name: "When a password was pasted into verify, it should name the field and line without quoting it",
			data: "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n    verify: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.verify (line 5): it must be true or false."},
		{name: "When a mapping stands where a string belongs, it should name the field",
			data: "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n      password:\n        value: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.auth.password (line 6): it must be a string."},
		{name: "When auth is a string, it should say it must be a mapping",
			data: "clouds:\n  openstack:\n    auth: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.auth (line 3): it must be a mapping."},
		{name: "When another cloud entry has a wrong type, it should refuse the file as the driver does",
			data: "clouds:\n  openstack: {auth: {auth_url: https://keystone.example:5000}}\n  \"other cloud\": {verify: s3cret}\n", cloud: "openstack",
			want: `has a value of the wrong type at clouds."other cloud".verify (line 3): it must be true or false.`},
		{name: "When a region entry has a wrong type, it should index the list",
			data: "clouds:\n  openstack:\n    auth: {auth_url: https://keystone.example:5000}\n    regions:\n    - name: RegionOne\n    - values: s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds.openstack.regions[1].values (line 6): it must be a mapping."},
		{name: "When clouds is a list, it should say it must be a mapping",
			data: "clouds: [s3cret]\n", cloud: "openstack",
			want: "has a value of the wrong type at clouds (line 1): it must be a mapping."},
		{name: "When the document is a list, it should point at the top level",
			data: "- s3cret\n", cloud: "openstack",
			want: "has a value of the wrong type at the top level (line 1): it must be a mapping."},
		{name: "When a key is given twice, it should give the line without the key",
			data: "clouds:\n  openstack:\n    auth:\n      password: a\n      password: s3cret\n", cloud: "openstack",
			want: "does not decode as clouds.yaml at line 5 (a key given twice?)."},
		{name: "When a number stands where a string belongs, it should accept it as the driver does",
			data: "clouds: {openstack: {auth: {auth_url: https://keystone.example:5000, password: 12345}}}", cloud: "openstack"},
		{name: "When verify is a YAML 1.1 boolean, it should accept it as the driver does",
			data: "clouds: {openstack: {verify: no, auth: {auth_url: https://keystone.example:5000}}}", cloud: "openstack"},
		{name: "When regions are plain names, it should accept them as the driver does",
			data: "clouds: {openstack: {regions: [RegionOne], auth: {auth_url: https://keystone.example:5000}}}", cloud: "openstack"},
		{name: "When the file has keys the driver does not know, it should ignore them as the driver does",
			data: "clouds: {openstack: {block_storage_api_version: {x: 3}, auth: {auth_url: https://keystone.example:5000}}}", cloud: "openstack"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := Check([]byte(tt.data), tt.cloud, "the cloud name's source")
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got).NotTo(ContainSubstring("s3cret"))
		})
	}
}

func TestCheckCA(t *testing.T) {
	t.Parallel()
	// key is a PEM block of another type that must not pass for a certificate, nor be quoted.
	key := "-----BEGIN PRIVATE KEY-----\nczNjcmV0\n-----END PRIVATE KEY-----\n"
	badCert := "-----BEGIN CERTIFICATE-----\nczNjcmV0\n-----END CERTIFICATE-----\n"
	for _, tt := range []struct {
		name string
		data string
		want string
	}{
		{name: "When the key holds one certificate, it should accept it", data: testutil.CA},
		{name: "When the key holds a bundle with comments and blank lines, it should accept it",
			data: "# example OpenStack CA\n" + testutil.CA + "\n\n# the same, again\r\n" + testutil.CA},
		{name: "When the certificate is indented, it should refuse it as Go's PEM decoder does", data: "  " + testutil.CA,
			want: "has text outside a PEM certificate at line 1."},
		{name: "When the key holds no PEM at all, it should say so", data: "s3cret",
			want: "has text outside a PEM certificate at line 1."},
		{name: "When the key holds only comments, it should say it holds no certificate", data: "# s3cret\n",
			want: "holds no PEM certificate."},
		{name: "When text follows the certificate, it should name the line", data: testutil.CA + "s3cret\n",
			want: "has text outside a PEM certificate at line 11."},
		{name: "When a private key is in the bundle, it should refuse it", data: testutil.CA + key,
			want: "has a PEM block at line 11 that is not a CERTIFICATE."},
		{name: "When a CERTIFICATE block is not X.509, it should refuse it", data: badCert,
			want: "has a CERTIFICATE at line 1 that is not a valid X.509 certificate."},
		{name: "When a block is not closed, it should refuse it", data: "-----BEGIN CERTIFICATE-----\nczNjcmV0\n",
			want: "has a PEM block at line 1 that does not decode."},
		{name: "When a malformed block comes before a good one, it should not skip to the good one",
			data: "-----BEGIN CERTIFICATE-----\n!!s3cret!!\n-----END CERTIFICATE-----\n" + testutil.CA,
			want: "has a PEM block at line 1 that does not decode."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := CheckCA([]byte(tt.data))
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got).NotTo(ContainSubstring("s3cret"))
			g.Expect(got).NotTo(ContainSubstring("czNjcmV0"))
		})
	}
}
