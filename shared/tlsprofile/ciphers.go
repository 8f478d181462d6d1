package tlsprofile

import (
	"crypto/tls"
	"strings"
)

// opensslToIANA maps the OpenSSL names of the cipher suites OpenShift's profiles may name to
// their IANA (RFC) names. It covers every cipher of configv1.TLSProfiles plus the common
// OpenSSL names a Custom profile may add; Go implements only some of them (see goSuites). TLS
// 1.3 suites have one name in both worlds and need no entry.
var opensslToIANA = map[string]string{
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA256":     "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-RSA-AES128-SHA256":       "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA384":     "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
	"ECDHE-RSA-AES256-SHA384":       "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-DES-CBC3-SHA":        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
	"ECDHE-ECDSA-RC4-SHA":           "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
	"ECDHE-RSA-RC4-SHA":             "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
	"DHE-RSA-AES128-GCM-SHA256":     "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
	"DHE-RSA-AES256-GCM-SHA384":     "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
	"DHE-RSA-CHACHA20-POLY1305":     "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"DHE-RSA-AES128-SHA256":         "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
	"DHE-RSA-AES256-SHA256":         "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
	"AES128-GCM-SHA256":             "TLS_RSA_WITH_AES_128_GCM_SHA256",
	"AES256-GCM-SHA384":             "TLS_RSA_WITH_AES_256_GCM_SHA384",
	"AES128-SHA256":                 "TLS_RSA_WITH_AES_128_CBC_SHA256",
	"AES256-SHA256":                 "TLS_RSA_WITH_AES_256_CBC_SHA256",
	"AES128-SHA":                    "TLS_RSA_WITH_AES_128_CBC_SHA",
	"AES256-SHA":                    "TLS_RSA_WITH_AES_256_CBC_SHA",
	"DES-CBC3-SHA":                  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
	"RC4-SHA":                       "TLS_RSA_WITH_RC4_128_SHA",
}

// goSuites are the cipher suites Go implements, by IANA name: tls.CipherSuites and, because the
// Old profile exists for old clients that need them, tls.InsecureCipherSuites, except RC4, which
// RFC 7465 prohibits in every TLS version.
var goSuites = func() map[string]*tls.CipherSuite {
	out := map[string]*tls.CipherSuite{}
	for _, c := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !strings.Contains(c.Name, "_RC4_") {
			out[c.Name] = c
		}
	}
	return out
}()

// IANACipherSuites converts a profile's cipher names (OpenSSL names, as configv1.TLSProfiles
// and most Custom profiles write them; an IANA name is taken as it is) to the IANA names Go and
// kube-rbac-proxy take, in the given order and without duplicates. It is a pure function of
// its input and of the Go version.
//
// Names Go does not implement are dropped and returned in dropped: the DHE suites, the CBC
// suites with SHA-384 or with SHA-256 and AES-256, RC4 (which Go implements but RFC 7465
// prohibits), and any name it does not know. TLS 1.3 suites (TLS_AES_128_GCM_SHA256,
// TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256) are kept by name, but Go does not let
// them be configured: it serves all three whenever TLS 1.3 is negotiated, whatever the list
// holds.
func IANACipherSuites(names []string) (kept, dropped []string) {
	seen := map[string]bool{}
	for _, name := range names {
		iana := name
		if mapped, ok := opensslToIANA[name]; ok {
			iana = mapped
		}
		if goSuites[iana] == nil {
			dropped = append(dropped, name)
			continue
		}
		if !seen[iana] {
			seen[iana] = true
			kept = append(kept, iana)
		}
	}
	return kept, dropped
}
