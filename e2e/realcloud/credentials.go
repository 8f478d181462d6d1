package realcloud

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	volservices "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"
	computeazs "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/applicationcredentials"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// What a cloud's users and administrators do to credentials while clusters use them: the
// member makes and deletes application credentials, the admin changes the member's password and
// lets it see more of Cinder. Keystone decides a token's roles when it validates the token, not
// when it issues it (the fernet token names only user and project), except for an application
// credential's, which are at most the roles the credential was made with. A service's
// keystonemiddleware caches a validation for token_cache_time (300 s): a token it has seen keeps
// the roles it had then at that service for up to five minutes.

// identityAs returns an identity client authenticated as the member (admin false) or the admin.
func (c *Cloud) identityAs(ctx context.Context, admin bool) (*gophercloud.ServiceClient, error) {
	var provider *gophercloud.ProviderClient
	var err error
	if admin {
		provider, err = c.adminClient(ctx)
	} else {
		provider, err = c.Client(ctx, c.Member())
	}
	if err != nil {
		return nil, err
	}
	return openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{Region: c.opts.Region})
}

// NewAppCredential makes, as the member user, an application credential named name (new among
// the member's), which carries the member's roles in its project as they are now, and returns
// a clouds.yaml entry for it, shaped like AppCredential's, and its ID for DeleteAppCredential.
// It returns once the credential authenticates.
func (c *Cloud) NewAppCredential(ctx context.Context, name string) (clouds.Cloud, string, error) {
	id, err := c.identityAs(ctx, false)
	if err != nil {
		return clouds.Cloud{}, "", err
	}
	ac, err := applicationcredentials.Create(ctx, id, c.memberID, applicationcredentials.CreateOpts{
		Name: name, Description: "made by realcloud's NewAppCredential",
	}).Extract()
	if err != nil {
		return clouds.Cloud{}, "", fmt.Errorf("creating application credential %s: %w", name, err)
	}
	cloud := c.appCredentialCloud(appCredential{id: ac.ID, secret: ac.Secret})
	if _, err := c.Client(ctx, cloud); err != nil {
		return clouds.Cloud{}, ac.ID, fmt.Errorf("checking new application credential %s: %w", name, err)
	}
	return cloud, ac.ID, nil
}

// DeleteAppCredential deletes, as the member user, the application credential with ID id; one
// that is gone already is no error. Keystone refuses the credential at once; a token made with
// it before stays valid until it expires, as any token of a deleted credential does.
func (c *Cloud) DeleteAppCredential(ctx context.Context, id string) error {
	client, err := c.identityAs(ctx, false)
	if err != nil {
		return err
	}
	err = applicationcredentials.Delete(ctx, client, c.memberID, id).ExtractErr()
	if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return fmt.Errorf("deleting application credential %s: %w", id, err)
	}
	return nil
}

// SetMemberPassword has the admin change the member user's password, as an administrator
// rotating a leaked one does. Keystone then refuses the old password and revokes every token
// the member holds, its application credentials' tokens too (the credentials themselves stay
// valid: a client re-authenticates with them). Member, WriteOpenRC and the cloud's member-side
// helpers use the new password from then on. It returns once a token made with the new
// password is accepted by Nova.
func (c *Cloud) SetMemberPassword(ctx context.Context, password string) error {
	if password == "" {
		return fmt.Errorf("setting the member's password: empty password")
	}
	id, err := c.identityAs(ctx, true)
	if err != nil {
		return err
	}
	if _, err := users.Update(ctx, id, c.memberID, users.UpdateOpts{Password: password}).Extract(); err != nil {
		return fmt.Errorf("setting the member's password: %w", err)
	}
	c.mu.Lock()
	c.secrets.member = password
	c.mu.Unlock()
	// Keystone records the revocation with a second's precision, and a token it issues within
	// that second may count as revoked: the wait is for one that outlives it.
	return c.pollMember(ctx, "a token of the member's new password accepted by Nova", func(provider *gophercloud.ProviderClient) error {
		compute, err := openstack.NewComputeV2(provider, gophercloud.EndpointOpts{Region: c.opts.Region})
		if err != nil {
			return err
		}
		_, err = computeazs.List(compute).AllPages(ctx)
		return err
	})
}

// AllowServiceListing lets the member user list Cinder's services (allow) or stops letting it,
// as a cloud's administrators do for a user whose tooling must see which of Cinder's services
// run: the admin grants or revokes ServiceListerRole, which the cloud's Cinder policy names, on
// the member's project. It returns once a new token of the member's password lists Cinder's
// services, or is refused (403).
//
// An application credential made while the role is granted keeps the role only while it is
// granted; one made before never has it. A token a service has seen already keeps the roles
// it had then for up to token_cache_time (five minutes) at that service. In this Cinder the
// role makes the member's Cinder requests admin contexts (see cinderPolicy): Cinder takes any
// list filter from them, not only resource_filters.json's, and all_tenants lists every
// project's volumes.
func (c *Cloud) AllowServiceListing(ctx context.Context, allow bool) error {
	id, err := c.identityAs(ctx, true)
	if err != nil {
		return err
	}
	if allow {
		err = roles.Assign(ctx, id, c.listerID, roles.AssignOpts{UserID: c.memberID, ProjectID: c.project}).ExtractErr()
	} else {
		err = roles.Unassign(ctx, id, c.listerID, roles.UnassignOpts{UserID: c.memberID, ProjectID: c.project}).ExtractErr()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			err = nil // not granted
		}
	}
	if err != nil {
		return fmt.Errorf("setting the member's role %s to %t: %w", ServiceListerRole, allow, err)
	}
	what := "a new token of the member refused Cinder's services"
	if allow {
		what = "a new token of the member listing Cinder's services"
	}
	return c.pollMember(ctx, what, func(provider *gophercloud.ProviderClient) error {
		volume, err := openstack.NewBlockStorageV3(provider, gophercloud.EndpointOpts{Region: c.opts.Region})
		if err != nil {
			return err
		}
		_, err = volservices.List(volume, nil).AllPages(ctx)
		switch {
		case allow && err != nil:
			return err
		case !allow && err == nil:
			return fmt.Errorf("the member lists Cinder's services")
		case !allow && !gophercloud.ResponseCodeIs(err, http.StatusForbidden):
			return err
		}
		return nil
	})
}

// pollMember authenticates as the member with a new token every half second, up to 30 s, until
// check passes with it: a new token is one no service has cached a validation of.
func (c *Cloud) pollMember(ctx context.Context, what string, check func(*gophercloud.ProviderClient) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	return procs.Poll(ctx, procs.Wait{What: what, Interval: 500 * time.Millisecond, Last: func() error { return last }},
		func() (bool, error) {
			provider, err := c.Client(ctx, c.Member())
			if err == nil {
				// No re-authentication: a refused token must show as refused.
				provider.ReauthFunc = nil
				err = check(provider)
			}
			last = err
			return err == nil, nil
		})
}
