package realcloud

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// section is one [section] of an oslo.config file, its keys in order.
type section struct {
	name string
	kv   [][2]string
}

// writeINI writes sections to path.
func writeINI(path string, sections ...section) error {
	var b strings.Builder
	for _, s := range sections {
		fmt.Fprintf(&b, "[%s]\n", s.name)
		for _, kv := range s.kv {
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
		b.WriteString("\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Users of the service project, one per service, as installers create them.
const (
	serviceProject = "service"
	// serviceRole is the role Cinder requires of a service token (service_token_roles): Nova's
	// detach sends one since the fix of CVE-2023-2088, and Cinder refuses a detach without it.
	serviceRole = "service"
)

// The hosts and backends of the two zones: one nova-compute host and one Cinder NFS backend
// per zone, in the order of Options' zones.
var (
	computeHosts = []string{"compute-0", "compute-1"}
	backends     = []string{"nfs-0", "nfs-1"}
)

// volumeHost is the host name of Cinder's services; its volume backends are <volumeHost>@<backend>.
const volumeHost = "realcloud"

func (c *Cloud) db(name string) string { return filepath.Join(c.dir, "db", name+".sqlite") }

// dbURL is the SQLAlchemy URL of a database: four slashes for an absolute path. A writer waits
// up to a minute for another's lock (SQLite's default is five seconds): on two busy cores a
// service's heartbeat and a request's write do meet. Writers wait for the lock rather than fail
// only because the Python shim begins them IMMEDIATE (see sitecustomize); oslo.db's deferred
// BEGIN lets a writer that read before another's commit fail at once, whatever the timeout.
func (c *Cloud) dbURL(name string) string { return "sqlite:///" + c.db(name) + "?timeout=60" }

// novaHeartbeat is every Nova service's report_interval and service_down_time: a heartbeat a
// minute, not Nova's 10 s, since every heartbeat is a write that the API requests then wait
// for, and nothing here waits for Nova to see a service down.
var novaHeartbeat = [][2]string{{"report_interval", "60"}, {"service_down_time", "180"}}

// cinderHeartbeat is every Cinder service's report_interval and service_down_time. Cinder calls
// a service down once its last heartbeat is older than service_down_time, which is how a
// client (the operator's backup check, through os-services) learns that cinder-backup stopped:
// with Nova's minute it would take two to three minutes, which a test cannot sit out. Cinder's
// own report_interval default (10 s) and a down time of two and a half heartbeats make it 15 to
// 25 s, and still forgive one late heartbeat on two busy cores; a late second one would show a
// live backend down and fail the scheduling.
var cinderHeartbeat = [][2]string{{"report_interval", "10"}, {"service_down_time", "25"}}

// dbSection is an oslo.db section for a database: no fsync per commit, since nothing of a
// test cloud must survive a crash of the host, and every commit holds the write lock shorter.
func (c *Cloud) dbSection(group, name string) section {
	return section{group, [][2]string{{"connection", c.dbURL(name)}, {"sqlite_synchronous", "false"}}}
}

func (c *Cloud) internalURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

func (c *Cloud) transportURL() string {
	return fmt.Sprintf("rabbit://openstack:%s@127.0.0.1:%d/", c.secrets.rabbit, c.ports.amqp)
}

// authSection is a keystoneauth password section for a service user of the service project,
// against Keystone's internal endpoint.
func (c *Cloud) authSection(name, user string, extra ...[2]string) section {
	kv := [][2]string{
		{"auth_type", "password"},
		{"auth_url", c.internalURL(c.ports.keystone) + "/v3"},
		{"username", user},
		{"password", c.secrets.service},
		{"project_name", serviceProject},
		{"user_domain_name", "Default"},
		{"project_domain_name", "Default"},
	}
	return section{name, append(kv, extra...)}
}

// authtoken is keystonemiddleware's section: tokens are validated on Keystone's internal
// endpoint; the 401's WWW-Authenticate names the public one, where clients authenticate.
func (c *Cloud) authtoken(user string, extra ...[2]string) section {
	s := c.authSection("keystone_authtoken", user, extra...)
	s.kv = append(s.kv, [2]string{"www_authenticate_uri", c.proxies.publicURL(svcKeystone)})
	return s
}

// exportDir is a backend's export: the directory its volume files are in.
func (c *Cloud) exportDir(i int) string { return filepath.Join(c.dir, "exports", backends[i]) }

// share is the NFS share string a backend is configured with; no NFS server serves it.
func share(i int) string { return "127.0.0.1:/" + backends[i] }

// mountPoint is where the NFS driver expects share i: <nfs_mount_point_base>/<md5 of the share>.
func (c *Cloud) mountPoint(i int) string {
	sum := md5.Sum([]byte(share(i)))
	return filepath.Join(c.dir, "cinder", "mnt", hex.EncodeToString(sum[:]))
}

// writeConfigs writes the configuration of every service.
func (c *Cloud) writeConfigs() error {
	keystoneDir := filepath.Join(c.dir, "keystone")
	keystone := append([]section{
		{"DEFAULT", [][2]string{{"use_stderr", "true"}}},
		c.dbSection("database", "keystone"),
		{"token", [][2]string{{"provider", "fernet"}}},
		// bcrypt's fewest rounds for the passwords and application credential secrets the
		// cloud stores: at its default of 12 each password authentication costs about a fifth
		// of a second of CPU here, at 4 under a millisecond, and every client of the test
		// authenticates (the driver, the operator, the harness's waits and its hypervisor).
		{"identity", [][2]string{{"password_hash_rounds", "4"}}},
		{"fernet_tokens", [][2]string{{"key_repository", filepath.Join(keystoneDir, "fernet-keys")}}},
		{"fernet_receipts", [][2]string{{"key_repository", filepath.Join(keystoneDir, "fernet-keys")}}},
		{"credential", [][2]string{{"key_repository", filepath.Join(keystoneDir, "credential-keys")}}},
	}, commonSections(keystoneDir)...)
	if err := writeINI(filepath.Join(keystoneDir, "keystone.conf"), keystone...); err != nil {
		return err
	}

	placementDir := filepath.Join(c.dir, "placement")
	placement := append([]section{
		{"DEFAULT", [][2]string{{"use_stderr", "true"}}},
		c.dbSection("placement_database", "placement"),
		{"api", [][2]string{{"auth_strategy", "keystone"}}},
		c.authtoken("placement"),
	}, commonSections(placementDir)...)
	if err := writeINI(filepath.Join(placementDir, "placement.conf"), placement...); err != nil {
		return err
	}

	novaDir := filepath.Join(c.dir, "nova")
	region := [2]string{"region_name", c.opts.Region}
	internal := [2]string{"valid_interfaces", "internal"}
	nova := append([]section{
		{"DEFAULT", [][2]string{
			{"transport_url", c.transportURL()},
			{"state_path", novaDir},
			{"my_ip", "127.0.0.1"},
			{"host", "controller"},
			{"compute_driver", "fake.FakeDriver"},
			// The metadata API in the same process as the compute API (nova-api's default
			// enabled_apis): oslo.service forks one more worker from nova-api's parent, which
			// shares the parent's imported modules until it writes them, rather than a
			// nova-api-metadata process of its own that would import all of Nova again. It
			// costs about 75 MiB (PSS; 140 MiB RSS) once it has answered, of the cloud's 1.7 GiB.
			{"enabled_apis", "osapi_compute,metadata"},
			{"osapi_compute_listen", "127.0.0.1"},
			{"osapi_compute_listen_port", strconv.Itoa(c.ports.nova)},
			{"osapi_compute_workers", "1"},
			{"metadata_listen", "127.0.0.1"},
			{"metadata_listen_port", strconv.Itoa(c.ports.metadata)},
			{"metadata_workers", "1"},
			{"rootwrap_config", filepath.Join(novaDir, "rootwrap.conf")},
			novaHeartbeat[0], novaHeartbeat[1],
		}},
		{"wsgi", [][2]string{{"api_paste_config", filepath.Join(c.opts.PackagesDir, "nova", "api-paste.ini")}}},
		{"api", [][2]string{{"auth_strategy", "keystone"}}},
		c.dbSection("api_database", "nova_api"),
		c.dbSection("database", "nova"),
		{"conductor", [][2]string{{"workers", "1"}}},
		{"scheduler", [][2]string{{"workers", "1"}}},
		c.authtoken("nova"),
		c.authSection("placement", "nova", region, internal),
		// The metadata API trusts the instance a proxy names when the proxy signs it with the
		// shared secret (see ServeMetadata), as it trusts Neutron's metadata agent.
		c.authSection("neutron", "nova", region, internal,
			[2]string{"service_metadata_proxy", "true"}, [2]string{"metadata_proxy_shared_secret", c.secrets.metadata}),
		{"glance", [][2]string{region, internal}},
		c.authSection("cinder", "nova", [2]string{"os_region_name", c.opts.Region},
			[2]string{"catalog_info", "volumev3::internalURL"}),
		// Service tokens: Cinder accepts a detach from Nova only with one (CVE-2023-2088).
		c.authSection("service_user", "nova", [2]string{"send_service_user_token", "true"}),
		{"vnc", [][2]string{{"enabled", "false"}}},
	}, commonSections(novaDir)...)
	if err := writeINI(filepath.Join(novaDir, "nova.conf"), nova...); err != nil {
		return err
	}
	// Each compute host has a state directory of its own and its own host name; FakeDriver
	// names its single node after the host.
	for _, h := range computeHosts {
		state := filepath.Join(novaDir, h)
		if err := writeINI(filepath.Join(novaDir, h+".conf"),
			section{"DEFAULT", [][2]string{{"host", h}, {"state_path", state}, {"instances_path", filepath.Join(state, "instances")}}},
			section{"oslo_concurrency", [][2]string{{"lock_path", filepath.Join(state, "lock")}}}); err != nil {
			return err
		}
	}

	cinderDir := filepath.Join(c.dir, "cinder")
	if err := os.MkdirAll(cinderDir, 0o755); err != nil {
		return err
	}
	for i, b := range backends {
		if err := os.WriteFile(filepath.Join(cinderDir, b+".shares"), []byte(share(i)+"\n"), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(c.cinderPolicyFile(), []byte(cinderPolicy), 0o644); err != nil {
		return fmt.Errorf("writing Cinder's policy: %w", err)
	}
	return c.writeCinderConf(c.opts.VolumeZones)
}

// commonSections are the sections every service's configuration ends with; state is the
// service's state directory.
func commonSections(state string) []section {
	return []section{
		{"oslo_concurrency", [][2]string{{"lock_path", filepath.Join(state, "lock")}}},
		// Notifications would pile up in queues nobody reads.
		{"oslo_messaging_notifications", [][2]string{{"driver", "noop"}}},
		// The TLS proxies send X-Forwarded-Proto: links in answers are then https.
		{"oslo_middleware", [][2]string{{"enable_proxy_headers_parsing", "true"}}},
	}
}

// cinderConfPath is the configuration file of every Cinder service.
func (c *Cloud) cinderConfPath() string { return filepath.Join(c.dir, "cinder", "cinder.conf") }

// writeCinderConf writes cinder.conf for the volume zones zones, one per backend in the order of
// backends: writeConfigs at the start, SetVolumeZones when zones are renamed.
func (c *Cloud) writeCinderConf(zones []string) error {
	cinderDir := filepath.Join(c.dir, "cinder")
	region := [2]string{"region_name", c.opts.Region}
	cinder := []section{
		{"DEFAULT", [][2]string{
			{"transport_url", c.transportURL()},
			{"state_path", cinderDir},
			{"my_ip", "127.0.0.1"},
			{"host", volumeHost},
			{"auth_strategy", "keystone"},
			{"api_paste_config", filepath.Join(c.opts.PackagesDir, "cinder", "api-paste.ini")},
			{"osapi_volume_listen", "127.0.0.1"},
			{"osapi_volume_listen_port", strconv.Itoa(c.ports.cinder)},
			{"osapi_volume_workers", "1"},
			{"rootwrap_config", filepath.Join(cinderDir, "rootwrap.conf")},
			{"enabled_backends", strings.Join(backends, ",")},
			// The zone of cinder-backup and of a volume created without one.
			{"storage_availability_zone", zones[0]},
			{"default_availability_zone", zones[0]},
			{"backup_driver", "cinder.backup.drivers.posix.PosixBackupDriver"},
			{"backup_posix_path", filepath.Join(cinderDir, "backups")},
			// cinder-volume tells the scheduler its pools' capacity in this periodic task
			// (every 60 s by default); until the first report, creating a volume fails with
			// "No valid backend", so a start would wait up to a minute for it.
			{"periodic_interval", "10"},
			cinderHeartbeat[0], cinderHeartbeat[1],
			// The query filters a project's users may list with (name, status, ...): without
			// the file cinder-api allows none, and a volume list by name, which the driver's
			// CreateVolume sends, answers 400 "Invalid filters name are found in query options".
			{"resource_query_filters_file", c.resourceFiltersFile()},
		}},
		c.dbSection("database", "cinder"),
		// Every rule at its default but the one cinderPolicy overrides.
		{"oslo_policy", [][2]string{{"policy_file", c.cinderPolicyFile()}}},
		c.authtoken("cinder", [2]string{"service_token_roles", serviceRole}, [2]string{"service_token_roles_required", "true"}),
		c.authSection("nova", "cinder", region, [2]string{"interface", "internal"}),
	}
	for i, b := range backends {
		cinder = append(cinder, section{b, [][2]string{
			{"volume_driver", "cinder.volume.drivers.nfs.NfsDriver"},
			{"volume_backend_name", b},
			{"backend_availability_zone", zones[i]},
			{"nfs_shares_config", filepath.Join(cinderDir, b+".shares")},
			{"nfs_mount_point_base", filepath.Join(cinderDir, "mnt")},
			{"nfs_sparsed_volumes", "true"},
			{"nfs_snapshot_support", "true"},
			// The driver's "secure" mode wants the files owned by a cinder user; all is root here.
			{"nas_secure_file_operations", "false"},
			{"nas_secure_file_permissions", "false"},
		}})
	}
	return writeINI(c.cinderConfPath(), append(cinder, commonSections(cinderDir)...)...)
}

// resourceFiltersFile is Cinder's resource_filters.json, which openstack-packages.sh extracts
// from cinder-common (not installed) next to the api-paste.ini files.
func (c *Cloud) resourceFiltersFile() string {
	return filepath.Join(c.opts.PackagesDir, "cinder", "resource_filters.json")
}

func (c *Cloud) cinderPolicyFile() string { return filepath.Join(c.dir, "cinder", "policy.yaml") }

// ServiceListerRole is the role of this cloud's own that lets a project's user list Cinder's
// services (AllowServiceListing grants it), which Cinder's default policy keeps to admins.
const ServiceListerRole = "service-lister"

// cinderPolicy lets ServiceListerRole list Cinder's services (GET os-services), as a cloud's
// administrators do for a user whose tooling must see which services run (the operator's backup
// check). This Cinder (Zed) keeps the listing to admins in two places:
//
//   - the rule volume_extension:services:index, "rule:admin_api" by default
//     (cinder/policies/services.py), which the role is added to;
//   - db.service_get_all's @require_admin_context, whatever the rule says: it wants an admin
//     request context, which a request gets when context_is_admin passes ("role:admin" by
//     default), so the role is added there too.
//
// The role's requests are then admin contexts, which admin_api and admin_or_owner take for an
// admin ("is_admin:True"): those two take only the admin role instead, as they do for real
// admins already and for Cinder's internal contexts, which always carry it. What no policy
// reaches still treats the role's requests as an admin's: Cinder takes any list filter from
// them, not only resource_filters.json's, and lists every project's volumes with all_tenants.
// Every other rule keeps its default. oslo.policy re-reads the file only when its mtime changes,
// which it never does: AllowServiceListing grants and revokes the role, and Keystone reads a
// user's roles afresh at each token validation.
var cinderPolicy = strings.ReplaceAll(`# Written by realcloud: every rule not named here keeps its default.
"volume_extension:services:index": "rule:admin_api or role:LISTER"
"context_is_admin": "role:admin or role:LISTER"
"admin_api": "role:admin and is_admin_project:True"
"admin_or_owner": "(role:admin and is_admin_project:True) or project_id:%(project_id)s"
`, "LISTER", ServiceListerRole)
