package realcloud

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/applicationcredentials"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
)

// Client authenticates with the clouds.yaml entry cloud (Member, AppCredential) against the
// public endpoints, from the host: its HTTP client is HTTPClient's.
func (c *Cloud) Client(ctx context.Context, cloud clouds.Cloud) (*gophercloud.ProviderClient, error) {
	a := cloud.AuthInfo
	return c.authenticate(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: a.AuthURL, Username: a.Username, Password: a.Password,
		DomainName: a.UserDomainName, TenantName: a.ProjectName,
		ApplicationCredentialID: a.ApplicationCredentialID, ApplicationCredentialSecret: a.ApplicationCredentialSecret,
	})
}

// adminClient authenticates as the bootstrap admin, in project admin. Only the setup uses it.
func (c *Cloud) adminClient(ctx context.Context) (*gophercloud.ProviderClient, error) {
	return c.authenticate(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: c.authURL, Username: "admin", Password: c.secrets.admin,
		DomainName: "Default", TenantName: "admin",
	})
}

func (c *Cloud) authenticate(ctx context.Context, opts gophercloud.AuthOptions) (*gophercloud.ProviderClient, error) {
	provider, err := openstack.NewClient(opts.IdentityEndpoint)
	if err != nil {
		return nil, err
	}
	provider.HTTPClient = *c.HTTPClient()
	opts.AllowReauth = true
	if err := openstack.Authenticate(ctx, provider, opts); err != nil {
		return nil, fmt.Errorf("authenticating as %s%s: %w", opts.Username, opts.ApplicationCredentialID, err)
	}
	return provider, nil
}

// endpoint describes one catalog service with its public and internal URLs.
type endpoint struct {
	typ, name        string
	public, internal string
}

// setupIdentity writes what an installer of a cloud and then its admin would: the catalog
// (public https, internal http), the service project with a user per service, a project with
// a member-role user, and that user's application credential.
func (c *Cloud) setupIdentity(ctx context.Context) error {
	admin, err := c.adminClient(ctx)
	if err != nil {
		return err
	}
	id, err := openstack.NewIdentityV3(admin, gophercloud.EndpointOpts{Region: c.opts.Region})
	if err != nil {
		return err
	}
	stubInternal := c.internalURL(c.ports.stub)
	cinderPath := "/v3/%(project_id)s"
	catalog := []endpoint{
		{"compute", "nova", c.proxies.publicURL(svcNova) + "/v2.1", c.internalURL(c.ports.nova) + "/v2.1"},
		{"placement", "placement", c.proxies.publicURL(svcPlacement), c.internalURL(c.ports.placement)},
		// Cinder under both names real catalogs carry: gophercloud looks for block-storage,
		// Nova's [cinder] catalog_info for volumev3.
		{"block-storage", "cinder", c.proxies.publicURL(svcCinder) + cinderPath, c.internalURL(c.ports.cinder) + cinderPath},
		{"volumev3", "cinderv3", c.proxies.publicURL(svcCinder) + cinderPath, c.internalURL(c.ports.cinder) + cinderPath},
		{"network", "neutron", c.proxies.publicURL(svcStub), stubInternal},
		{"image", "glance", c.proxies.publicURL(svcStub), stubInternal},
	}
	for _, e := range catalog {
		svc, err := services.Create(ctx, id, services.CreateOpts{Type: e.typ, Name: e.name}).Extract()
		if err != nil {
			return fmt.Errorf("creating service %s: %w", e.typ, err)
		}
		for iface, url := range map[gophercloud.Availability]string{gophercloud.AvailabilityPublic: e.public, gophercloud.AvailabilityInternal: e.internal} {
			if _, err := endpoints.Create(ctx, id, endpoints.CreateOpts{
				Availability: iface, Region: c.opts.Region, URL: url, ServiceID: svc.ID,
			}).Extract(); err != nil {
				return fmt.Errorf("creating %s endpoint of %s: %w", iface, e.typ, err)
			}
		}
	}

	roleIDs := map[string]string{}
	for _, name := range []string{"admin", "member"} {
		pages, err := roles.List(id, roles.ListOpts{Name: name}).AllPages(ctx)
		if err != nil {
			return fmt.Errorf("listing roles: %w", err)
		}
		found, err := roles.ExtractRoles(pages)
		if err != nil || len(found) != 1 {
			return fmt.Errorf("finding role %s (bootstrap creates it): %d found, %w", name, len(found), err)
		}
		roleIDs[name] = found[0].ID
	}
	svcRole, err := roles.Create(ctx, id, roles.CreateOpts{Name: serviceRole}).Extract()
	if err != nil {
		return fmt.Errorf("creating role %s: %w", serviceRole, err)
	}
	roleIDs[serviceRole] = svcRole.ID
	// Nobody holds it until AllowServiceListing grants it.
	lister, err := roles.Create(ctx, id, roles.CreateOpts{Name: ServiceListerRole}).Extract()
	if err != nil {
		return fmt.Errorf("creating role %s: %w", ServiceListerRole, err)
	}
	c.listerID = lister.ID

	newProject := func(name string) (string, error) {
		p, err := projects.Create(ctx, id, projects.CreateOpts{Name: name, DomainID: "default"}).Extract()
		if err != nil {
			return "", fmt.Errorf("creating project %s: %w", name, err)
		}
		return p.ID, nil
	}
	newUser := func(name, password, project string, roleNames ...string) (string, error) {
		u, err := users.Create(ctx, id, users.CreateOpts{Name: name, DomainID: "default", DefaultProjectID: project, Password: password}).Extract()
		if err != nil {
			return "", fmt.Errorf("creating user %s: %w", name, err)
		}
		for _, r := range roleNames {
			if err := roles.Assign(ctx, id, roleIDs[r], roles.AssignOpts{UserID: u.ID, ProjectID: project}).ExtractErr(); err != nil {
				return "", fmt.Errorf("granting %s role %s: %w", name, r, err)
			}
		}
		return u.ID, nil
	}
	serviceID, err := newProject(serviceProject)
	if err != nil {
		return err
	}
	// Service users are admins of the service project, as every installer makes them; Nova's
	// and Cinder's also hold the service role their service tokens must carry.
	for user, extra := range map[string][]string{"nova": {serviceRole}, "cinder": {serviceRole}, "placement": nil} {
		if _, err := newUser(user, c.secrets.service, serviceID, append([]string{"admin"}, extra...)...); err != nil {
			return err
		}
	}
	if c.project, err = newProject(DefaultProject); err != nil {
		return err
	}
	if c.memberID, err = newUser(DefaultUser, c.secrets.member, c.project, "member"); err != nil {
		return err
	}

	// An application credential is created by its user, never by an admin on its behalf.
	member, err := c.Client(ctx, c.Member())
	if err != nil {
		return err
	}
	memberID3, err := openstack.NewIdentityV3(member, gophercloud.EndpointOpts{Region: c.opts.Region})
	if err != nil {
		return err
	}
	ac, err := applicationcredentials.Create(ctx, memberID3, c.memberID, applicationcredentials.CreateOpts{
		Name: "realcloud", Description: "what a cluster's credentials Secret can carry instead of a password",
	}).Extract()
	if err != nil {
		return fmt.Errorf("creating application credential: %w", err)
	}
	c.appCred = appCredential{id: ac.ID, secret: ac.Secret}
	return nil
}
