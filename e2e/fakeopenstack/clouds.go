package fakeopenstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"sigs.k8s.io/yaml"
)

// CloudOptions describes the clouds.yaml entry that CloudsYAML writes for this server.
type CloudOptions struct {
	// CloudName is the key under "clouds" (default "openstack", the name OpenShift's installer
	// always uses).
	CloudName string
	// Versionless writes the auth_url without /v3, so clients do Keystone version discovery first.
	Versionless bool
	// User authenticates with a password (default: the first configured user). Set Password to
	// something else to get a rejected login.
	User *User
	// AppCredential, when set, authenticates with an application credential instead of a
	// password: by ID when it has one, otherwise by name plus owning user.
	AppCredential *AppCredential
	// Region is region_name (default: the server's region).
	Region string
	// Interface is the endpoint interface (default: not written, which means public).
	Interface string
	// CACertPath is written as cacert when non-empty.
	CACertPath string
	// BaseURL replaces the server's URL in auth_url, for a client that reaches the fake through
	// a listener given to Serve, for example "https://10.200.1.2" inside a network namespace.
	BaseURL string
}

// CloudsYAML renders a clouds.yaml that points at this server. Keys come out sorted, as in the
// installer-made Secret (it marshals with sigs.k8s.io/yaml too).
func (s *Server) CloudsYAML(o CloudOptions) ([]byte, error) {
	name := o.CloudName
	if name == "" {
		name = "openstack"
	}
	base := s.URL()
	if o.BaseURL != "" {
		base = strings.TrimSuffix(o.BaseURL, "/")
	}
	authURL := base + "/identity/v3"
	if o.Versionless {
		authURL = base + "/identity"
	}
	region := o.Region
	if region == "" {
		region = s.opts.Region
	}

	cloud := clouds.Cloud{
		RegionName:         region,
		Interface:          o.Interface,
		IdentityAPIVersion: "3",
		CACertFile:         o.CACertPath,
	}
	switch ac := o.AppCredential; {
	case ac != nil:
		cloud.AuthType = clouds.AuthV3ApplicationCredential
		cloud.AuthInfo = &clouds.AuthInfo{AuthURL: authURL, ApplicationCredentialSecret: ac.Secret}
		if ac.ID != "" {
			cloud.AuthInfo.ApplicationCredentialID = ac.ID
		} else {
			cloud.AuthInfo.ApplicationCredentialName = ac.Name
			cloud.AuthInfo.Username = ac.UserName
			cloud.AuthInfo.UserDomainName = "Default"
		}
	default:
		u := o.User
		if u == nil {
			u = &s.opts.Users[0]
		}
		domain := u.DomainName
		if domain == "" {
			domain = "Default"
		}
		cloud.AuthType = clouds.AuthPassword
		cloud.AuthInfo = &clouds.AuthInfo{
			AuthURL:        authURL,
			Username:       u.Name,
			Password:       u.Password,
			ProjectID:      s.opts.ProjectID,
			ProjectName:    s.opts.ProjectName,
			UserDomainName: domain,
		}
	}

	out, err := yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{name: cloud}})
	if err != nil {
		return nil, fmt.Errorf("marshalling clouds.yaml: %w", err)
	}
	return out, nil
}

// WriteCloudsYAML writes the CA as ca.pem and a clouds.yaml whose cacert names it into dir, and
// returns the clouds.yaml path. This is the shape a real driver pod sees (a mounted CA file named
// by cacert), for the local run and for tests of code that reads files.
func (s *Server) WriteCloudsYAML(dir string, o CloudOptions) (string, error) {
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, s.CACertPEM(), 0o600); err != nil {
		return "", fmt.Errorf("writing fake OpenStack CA: %w", err)
	}
	o.CACertPath = caPath
	data, err := s.CloudsYAML(o)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "clouds.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing clouds.yaml: %w", err)
	}
	return path, nil
}
