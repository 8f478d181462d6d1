package openstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/cloudsyaml"
)

// decoy is in every value the fuzz environment offers to clouds.Parse behind parseCloud's back; it
// must never reach a parsed cloud.
const decoy = "decoy-from-the-environment"

// secretMark is wrapped around each secret of a cloud entry to find it in error texts.
const secretMark = "Qz7secretMark"

// FuzzParseCloud checks parseCloud on arbitrary clouds.yaml bytes and cloud names:
//
//   - it never panics and returns either a cloud or an *Error, whose reason is one of those a
//     clouds.yaml can cause, whose text is a single bounded line and whose message is its
//     reason's own;
//   - a YAML decoding error is told in cloudsyaml's words, which name no value of the file;
//   - the password, application credential secret and token never appear in an error text;
//   - a parsed cloud holds the values of the selected entry as cloudsyaml decodes them (re-encoding
//     the entry for clouds.Parse changes nothing), and nothing from the environment or the
//     file system that parseCloud promises to ignore (OS_CLOUD, OS_REGION_NAME, OS_INTERFACE,
//     OS_CLIENT_CONFIG_FILE, clouds-public.yaml): decoys are set for all of them.
//
// Its seeds are under testdata/fuzz/FuzzParseCloud; `make fuzz` explores further.
func FuzzParseCloud(f *testing.F) {
	dir := f.TempDir()
	decoyCloud := "clouds:\n  openstack:\n    auth:\n      auth_url: https://" + decoy + ".example.com/v3\n" +
		"      password: " + decoy + "\n    region_name: " + decoy + "\n"
	decoyPublic := "public-clouds:\n  some-public-cloud:\n    region_name: " + decoy + "\n    interface: admin\n"
	for path, content := range map[string]string{
		"clouds.yaml":                               decoyCloud,
		"secure.yaml":                               decoyCloud,
		"openstack/clouds.yaml":                     decoyCloud,
		"openstack/clouds-public.yaml":              decoyPublic,
		"home/.config/openstack/clouds-public.yaml": decoyPublic,
	} {
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	f.Setenv("OS_CLOUD", "openstack")
	f.Setenv("OS_REGION_NAME", decoy)
	f.Setenv("OS_INTERFACE", "admin")
	f.Setenv("OS_CLIENT_CONFIG_FILE", filepath.Join(dir, "clouds.yaml"))
	f.Setenv("XDG_CONFIG_HOME", dir)
	f.Setenv("HOME", filepath.Join(dir, "home"))
	// parseCloud documents that clouds.Parse always reads these; the operator leaves them unset.
	f.Setenv("OS_CACERT", "")
	f.Setenv("OS_CERT", "")
	f.Setenv("OS_KEY", "")

	f.Fuzz(func(t *testing.T, data []byte, cloudName string) {
		all, decodeErr := cloudsyaml.Decode(data)
		cloud, selected := all.Clouds[cloudName]
		if decodeErr == nil && selected && cloud.ClientCertFile != "" && cloud.ClientKeyFile != "" {
			// clouds.Parse would read these files; the client tests cover client certificates.
			t.Skip()
		}

		p, err := parseCloud(data, cloudName)
		if (p == nil) == (err == nil) {
			t.Fatalf("parseCloud returned %v and %v: want exactly one of a cloud and an error", p, err)
		}
		if err != nil {
			if msg := checkParseError(err, decodeErr); msg != "" {
				t.Fatal(msg)
			}
		} else {
			if decodeErr != nil || !selected {
				t.Fatalf("parseCloud parsed a cloud that cloudsyaml does not find (%v)", decodeErr)
			}
			if msg := checkParsed(p, cloud); msg != "" {
				t.Fatal(msg)
			}
		}

		if decodeErr == nil && selected {
			if msg := checkSecretsScrubbed(data, cloudName, cloud); msg != "" {
				t.Fatal(msg)
			}
		}
	})
}

// checkParseError says what is wrong with an error of parseCloud, or "".
func checkParseError(err, decodeErr error) string {
	var e *Error
	if !errors.As(err, &e) {
		return fmt.Sprintf("error %v (%T) is not an *Error", err, err)
	}
	switch e.Reason {
	case ReasonInvalidCloudsYAML, ReasonCloudNotFound, ReasonMissingAuthFields:
	default:
		return fmt.Sprintf("error %q has reason %q, which a clouds.yaml cannot cause", err, e.Reason)
	}
	if decodeErr != nil && e.Reason != ReasonInvalidCloudsYAML && e.Reason != ReasonCloudNotFound {
		return fmt.Sprintf("cloudsyaml refuses the input (%v), but the error is %q", decodeErr, err)
	}
	if e.Op != "parsing clouds.yaml" {
		return fmt.Sprintf("error %q has op %q", err, e.Op)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		return fmt.Sprintf("error %q is not a single line", err)
	}
	if n := utf8.RuneCountInString(e.detail); n > maxDetail+1 {
		return fmt.Sprintf("error detail is %d runes long, more than %d: %q", n, maxDetail, e.detail)
	}
	if got, want := Message(Classify(err)), messages[e.Reason]; got != want {
		return fmt.Sprintf("error %q has message %q, want %q", err, got, want)
	}
	// Blank data is refused before it is decoded.
	if decodeErr != nil && e.Reason == ReasonInvalidCloudsYAML && e.detail != scrub(decodeErr.Error(), nil) && e.detail != "clouds.yaml is empty" {
		return fmt.Sprintf("error %q does not tell cloudsyaml's %q", err, decodeErr)
	}
	return ""
}

// checkParsed says how p differs from what the entry cloud asks for, or "".
func checkParsed(p *parsedCloud, cloud clouds.Cloud) string {
	// The decoy cannot come from the input: the fuzzer does not know it, and the seeds do not
	// hold it.
	a := cloud.AuthInfo
	if a == nil {
		return "a cloud without auth was parsed"
	}
	endpointType := cloud.EndpointType
	if endpointType == "" {
		endpointType = cloud.Interface
	}
	availability := gophercloud.AvailabilityPublic
	switch endpointType {
	case "internal", "internalURL":
		availability = gophercloud.AvailabilityInternal
	case "admin", "adminURL":
		availability = gophercloud.AvailabilityAdmin
	}
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"auth_url", p.auth.IdentityEndpoint, a.AuthURL},
		{"username", p.auth.Username, a.Username},
		{"user_id", p.auth.UserID, a.UserID},
		{"password", p.auth.Password, a.Password},
		{"token", p.auth.TokenID, a.Token},
		{"application_credential_id", p.auth.ApplicationCredentialID, a.ApplicationCredentialID},
		{"application_credential_name", p.auth.ApplicationCredentialName, a.ApplicationCredentialName},
		{"application_credential_secret", p.auth.ApplicationCredentialSecret, a.ApplicationCredentialSecret},
		{"region_name", p.endpoint.Region, cloud.RegionName},
		{"interface", string(p.endpoint.Availability), string(availability)},
	} {
		if c.got != c.want {
			return fmt.Sprintf("parsed %s is %q, want %q", c.name, c.got, c.want)
		}
	}
	if parsed := fmt.Sprintf("%+v %+v", p.auth, p.endpoint); strings.Contains(parsed, decoy) {
		return "a value from the decoy environment or files was parsed: " + parsed
	}
	if want := cloud.Verify != nil && !*cloud.Verify; p.insecure != want {
		return fmt.Sprintf("parsed insecure is %v, want %v", p.insecure, want)
	}
	for _, s := range []string{a.Password, a.ApplicationCredentialSecret, a.Token} {
		if !slices.Contains(p.secrets, s) {
			return "a secret of the cloud is not among those scrubbed from errors"
		}
	}
	unscoped := p.auth.Scope == nil || *p.auth.Scope == gophercloud.AuthScope{}
	if want := !(a.Token != "" && unscoped); p.auth.AllowReauth != want {
		return fmt.Sprintf("parsed AllowReauth is %v, want %v", p.auth.AllowReauth, want)
	}
	return ""
}

// checkSecretsScrubbed parses the entry again with each of its secrets wrapped in secretMark,
// and says where a mark shows in the error text, or "". The mark makes a secret recognisable
// even when an error quotes it escaped or in part.
func checkSecretsScrubbed(data []byte, cloudName string, cloud clouds.Cloud) string {
	if cloud.AuthInfo == nil || strings.Contains(string(data), secretMark) || strings.Contains(cloudName, secretMark) {
		return ""
	}
	a := *cloud.AuthInfo
	marked := 0
	for _, s := range []*string{&a.Password, &a.ApplicationCredentialSecret, &a.Token} {
		if *s != "" {
			*s = secretMark + *s + secretMark
			marked++
		}
	}
	if marked == 0 {
		return ""
	}
	cloud.AuthInfo = &a
	out, err := cloudsyaml.Encode(clouds.Clouds{Clouds: map[string]clouds.Cloud{cloudName: cloud}})
	if err != nil {
		return ""
	}
	if strings.Count(string(out), secretMark) != 2*marked {
		// A mark also shows outside the secrets (an alias, say): an error may then name it.
		return ""
	}
	if _, err := parseCloud(out, cloudName); err != nil && strings.Contains(err.Error(), secretMark) {
		return fmt.Sprintf("error %q shows a secret of:\n%s", err, out)
	}
	return ""
}
