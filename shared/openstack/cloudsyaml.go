package openstack

import (
	"bytes"
	"crypto/tls"
	"net/url"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudsyaml"
)

// parsedCloud is what NewClient needs from clouds.yaml.
type parsedCloud struct {
	auth     gophercloud.AuthOptions
	endpoint gophercloud.EndpointOpts
	// clientCerts come from the cloud's cert and key files, if it names both.
	clientCerts []tls.Certificate
	// insecure is "verify: false".
	insecure bool
	// secrets are scrubbed from every error text.
	secrets []string
}

// emptyPublicClouds stands in for clouds-public.yaml: without it, a cloud entry with "profile" or
// "cloud" makes Parse search ./, $XDG_CONFIG_HOME (or $HOME/.config) and /etc for that file.
const emptyPublicClouds = "public-clouds: {}\n"

// parseCloud turns clouds.yaml bytes into gophercloud options without touching the file system or
// the environment, as far as gophercloud v2.15.0 allows:
//
//   - The YAML is decoded here first, by cloudsyaml.Decode: the driver's decoder, the one the
//     controlplane manager has checked the file with, into the types clouds.Parse uses. The
//     failures callers must tell apart (bad YAML, unknown cloud, missing fields) are so typed
//     instead of being recognised from Parse's error strings.
//   - cacert is removed from the entry: the CA comes from Config.CACertPEM. An installer-made
//     clouds.yaml names /etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem,
//     a path that exists in the driver's pods but not in the operator's, and Parse fails on a
//     cacert it cannot read.
//   - Only the selected entry is re-encoded (cloudsyaml.Encode) and handed to Parse through
//     WithCloudsYAML, so Parse reads no clouds.yaml and no secure.yaml from disk
//     (OS_CLIENT_CONFIG_FILE is then unused).
//   - WithCloudName overrides OS_CLOUD; WithRegion("") and WithEndpointType("") override
//     OS_REGION_NAME and OS_INTERFACE (Parse prefers a non-empty option, then the YAML value, so
//     an explicitly empty option means "the YAML value"); an empty clouds-public.yaml stops the
//     public-cloud file search.
//
// What remains: Parse's computeTLSConfig always consults OS_CACERT, OS_CERT and OS_KEY and there
// is no option to turn that off. The RootCAs it builds are discarded (NewClient uses only
// CACertPEM), and its client certificates are used only when the YAML names cert and key itself,
// so those variables cannot change whom the client trusts or how it identifies; a dangling
// OS_CACERT can still make NewClient fail with InvalidCloudsYAML. The operator's Deployment does
// not set them.
func parseCloud(data []byte, cloudName string) (*parsedCloud, error) {
	const op = "parsing clouds.yaml"
	if cloudName == "" {
		return nil, &Error{Reason: ReasonCloudNotFound, Op: op, detail: "the cloud name is empty"}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{Reason: ReasonInvalidCloudsYAML, Op: op, detail: "clouds.yaml is empty"}
	}

	all, err := cloudsyaml.Decode(data)
	if err != nil {
		// Its text names a field and a line, never a value of the file.
		return nil, &Error{Reason: ReasonInvalidCloudsYAML, Op: op, detail: scrub(err.Error(), nil)}
	}
	if all.Clouds == nil {
		return nil, &Error{Reason: ReasonInvalidCloudsYAML, Op: op, detail: `clouds.yaml has no "clouds" map`}
	}
	cloud, ok := all.Clouds[cloudName]
	if !ok {
		// Quoted with Go escapes and bounded: the name comes from the HostedControlPlane and
		// may hold a newline, while the error text must stay one short line.
		detail := scrub("cloud "+strconv.Quote(cloudName)+" not found in clouds.yaml", nil)
		return nil, &Error{Reason: ReasonCloudNotFound, Op: op, detail: detail}
	}

	a := cloud.AuthInfo
	if a == nil {
		a = &clouds.AuthInfo{}
	}
	secrets := []string{a.Password, a.ApplicationCredentialSecret, a.Token}
	if err := checkAuthFields(a); err != nil {
		return nil, err
	}

	// The YAML values of cert and key decide whether a client certificate is used; see above.
	wantClientCert := cloud.ClientCertFile != "" || cloud.ClientKeyFile != ""
	cloud.CACertFile = ""
	selected, err := cloudsyaml.Encode(clouds.Clouds{Clouds: map[string]clouds.Cloud{cloudName: cloud}})
	if err != nil {
		return nil, newError(op, ReasonInvalidCloudsYAML, err, secrets...)
	}

	ao, eo, tlsConfig, err := clouds.Parse(
		clouds.WithCloudName(cloudName),
		clouds.WithCloudsYAML(bytes.NewReader(selected)),
		clouds.WithCloudsPublicYAML(strings.NewReader(emptyPublicClouds)),
		clouds.WithRegion(""),
		clouds.WithEndpointType(""),
	)
	if err != nil {
		return nil, newError(op, ReasonInvalidCloudsYAML, err, secrets...)
	}

	p := &parsedCloud{auth: ao, endpoint: eo, secrets: secrets}
	if tlsConfig != nil {
		p.insecure = tlsConfig.InsecureSkipVerify
		if wantClientCert {
			p.clientCerts = tlsConfig.Certificates
		}
	}
	// Parse never sets AllowReauth. Without it a token that expires or is revoked gives a 401 that
	// is returned as is, and a long-running operator would be locked out until restart. With it,
	// gophercloud requests a new token once per failed request and retries. The one case
	// gophercloud refuses is a bare token with no scope ("cannot use AllowReauth, when the token ID
	// is defined and auth scope is not set"): a token cannot be renewed from itself anyway.
	p.auth.AllowReauth = !(ao.TokenID != "" && (ao.Scope == nil || *ao.Scope == gophercloud.AuthScope{}))
	return p, nil
}

// checkAuthFields reports missing fields by name only, never by value.
func checkAuthFields(a *clouds.AuthInfo) error {
	const op = "parsing clouds.yaml"
	missing := func(detail string) error {
		return &Error{Reason: ReasonMissingAuthFields, Op: op, detail: detail}
	}
	if a.AuthURL == "" {
		return missing("auth.auth_url is missing")
	}
	u, err := url.Parse(a.AuthURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// url.Parse errors quote the URL, which may carry user:password@; say only what is wrong.
		return &Error{Reason: ReasonInvalidCloudsYAML, Op: op, detail: "auth.auth_url is not an http(s) URL"}
	}
	switch {
	case a.Token != "":
		return nil
	case a.ApplicationCredentialID != "" || a.ApplicationCredentialName != "":
		if a.ApplicationCredentialSecret == "" {
			return missing("auth.application_credential_secret is missing")
		}
		if a.ApplicationCredentialID == "" && a.Username == "" && a.UserID == "" {
			return missing("auth.application_credential_name needs auth.username or auth.user_id")
		}
		return nil
	case a.Username != "" || a.UserID != "":
		if a.Password == "" {
			return missing("auth.password is missing")
		}
		domain := a.UserDomainName + a.UserDomainID + a.DomainName + a.DomainID
		if a.UserID == "" && domain == "" {
			// Keystone needs the domain of a user named by name; gophercloud would fail later with
			// a less helpful message.
			return missing("auth.username needs auth.user_domain_name, auth.user_domain_id, " +
				"auth.domain_name or auth.domain_id")
		}
		return nil
	default:
		return missing("auth has no credential: set username and password, " +
			"or application_credential_id and application_credential_secret")
	}
}
