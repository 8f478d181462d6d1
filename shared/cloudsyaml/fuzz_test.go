package cloudsyaml

import (
	"crypto/x509"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	yamlv3 "gopkg.in/yaml.v3"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

// fuzzNameFrom is where the fuzzed cloud names are said to come from: HyperShift's wording.
const fuzzNameFrom = "the HostedControlPlane's identityRef cloudName"

// caMessage is every message CheckCA may return: they carry line numbers and nothing of the key.
var caMessage = regexp.MustCompile(`^(|holds no PEM certificate\.|` +
	`has text outside a PEM certificate at line \d+\.|` +
	`has a PEM block at line \d+ that does not decode\.|` +
	`has a PEM block at line \d+ that is not a CERTIFICATE\.|` +
	`has a CERTIFICATE at line \d+ that is not a valid X\.509 certificate\.)$`)

// FuzzCheckCredentials checks Check and CheckCA, which stand between the credentials Secret and
// the driver's pods, on arbitrary bytes:
//
//   - neither panics, and each returns one line;
//   - Check accepts only what yaml.v3 decodes into clouds.Clouds (the driver's decode),
//     with the cloud and its auth URL, and its message holds no value of the file: a value of
//     six characters or more shows in it only where the file also uses it as a key (a cloud
//     name, a field) or it is the cloud name;
//   - CheckCA returns one of its fixed messages, and accepts only what Go's certificate pool
//     (the driver's) takes for at least one certificate.
//
// Its seeds are below; `make fuzz` explores further.
func FuzzCheckCredentials(f *testing.F) {
	for _, seed := range []string{
		testutil.CloudsYAML,
		"clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n      password: hunter2-password\n    verify: hunter2-password\n",
		"clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000\n      password:\n        value: hunter2-password\n",
		"clouds:\n  openstack:\n    auth: hunter2-password\n",
		"clouds:\n  openstack:\n    regions:\n    - RegionOne\n    - values: hunter2-password\n",
		"base: &b {auth_url: hunter2-password}\nclouds: {openstack: {auth: *b, verify: *b}}\n",
		"clouds: {openstack: {auth: {password: a, password: hunter2-password}}}\n",
		testutil.CA,
		"# bundle\n" + testutil.CA + testutil.CA,
		testutil.CA + "-----BEGIN PRIVATE KEY-----\naHVudGVyMg==\n-----END PRIVATE KEY-----\n",
		"-----BEGIN CERTIFICATE-----\naHVudGVyMg==\n-----END CERTIFICATE-----\n",
	} {
		f.Add([]byte(seed), "openstack")
	}
	f.Fuzz(func(t *testing.T, data []byte, cloud string) {
		msg := Check(data, cloud, fuzzNameFrom)
		if strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("clouds.yaml message %q is not one line", msg)
		}
		var doc clouds.Clouds
		decodeErr := yamlv3.Unmarshal(data, &doc)
		if msg == "" {
			c, ok := doc.Clouds[cloud]
			if decodeErr != nil || !ok || c.AuthInfo == nil || c.AuthInfo.AuthURL == "" {
				t.Fatalf("Check accepted a file the driver refuses or without the cloud's auth URL (%v)", decodeErr)
			}
		}
		if leaked := valueIn(data, cloud, msg); leaked != "" {
			t.Fatalf("clouds.yaml message %q shows the value %q", msg, leaked)
		}

		caMsg := CheckCA(data)
		if !caMessage.MatchString(caMsg) {
			t.Fatalf("CA message %q is none of CheckCA's", caMsg)
		}
		if caMsg == "" && !x509.NewCertPool().AppendCertsFromPEM(data) {
			t.Fatal("CheckCA accepted a bundle without a certificate Go's pool takes")
		}
	})
}

// valueIn returns a scalar value of the YAML document data, six characters or longer, that msg
// shows although the document never uses it as a key and it is not the cloud name; "" if none.
func valueIn(data []byte, cloud, msg string) string {
	var root yamlv3.Node
	if msg == "" || yamlv3.Unmarshal(data, &root) != nil {
		return ""
	}
	var keys, values []string
	var walk func(n *yamlv3.Node, depth int)
	walk = func(n *yamlv3.Node, depth int) {
		if n == nil || depth > 64 {
			return
		}
		if n.Kind == yamlv3.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				keys = append(keys, n.Content[i].Value)
				walk(n.Content[i+1], depth+1)
			}
			return
		}
		if n.Kind == yamlv3.ScalarNode {
			values = append(values, n.Value)
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(&root, 0)
	for _, v := range values {
		if len(v) < 6 || v == cloud || slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, v) }) {
			continue
		}
		if strings.Contains(strings.ReplaceAll(msg, `\"`, `"`), v) && !strings.Contains(cloud, v) && !wordOfTemplate(v) {
			return v
		}
	}
	return ""
}

// wordOfTemplate is whether v is part of the fixed wording of Check's messages, which a
// value can happen to equal.
func wordOfTemplate(v string) bool {
	const wording = "is not valid YAML of the clouds.yaml format. has no cloud named (the HostedControlPlane's identityRef cloudName). " +
		"has no auth.auth_url for cloud does not decode as clouds.yaml at line (a key given twice?). " +
		"has a value of the wrong type at the top level (line ): it must be true or false a string a mapping a list."
	return strings.Contains(wording, v)
}
