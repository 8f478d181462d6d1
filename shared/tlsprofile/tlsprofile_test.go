package tlsprofile

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
)

// tls13Suites are the TLS 1.3 suites every predefined profile names.
var tls13Suites = []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

// intermediateSuites are Intermediate's suites by IANA name, in the profile's order.
var intermediateSuites = append(slices.Clone(tls13Suites),
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
)

func TestIANACipherSuites(t *testing.T) {
	tests := []struct {
		name          string
		in            []string
		kept, dropped []string
	}{
		{
			name: "When Intermediate's OpenSSL names are converted, it should give their IANA names in order",
			in:   configv1.TLSProfiles[configv1.TLSProfileIntermediateType].Ciphers,
			kept: intermediateSuites,
		},
		{
			name: "When Modern's ciphers are converted, it should keep the TLS 1.3 names as they are",
			in:   configv1.TLSProfiles[configv1.TLSProfileModernType].Ciphers,
			kept: tls13Suites,
		},
		{
			name:    "When Old's ciphers are converted, it should drop the CBC suites with SHA-384 and AES-256 with SHA-256, which Go lacks",
			in:      []string{"ECDHE-RSA-AES256-SHA384", "ECDHE-ECDSA-AES256-SHA384", "AES256-SHA256", "AES128-SHA256", "DES-CBC3-SHA"},
			kept:    []string{"TLS_RSA_WITH_AES_128_CBC_SHA256", "TLS_RSA_WITH_3DES_EDE_CBC_SHA"},
			dropped: []string{"ECDHE-RSA-AES256-SHA384", "ECDHE-ECDSA-AES256-SHA384", "AES256-SHA256"},
		},
		{
			name:    "When a Custom profile names DHE, RC4 or unknown ciphers, it should drop them",
			in:      []string{"DHE-RSA-AES128-GCM-SHA256", "RC4-SHA", "ECDHE-RSA-RC4-SHA", "NOT-A-CIPHER", "ECDHE-RSA-AES128-GCM-SHA256"},
			kept:    []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
			dropped: []string{"DHE-RSA-AES128-GCM-SHA256", "RC4-SHA", "ECDHE-RSA-RC4-SHA", "NOT-A-CIPHER"},
		},
		{
			name: "When a Custom profile gives IANA names or a name twice, it should keep each once",
			in:   []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "TLS_AES_128_GCM_SHA256"},
			kept: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"},
		},
		{
			name: "When no cipher is given, it should give none",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := IANACipherSuites(tt.in)
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("kept = %v, want %v", kept, tt.kept)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped = %v, want %v", dropped, tt.dropped)
			}
		})
	}
}

// TestPredefinedProfilesConvert checks that every cipher of every predefined profile is either known
// to the OpenSSL table or dropped on purpose: a new openshift/api profile cipher the table does
// not know shows up here.
func TestPredefinedProfilesConvert(t *testing.T) {
	t.Run("When every predefined profile is converted, it should drop only the ciphers Go lacks", func(t *testing.T) {
		lacking := []string{"ECDHE-ECDSA-AES256-SHA384", "ECDHE-RSA-AES256-SHA384", "AES256-SHA256"}
		for typ, spec := range configv1.TLSProfiles {
			_, dropped := IANACipherSuites(spec.Ciphers)
			for _, d := range dropped {
				if !slices.Contains(lacking, d) {
					t.Errorf("profile %s: cipher %s was dropped", typ, d)
				}
			}
		}
	})
}

func TestResolve(t *testing.T) {
	custom := func(minVersion configv1.TLSProtocolVersion, ciphers ...string) *configv1.TLSSecurityProfile {
		return &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType,
			Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: minVersion, Ciphers: ciphers}}}
	}
	tests := []struct {
		name       string
		in         *configv1.TLSSecurityProfile
		profile    configv1.TLSProfileType
		minVersion uint16
		suites     []string
		problem    string
	}{
		{
			name:    "When no profile is set, it should be Intermediate",
			profile: configv1.TLSProfileIntermediateType, minVersion: tls.VersionTLS12, suites: intermediateSuites,
		},
		{
			name:    "When the profile's type is empty, it should be Intermediate",
			in:      &configv1.TLSSecurityProfile{},
			profile: configv1.TLSProfileIntermediateType, minVersion: tls.VersionTLS12, suites: intermediateSuites,
		},
		{
			name:    "When the profile is Modern, it should be TLS 1.3 with the TLS 1.3 suites",
			in:      &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType},
			profile: configv1.TLSProfileModernType, minVersion: tls.VersionTLS13, suites: tls13Suites,
		},
		{
			name:    "When the profile is Old, it should be TLS 1.0",
			in:      &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType, Old: &configv1.OldTLSProfile{}},
			profile: configv1.TLSProfileOldType, minVersion: tls.VersionTLS10,
		},
		{
			name:    "When the profile is Custom, it should take its version and ciphers",
			in:      custom(configv1.VersionTLS12, "ECDHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES128-GCM-SHA256"),
			profile: configv1.TLSProfileCustomType, minVersion: tls.VersionTLS12, suites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		},
		{
			name:    "When a Custom profile is TLS 1.3 only without ciphers, it should be served: TLS 1.3 needs no configured suite",
			in:      custom(configv1.VersionTLS13),
			profile: configv1.TLSProfileCustomType, minVersion: tls.VersionTLS13,
		},
		{
			name:    "When a Custom profile below TLS 1.3 has no cipher Go implements, it should fall back to Intermediate and say why",
			in:      custom(configv1.VersionTLS12, "DHE-RSA-AES128-GCM-SHA256", "TLS_AES_128_GCM_SHA256"),
			profile: configv1.TLSProfileIntermediateType, minVersion: tls.VersionTLS12, suites: intermediateSuites,
			problem: "The Custom TLS security profile allows TLS versions below 1.3 but none of its ciphers for them is one Go implements.",
		},
		{
			name:    "When a Custom profile has an unknown minimum version, it should fall back to Intermediate",
			in:      custom("VersionTLS14", "ECDHE-RSA-AES128-GCM-SHA256"),
			profile: configv1.TLSProfileIntermediateType, minVersion: tls.VersionTLS12, suites: intermediateSuites,
			problem: `The Custom TLS security profile's minTLSVersion "VersionTLS14" is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13.`,
		},
		{
			name:    "When a Custom profile has no custom section, it should fall back to Intermediate",
			in:      &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType},
			profile: configv1.TLSProfileIntermediateType, minVersion: tls.VersionTLS12, suites: intermediateSuites,
			problem: "The Custom TLS security profile has no custom section.",
		},
		{
			name:    "When the profile type is unknown, it should fall back to Intermediate",
			in:      &configv1.TLSSecurityProfile{Type: "Paranoid"},
			profile: configv1.TLSProfileIntermediateType, minVersion: tls.VersionTLS12, suites: intermediateSuites,
			problem: `The TLS security profile type "Paranoid" is not one of Old, Intermediate, Modern, Custom.`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Resolve(tt.in)
			if s.Profile != tt.profile || s.MinVersion != tt.minVersion || s.Problem != tt.problem {
				t.Errorf("Resolve = %s %#x %q, want %s %#x %q", s.Profile, s.MinVersion, s.Problem, tt.profile, tt.minVersion, tt.problem)
			}
			if tt.suites != nil && !slices.Equal(s.CipherSuites, tt.suites) {
				t.Errorf("suites = %v, want %v", s.CipherSuites, tt.suites)
			}
		})
	}
}

func TestKubeRBACProxyArgs(t *testing.T) {
	tests := []struct {
		name string
		in   *configv1.TLSSecurityProfile
		want []string
	}{
		{
			name: "When the profile is Intermediate, it should pass TLS 1.2 and its suites by IANA name",
			want: []string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=" + strings.Join(intermediateSuites, ",")},
		},
		{
			name: "When the profile is Modern, it should pass TLS 1.3 and the TLS 1.3 suites",
			in:   &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType},
			want: []string{"--tls-min-version=VersionTLS13", "--tls-cipher-suites=" + strings.Join(tls13Suites, ",")},
		},
		{
			name: "When a TLS 1.3 Custom profile names no cipher, it should pass no --tls-cipher-suites",
			in: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType,
				Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS13}}},
			want: []string{"--tls-min-version=VersionTLS13"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Resolve(tt.in).KubeRBACProxyArgs(); !slices.Equal(got, tt.want) {
				t.Errorf("args = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCipherSuiteIDs(t *testing.T) {
	t.Run("When the profile is Intermediate, it should give Go the six TLS 1.2 suites and no TLS 1.3 one", func(t *testing.T) {
		ids := Intermediate().CipherSuiteIDs()
		want := []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		}
		if !slices.Equal(ids, want) {
			t.Errorf("ids = %#x, want %#x", ids, want)
		}
	})
	t.Run("When the profile is Modern, it should give Go no suite: TLS 1.3 suites are not configurable", func(t *testing.T) {
		if ids := Resolve(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}).CipherSuiteIDs(); len(ids) != 0 {
			t.Errorf("ids = %#x, want none", ids)
		}
	})
}

func TestSources(t *testing.T) {
	modern := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}
	t.Run("When a HostedControlPlane sets the API server's profile, it should be the hosted cluster's profile", func(t *testing.T) {
		hcp := &hyperv1.HostedControlPlane{Spec: hyperv1.HostedControlPlaneSpec{Configuration: &hyperv1.ClusterConfiguration{
			APIServer: &configv1.APIServerSpec{TLSSecurityProfile: modern}}}}
		if got := FromHostedControlPlane(hcp); got != modern {
			t.Errorf("profile = %v, want Modern", got)
		}
	})
	t.Run("When a HostedControlPlane has no configuration, it should have no profile", func(t *testing.T) {
		if got := FromHostedControlPlane(&hyperv1.HostedControlPlane{}); got != nil {
			t.Errorf("profile = %v, want nil", got)
		}
	})
	t.Run("When there is no APIServer, it should have no profile", func(t *testing.T) {
		if got := FromAPIServer(nil); got != nil {
			t.Errorf("profile = %v, want nil", got)
		}
	})
}
