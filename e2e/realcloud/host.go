package realcloud

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
)

// installHint tells a person how to get what is missing; it is part of every ErrUnsupported
// about packages.
const installHint = "install them with `make test-realcloud` or e2e/hack/openstack-packages.sh (as root)"

// requiredModules are the Python packages the services run from, one per Debian package.
var requiredModules = []string{"keystone", "placement", "nova", "cinder"}

// checkHost fails with ErrUnsupported unless this is Linux, the caller is root (bind mounts, and
// the services' root helpers run as the caller) and the packages are in; it fills in
// o.PackagesDir.
func checkHost(o *Options) error {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return fmt.Errorf("%w: it needs Linux and root (bind mounts for the NFS backends)", ErrUnsupported)
	}
	for _, bin := range []string{debianPython, "uwsgi", "sqlite3", "qemu-img", rabbitServer, "epmd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: %s not found; %s", ErrUnsupported, bin, installHint)
		}
	}
	for _, m := range requiredModules {
		if _, err := os.Stat(filepath.Join("/usr/lib/python3/dist-packages", m)); err != nil {
			return fmt.Errorf("%w: Python package %s (python3-%s) not installed; %s", ErrUnsupported, m, m, installHint)
		}
	}
	if o.PackagesDir == "" {
		version, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "python3-nova").Output()
		if err != nil {
			return fmt.Errorf("%w: python3-nova's version: %w; %s", ErrUnsupported, err, installHint)
		}
		root, err := localcluster.RepoRoot()
		if err != nil {
			return fmt.Errorf("%w: finding bin/: %w", ErrUnsupported, err)
		}
		// Named by the version without its epoch, as openstack-packages.sh names it.
		v := string(version)
		if _, rest, ok := strings.Cut(v, ":"); ok {
			v = rest
		}
		o.PackagesDir = filepath.Join(root, "bin", "openstack-"+v)
	}
	// What only the -common packages carry, which are not installed (openstack-packages.sh).
	for _, f := range []string{"cinder/api-paste.ini", "nova/api-paste.ini", "cinder/resource_filters.json"} {
		if _, err := os.Stat(filepath.Join(o.PackagesDir, f)); err != nil {
			return fmt.Errorf("%w: %s not in %s; %s", ErrUnsupported, f, o.PackagesDir, installHint)
		}
	}
	return nil
}

// ports are the loopback ports of one cloud. The backends listen on plain HTTP (the catalog's
// internal interface); the proxies in front of them serve TLS (the public interface).
type ports struct {
	amqp, epmd, dist                  int
	keystone, placement, nova, cinder int
	stub                              int
	metadata                          int // Nova's metadata API, in nova-api
}

// allocatePorts picks free ports, all below the ephemeral range and distinct. Between the pick
// and the service's bind another process could take a port. In the ephemeral range any process's
// client socket may take it, and on a busy test host that happens: nova-api, which binds some
// 30 s into the cloud's start, once found its port taken while three worlds started beside it.
// Below that range only another listener can, which is rare enough; the service's start then
// fails loudly.
func allocatePorts() (ports, error) {
	var p ports
	var errs []error
	taken := map[int]bool{}
	for _, f := range []*int{&p.amqp, &p.keystone, &p.placement, &p.nova, &p.cinder, &p.stub, &p.metadata, &p.epmd, &p.dist} {
		port, err := freeLowPort()
		for err == nil && taken[port] {
			port, err = freeLowPort()
		}
		errs = append(errs, err)
		taken[port] = true
		*f = port
	}
	if err := errors.Join(errs...); err != nil {
		return p, fmt.Errorf("allocating ports: %w", err)
	}
	return p, nil
}

// freeLowPort returns a free port between 10000 and the start of the ephemeral range.
func freeLowPort() (int, error) {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const base = 10000
	if low <= base+100 {
		return 0, fmt.Errorf("the ephemeral port range starts at %d: no room below it", low)
	}
	for range 50 {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(low-base)))
		if err != nil {
			return 0, err
		}
		port := base + int(n.Int64())
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, errors.New("no free port below the ephemeral range")
}

// secrets are the cloud's passwords, random per run so that no two clouds share them.
type secrets struct {
	admin, member, service, rabbit string
	// metadata is Nova's metadata_proxy_shared_secret, which signs ServeMetadata's requests.
	metadata string
}

func newSecrets() (secrets, error) {
	var s secrets
	for _, f := range []*string{&s.admin, &s.member, &s.service, &s.rabbit, &s.metadata} {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			return s, fmt.Errorf("generating password: %w", err)
		}
		*f = hex.EncodeToString(b)
	}
	return s, nil
}

// Pids returns every live process of the cloud: the supervised processes and what they forked
// (uwsgi's workers, the Erlang VM's helpers, cinder-volume's per-backend children), found by
// their process groups, which the supervisor gives each service.
func (c *Cloud) Pids() []int {
	groups := map[int]bool{}
	for _, p := range c.processes() {
		if !p.Exited() {
			groups[p.Pid()] = true
		}
	}
	return pidsInGroups(groups)
}

// pidsInGroups scans /proc for the processes whose process group is one of groups.
func pidsInGroups(groups map[int]bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command name: state, ppid, pgrp, ...
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		if pgrp, err := strconv.Atoi(f[2]); err == nil && groups[pgrp] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Memory sums the resident (RSS) and proportional (PSS, shared pages split among their users)
// set sizes of the cloud's processes, in bytes, and counts them. PSS is the fairer figure: the
// Python services share the interpreter's and the libraries' pages.
func (c *Cloud) Memory() (rss, pss uint64, n int) {
	for _, pid := range c.Pids() {
		r, p, ok := processMemory(pid)
		if !ok {
			continue
		}
		n++
		rss += r
		pss += p
	}
	return rss, pss, n
}

// processMemory reads one process's RSS and PSS in bytes; false when it is gone.
func processMemory(pid int) (rss, pss uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			rss += kb * 1024
		case "Pss:":
			pss += kb * 1024
		}
	}
	return rss, pss, true
}
