package realcloud

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// Names of the supervised processes that Stop treats apart: the broker and its port mapper
// stop after every service, which talk to them while shutting down.
const (
	rabbitName = "rabbitmq"
	epmdName   = "epmd"
	// rabbitServer is RabbitMQ's own start script; /usr/sbin/rabbitmq-server, Debian's wrapper,
	// would switch to the system's rabbitmq user and its /var/lib/rabbitmq.
	rabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	// debianPython is the interpreter the python3-* packages are installed for; a python3
	// earlier on PATH (pyenv, a virtualenv) would not see them.
	debianPython = "/usr/bin/python3"
)

// startProc starts a supervised process logging to <run>/logs/<name>.log, in a process group
// of its own so that Stop reaches what it forks.
func (c *Cloud) startProc(name, path string, args, env []string) (*procs.Process, error) {
	p, err := procs.Start(procs.Options{Name: name, Path: path, Args: args, Env: env, LogDir: c.LogDir(), Group: true})
	if err != nil {
		return nil, err
	}
	c.addProc(p)
	return p, nil
}

// runPython runs a console script to completion (a schema sync, a bootstrap).
func (c *Cloud) runPython(ctx context.Context, logName, script string, args ...string) error {
	p, err := procs.Start(procs.Options{Name: logName, Path: debianPython, Args: pythonArgs(script, args...),
		Env: c.env(), LogDir: c.LogDir(), Group: true})
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("%s %v: %w", script, args, ctx.Err())
	}
	if p.Err() != nil {
		return p.ExitError()
	}
	return nil
}

// enableWAL switches a database to write-ahead logging, which is kept in the file. Without it
// SQLite's rollback journal locks the whole file for a write, and Keystone answers "database is
// locked" while a token is validated, even with one worker.
func (c *Cloud) enableWAL(name string) error {
	out, err := exec.Command("sqlite3", c.db(name), "PRAGMA journal_mode=WAL;").CombinedOutput()
	if err != nil {
		return fmt.Errorf("enabling WAL on %s: %w: %s", name, err, out)
	}
	return nil
}

// startRabbit starts epmd and a RabbitMQ node of the cloud's own: own node name, ports, state
// and cookie, on loopback only. epmd runs supervised rather than as the daemon the Erlang VM
// would fork, which would outlive the cloud.
func (c *Cloud) startRabbit(ctx context.Context) error {
	dir := filepath.Join(c.dir, "rabbitmq")
	if err := os.MkdirAll(filepath.Join(dir, "mnesia"), 0o700); err != nil {
		return err
	}
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\ndefault_user = openstack\ndefault_pass = %s\nloopback_users = none\n",
		c.ports.amqp, c.secrets.rabbit)
	for name, content := range map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[].\n", "rabbitmq-env.conf": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	epmdEnv := []string{"ERL_EPMD_ADDRESS=127.0.0.1", "ERL_EPMD_PORT=" + strconv.Itoa(c.ports.epmd)}
	epmd, err := c.startProc(epmdName, "epmd", []string{"-port", strconv.Itoa(c.ports.epmd), "-address", "127.0.0.1"}, c.env(epmdEnv...))
	if err != nil {
		return err
	}
	if err := c.waitTCP(ctx, "epmd", c.ports.epmd, epmd); err != nil {
		return err
	}
	env := c.env(append(epmdEnv,
		// The cookie file is written to $HOME.
		"HOME="+dir,
		"RABBITMQ_NODENAME=realcloud"+strconv.Itoa(c.ports.amqp)+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(c.ports.amqp),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(c.ports.dist),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+dir,
		"RABBITMQ_LOGS=-",
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "rabbitmq.pid"),
		// The start script then execs the Erlang VM instead of running it as a child, so that
		// the VM is the supervised process and dies with the test binary (Pdeathsig); SIGTERM
		// stops it gracefully. -noinput, which the script leaves out in that mode, keeps the
		// VM from reading its stdin.
		"RABBITMQ_ALLOW_INPUT=true",
		// The distribution listener on loopback too, and never an epmd of the VM's own. Its
		// schedulers sleep when idle rather than spin first (+sbwt and its dirty-scheduler
		// kin), which on a two-core host loaded by the test worlds is CPU they need.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-noinput -start_epmd false -kernel inet_dist_use_interface {127,0,0,1} +sbwt none +sbwtdcpu none +sbwtdio none",
	)...)
	p, err := c.startProc(rabbitName, rabbitServer, nil, env)
	if err != nil {
		return err
	}
	// The AMQP listener opens last in the broker's boot.
	return c.waitTCP(ctx, "RabbitMQ", c.ports.amqp, p)
}

// serviceStartTimeout bounds the wait for one service to answer after its start. A service
// that cannot start exits, which the waits see at once; the bound is for one that hangs, and is
// generous: on two cores loaded by the test worlds beside the cloud, RabbitMQ has been seen not
// to open its listener within two minutes.
const serviceStartTimeout = 6 * time.Minute

// waitTCP waits until port accepts connections, failing early when p exits.
func (c *Cloud) waitTCP(ctx context.Context, what string, port int, p *procs.Process) error {
	ctx, cancel := context.WithTimeout(ctx, machine.Scale(serviceStartTimeout))
	defer cancel()
	var last error
	return procs.Poll(ctx, procs.Wait{What: what, Interval: 200 * time.Millisecond, Log: p.LogPath(),
		Alive: func() error { return procs.FirstExit(p) }, Last: func() error { return last }},
		func() (bool, error) {
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err != nil {
				last = err
				return false, nil //nolint:nilerr // not yet: poll again, last says why
			}
			_ = conn.Close()
			return true, nil
		})
}

// waitHTTP waits until url answers with any HTTP status below 500, failing early when p exits.
func (c *Cloud) waitHTTP(ctx context.Context, what, url string, p *procs.Process) error {
	ctx, cancel := context.WithTimeout(ctx, machine.Scale(serviceStartTimeout))
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	return procs.Poll(ctx, procs.Wait{What: what, Interval: 300 * time.Millisecond, Log: p.LogPath(),
		Alive: func() error { return procs.FirstExit(p) }, Last: func() error { return last }},
		func() (bool, error) {
			resp, err := client.Get(url)
			if err != nil {
				last = err
				return false, nil //nolint:nilerr // not yet: poll again, last says why
			}
			_ = resp.Body.Close()
			if resp.StatusCode >= 500 {
				last = fmt.Errorf("HTTP %d", resp.StatusCode)
				return false, nil
			}
			return true, nil
		})
}

// syncKeystone creates Keystone's schema, its token and credential keys, and bootstraps the
// admin, the region and Keystone's own catalog entry (public: TLS; internal and admin: plain).
func (c *Cloud) syncKeystone(ctx context.Context) error {
	conf := []string{"--config-file", filepath.Join(c.dir, "keystone", "keystone.conf")}
	if err := os.MkdirAll(filepath.Dir(c.db("keystone")), 0o755); err != nil {
		return err
	}
	internal := c.internalURL(c.ports.keystone) + "/v3"
	steps := [][]string{
		{"db_sync"},
		{"fernet_setup", "--keystone-user", "root", "--keystone-group", "root"},
		{"credential_setup", "--keystone-user", "root", "--keystone-group", "root"},
		{"bootstrap", "--bootstrap-password", c.secrets.admin, "--bootstrap-region-id", c.opts.Region,
			"--bootstrap-public-url", c.proxies.publicURL(svcKeystone) + "/v3",
			"--bootstrap-internal-url", internal, "--bootstrap-admin-url", internal},
	}
	for i, s := range steps {
		if err := c.runPython(ctx, "keystone-manage", "keystone-manage", append(conf, s...)...); err != nil {
			return err
		}
		if i == 0 {
			if err := c.enableWAL("keystone"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cloud) syncPlacement(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(c.db("placement")), 0o755); err != nil {
		return err
	}
	if err := c.runPython(ctx, "placement-manage", "placement-manage",
		"--config-file", filepath.Join(c.dir, "placement", "placement.conf"), "db", "sync"); err != nil {
		return err
	}
	return c.enableWAL("placement")
}

// syncNova creates the API database, maps cell0 and creates cell1 (the cell the computes are
// in), then syncs both cells' schemas.
func (c *Cloud) syncNova(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(c.db("nova")), 0o755); err != nil {
		return err
	}
	conf := []string{"--config-file", filepath.Join(c.dir, "nova", "nova.conf")}
	steps := [][]string{
		{"api_db", "sync"},
		{"cell_v2", "map_cell0", "--database_connection", c.dbURL("nova_cell0")},
		{"cell_v2", "create_cell", "--name", "cell1"},
		{"db", "sync"},
	}
	for _, s := range steps {
		if err := c.runPython(ctx, "nova-manage", "nova-manage", append(conf, s...)...); err != nil {
			return err
		}
	}
	for _, db := range []string{"nova_api", "nova_cell0", "nova"} {
		if err := c.enableWAL(db); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cloud) syncCinder(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(c.db("cinder")), 0o755); err != nil {
		return err
	}
	if err := c.runPython(ctx, "cinder-manage", "cinder-manage",
		"--config-file", filepath.Join(c.dir, "cinder", "cinder.conf"), "db", "sync"); err != nil {
		return err
	}
	return c.enableWAL("cinder")
}

// startUWSGI serves a WSGI application with uwsgi's HTTP router on port: one worker process,
// keepalive on (Keystone's and Placement's clients reuse connections), and SIGTERM ending it
// rather than reloading it, which is uwsgi's default.
func (c *Cloud) startUWSGI(ctx context.Context, svc service, port int, env string) error {
	dir := filepath.Join(c.dir, string(svc))
	args := []string{
		"--plugin", "python3,http", "--http", "127.0.0.1:" + strconv.Itoa(port), "--http-keepalive", "--http-auto-chunked",
		"--wsgi-file", filepath.Join(dir, "wsgi.py"), "--chdir", dir,
		"--master", "--processes", "1", "--threads", "1", "--die-on-term", "--need-app",
		// Requests carry a user token and a service token in headers.
		"--buffer-size", "65535",
	}
	p, err := c.startProc(string(svc), "uwsgi", args, c.env(env+"="+dir))
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, string(svc), c.internalURL(port)+"/", p)
}

func (c *Cloud) startKeystone(ctx context.Context) error {
	return c.startUWSGI(ctx, svcKeystone, c.ports.keystone, "OS_KEYSTONE_CONFIG_DIR")
}

func (c *Cloud) startPlacement(ctx context.Context) error {
	return c.startUWSGI(ctx, svcPlacement, c.ports.placement, "OS_PLACEMENT_CONFIG_DIR")
}

// startComputeAndVolume starts Nova's and Cinder's services and waits for their APIs; the
// services register themselves over RabbitMQ, which setupZones waits for.
func (c *Cloud) startComputeAndVolume(ctx context.Context) error {
	novaConf := []string{"--config-file", filepath.Join(c.dir, "nova", "nova.conf")}
	cinderConf := []string{"--config-file", filepath.Join(c.dir, "cinder", "cinder.conf")}
	type proc struct {
		name, script string
		args         []string
	}
	list := []proc{
		{"nova-api", "nova-api", novaConf}, {"nova-conductor", "nova-conductor", novaConf},
		{"nova-scheduler", "nova-scheduler", novaConf},
		{ServiceCinderAPI, "cinder-api", cinderConf}, {"cinder-scheduler", "cinder-scheduler", cinderConf},
		{"cinder-volume", "cinder-volume", cinderConf}, {ServiceCinderBackup, "cinder-backup", cinderConf},
	}
	for _, h := range computeHosts {
		list = append(list, proc{"nova-compute-" + h, "nova-compute",
			append(slices.Clone(novaConf), "--config-file", filepath.Join(c.dir, "nova", h+".conf"))})
	}
	started := map[string]*procs.Process{}
	for _, s := range list {
		p, err := c.startProc(s.name, debianPython, pythonArgs(s.script, s.args...), c.env())
		if err != nil {
			return err
		}
		started[s.name] = p
	}
	return parallel(ctx,
		func(ctx context.Context) error {
			return c.waitHTTP(ctx, "nova-api", c.internalURL(c.ports.nova)+"/", started["nova-api"])
		},
		func(ctx context.Context) error {
			// The root lists the metadata versions, without asking for an instance.
			return c.waitHTTP(ctx, "nova-api's metadata API", c.internalURL(c.ports.metadata)+"/", started["nova-api"])
		},
		func(ctx context.Context) error {
			return c.waitHTTP(ctx, ServiceCinderAPI, c.internalURL(c.ports.cinder)+"/", started[ServiceCinderAPI])
		})
}
