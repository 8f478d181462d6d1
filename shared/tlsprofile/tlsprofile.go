// Package tlsprofile turns OpenShift's TLS security profile (configv1.TLSSecurityProfile: Old,
// Intermediate, Modern or Custom) into the settings Go's crypto/tls and kube-rbac-proxy take: a
// minimum TLS version and cipher suites by their IANA names. OpenShift names the profiles'
// ciphers the OpenSSL way (ECDHE-RSA-AES128-GCM-SHA256); Go and kube-rbac-proxy's
// --tls-cipher-suites know only the IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256).
//
// The operator applies the cluster's profile to every kube-rbac-proxy in front of the CSI
// controller's metrics and to its own metrics endpoint, as OpenShift's operators do. Live holds
// the profile in force for a server that follows changes without a restart.
package tlsprofile

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
)

// Settings are what one TLS security profile resolves to.
type Settings struct {
	// Profile is the profile in force: the requested one, or Intermediate after a fallback.
	Profile configv1.TLSProfileType
	// MinVersion is the lowest TLS version served (tls.VersionTLS12, ...).
	MinVersion uint16
	// CipherSuites are the profile's cipher suites that Go implements, by IANA name, in the
	// profile's order. The TLS 1.3 suites are among them when the profile names them; Go
	// serves those whenever TLS 1.3 is negotiated and does not let them be configured.
	CipherSuites []string
	// Dropped are the profile's ciphers that were left out because Go does not implement them
	// (or they are RC4, which RFC 7465 prohibits), as the profile names them.
	Dropped []string
	// Problem says why the requested profile could not be used and Intermediate is in force
	// instead; empty when the requested profile is in force.
	Problem string
}

// versionNames are the TLS versions by OpenShift's names, which are also kube-rbac-proxy's and
// Kubernetes' --tls-min-version values.
var versionNames = map[configv1.TLSProtocolVersion]uint16{
	configv1.VersionTLS10: tls.VersionTLS10,
	configv1.VersionTLS11: tls.VersionTLS11,
	configv1.VersionTLS12: tls.VersionTLS12,
	configv1.VersionTLS13: tls.VersionTLS13,
}

// Intermediate returns the settings of OpenShift's default profile.
func Intermediate() Settings {
	return Resolve(nil)
}

// Resolve returns the settings of profile p: nil (unset) or an empty type is Intermediate, as on
// an OpenShift cluster; Old, Intermediate and Modern are configv1.TLSProfiles' predefined
// profiles, whatever their optional sections hold; Custom takes its own ciphers and minimum
// version. A profile that cannot be served (Custom without its section, an unknown type or
// version, or, below TLS 1.3, no cipher suite Go implements) resolves to Intermediate with
// Problem saying why: the endpoints stay as safe as OpenShift's default rather than fail.
func Resolve(p *configv1.TLSSecurityProfile) Settings {
	typ := configv1.TLSProfileIntermediateType
	if p != nil && p.Type != "" {
		typ = p.Type
	}
	var spec *configv1.TLSProfileSpec
	switch typ {
	case configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType:
		spec = configv1.TLSProfiles[typ]
	case configv1.TLSProfileCustomType:
		if p.Custom == nil {
			return fallback("The Custom TLS security profile has no custom section.")
		}
		spec = &p.Custom.TLSProfileSpec
	default:
		return fallback(fmt.Sprintf("The TLS security profile type %q is not one of Old, Intermediate, Modern, Custom.", typ))
	}
	s, problem := fromSpec(typ, spec)
	if problem != "" {
		return fallback(problem)
	}
	return s
}

// fromSpec resolves one profile's spec, or says why it cannot be served.
func fromSpec(typ configv1.TLSProfileType, spec *configv1.TLSProfileSpec) (Settings, string) {
	minVersion, ok := versionNames[spec.MinTLSVersion]
	if !ok {
		return Settings{}, fmt.Sprintf("The %s TLS security profile's minTLSVersion %q is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13.",
			typ, spec.MinTLSVersion)
	}
	kept, dropped := IANACipherSuites(spec.Ciphers)
	s := Settings{Profile: typ, MinVersion: minVersion, CipherSuites: kept, Dropped: dropped}
	// TLS 1.3 needs no configured suite; below it, a handshake needs one the profile allows.
	if minVersion < tls.VersionTLS13 && len(s.CipherSuiteIDs()) == 0 {
		return Settings{}, fmt.Sprintf("The %s TLS security profile allows TLS versions below 1.3 but none of its ciphers for them is one Go implements.", typ)
	}
	return s, ""
}

// fallback returns Intermediate with the problem that led to it.
func fallback(problem string) Settings {
	s, _ := fromSpec(configv1.TLSProfileIntermediateType, configv1.TLSProfiles[configv1.TLSProfileIntermediateType])
	s.Problem = problem
	return s
}

// MinVersionName returns the minimum version by its OpenShift name (VersionTLS12), the form
// kube-rbac-proxy's --tls-min-version takes.
func (s Settings) MinVersionName() string {
	for name, v := range versionNames {
		if v == s.MinVersion {
			return string(name)
		}
	}
	return ""
}

// CipherSuiteIDs returns the IDs of the cipher suites for TLS 1.2 and below, in profile order,
// for tls.Config.CipherSuites. Go ignores TLS 1.3 suites there, so they are left out.
func (s Settings) CipherSuiteIDs() []uint16 {
	var out []uint16
	for _, name := range s.CipherSuites {
		if c := goSuites[name]; c != nil && slices.ContainsFunc(c.SupportedVersions, func(v uint16) bool { return v < tls.VersionTLS13 }) {
			out = append(out, c.ID)
		}
	}
	return out
}

// KubeRBACProxyArgs returns kube-rbac-proxy's flags for these settings: --tls-min-version and,
// when the profile names any cipher suite Go implements, --tls-cipher-suites (kube-rbac-proxy
// takes Go's names, TLS 1.3 ones included).
func (s Settings) KubeRBACProxyArgs() []string {
	args := []string{"--tls-min-version=" + s.MinVersionName()}
	if len(s.CipherSuites) > 0 {
		args = append(args, "--tls-cipher-suites="+strings.Join(s.CipherSuites, ","))
	}
	return args
}

// ApplyTo sets c's minimum version and cipher suites to these settings.
func (s Settings) ApplyTo(c *tls.Config) {
	c.MinVersion = s.MinVersion
	c.CipherSuites = s.CipherSuiteIDs()
}

// Equal reports whether s and o serve the same: the same profile, version and suites, and the
// same problem (so that a change of the problem's wording is noticed too).
func (s Settings) Equal(o Settings) bool {
	return s.Profile == o.Profile && s.MinVersion == o.MinVersion && s.Problem == o.Problem &&
		slices.Equal(s.CipherSuites, o.CipherSuites)
}

// FromAPIServer returns the profile of an OpenShift APIServer (the one named cluster), nil when
// a is nil or sets none.
func FromAPIServer(a *configv1.APIServer) *configv1.TLSSecurityProfile {
	if a == nil {
		return nil
	}
	return a.Spec.TLSSecurityProfile
}

// FromHostedControlPlane returns the profile a HostedControlPlane sets for the hosted cluster's
// API server (spec.configuration.apiServer.tlsSecurityProfile), nil when unset; HyperShift's
// own components follow the same field.
func FromHostedControlPlane(hcp *hyperv1.HostedControlPlane) *configv1.TLSSecurityProfile {
	if hcp == nil || hcp.Spec.Configuration == nil || hcp.Spec.Configuration.APIServer == nil {
		return nil
	}
	return hcp.Spec.Configuration.APIServer.TLSSecurityProfile
}
