package realcloud

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The harness's shims: what Debian's library packages leave out and the services expect on a
// host, each kept to the least that works. They live in <run>/shims, which leads the services'
// PATH, and never outside the run directory.
//
//   - sudo, cinder-rootwrap and nova-rootwrap: the services run as root here, and call
//     "sudo <service>-rootwrap <config> <command>" for anything privileged (Cinder's NFS driver:
//     mkdir, stat, du, chmod; oslo.privsep's helper). The passthrough runs the command itself.
//   - mount.nfs, doing nothing: the NFS driver checks that it exists, and mounts a share only
//     when its mount point is not mounted yet; the harness bind-mounts each export there first.
//   - dmidecode, printing a fixed UUID: os-brick asks it for the system UUID when it builds the
//     connector properties (backups); this VM has no DMI table, and the real dmidecode fails.
//   - python/sitecustomize.py (sitecustomize below), on the services' PYTHONPATH: oslo.db's
//     writer transactions on SQLite begin IMMEDIATE.
var shimScripts = map[string]string{
	"sudo": `# Passthrough: the services already run as root.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
exec "$@"
`,
	"cinder-rootwrap": "# Passthrough: drop the rootwrap configuration and run the command.\nshift\nexec \"$@\"\n",
	"nova-rootwrap":   "# Passthrough: drop the rootwrap configuration and run the command.\nshift\nexec \"$@\"\n",
	"mount.nfs":       "# The export is bind-mounted on the mount point before cinder-volume starts.\nexit 0\n",
	"dmidecode":       "# A fixed system UUID: this VM has no DMI table.\necho 5f0c1e3a-7d2b-4e8f-9a6c-0b1d2e3f4a5b\n",
}

// sitecustomize makes every oslo.db writer transaction take SQLite's write lock when it begins,
// rather than at its first write: with the deferred BEGIN oslo.db emits, a writer that read
// before another process's commit fails at once with "database is locked" (WAL mode), which
// failed volume creations and Nova's attachment updates on a busy host. Python imports it at
// start from the services' PYTHONPATH; it patches oslo.db when a service first imports it.
//
//go:embed shims/sitecustomize.py
var sitecustomize []byte

// consoleScripts are the entry points of the console scripts the service packages would
// install (nova-compute, cinder-manage, ...), which python3-* lacks: each runs as
// python3 -c with the script's name as argv[0], which oslo.config uses as the program name.
var consoleScripts = map[string]string{
	"keystone-manage":  "keystone.cmd.manage",
	"placement-manage": "placement.cmd.manage",
	"nova-manage":      "nova.cmd.manage",
	"nova-api":         "nova.cmd.api",
	"nova-conductor":   "nova.cmd.conductor",
	"nova-scheduler":   "nova.cmd.scheduler",
	"nova-compute":     "nova.cmd.compute",
	"cinder-manage":    "cinder.cmd.manage",
	"cinder-api":       "cinder.cmd.api",
	"cinder-scheduler": "cinder.cmd.scheduler",
	"cinder-volume":    "cinder.cmd.volume",
	"cinder-backup":    "cinder.cmd.backup",
}

// wsgiApps are the WSGI entry points uwsgi loads for Keystone and Placement, in place of the
// keystone-wsgi-public and placement-api scripts of the service packages. Each service finds its
// configuration through the directory variable set in its environment.
var wsgiApps = map[service]string{
	svcKeystone:  "from keystone.server.wsgi import initialize_public_application\napplication = initialize_public_application()\n",
	svcPlacement: "from placement.wsgi import init_application\napplication = init_application()\n",
}

// pythonArgs returns the command line that runs console script name with args.
func pythonArgs(name string, args ...string) []string {
	module, ok := consoleScripts[name]
	if !ok {
		panic("realcloud: no console script " + name)
	}
	code := fmt.Sprintf("import sys; sys.argv[0] = %q; from %s import main; sys.exit(main())", name, module)
	return append([]string{"-c", code}, args...)
}

// shimDir is the directory of the shims, first on the services' PATH.
func (c *Cloud) shimDir() string { return filepath.Join(c.dir, "shims") }

// pythonShimDir is the services' PYTHONPATH, which holds sitecustomize.py.
func (c *Cloud) pythonShimDir() string { return filepath.Join(c.shimDir(), "python") }

// writeShims writes the shell shims and the WSGI entry points.
func (c *Cloud) writeShims() error {
	if err := os.MkdirAll(c.shimDir(), 0o755); err != nil {
		return err
	}
	for name, body := range shimScripts {
		if err := os.WriteFile(filepath.Join(c.shimDir(), name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			return fmt.Errorf("writing shim %s: %w", name, err)
		}
	}
	if err := os.MkdirAll(c.pythonShimDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.pythonShimDir(), "sitecustomize.py"), sitecustomize, 0o644); err != nil {
		return fmt.Errorf("writing the Python shim: %w", err)
	}
	for svc, body := range wsgiApps {
		if err := os.MkdirAll(filepath.Join(c.dir, string(svc)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.dir, string(svc), "wsgi.py"), []byte(body), 0o644); err != nil {
			return fmt.Errorf("writing %s's WSGI entry point: %w", svc, err)
		}
	}
	return nil
}

// env is the environment of every service: this one's, with the shims first on PATH and extra.
func (c *Cloud) env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		// The caller's OS_* variables (an openrc sourced in the shell) must not reach the
		// services' clients; nor may a PYTHONPATH that hides Debian's packages: the services'
		// holds only the Python shim.
		if strings.HasPrefix(kv, "OS_") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "PYTHONPATH=") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "PATH="+c.shimDir()+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		// A log file is not a terminal: without this, Python buffers what a service prints
		// and the end of its log is missing when a test quotes it.
		"PYTHONUNBUFFERED=1", "PYTHONPATH="+c.pythonShimDir())
	return append(out, extra...)
}
