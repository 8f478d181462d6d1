package realnode

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// BaseDir holds one directory per run (named by its id) and the host-wide lock file. It is on
// /run so that a reboot, which also ends every process and namespace of a run, empties it.
const BaseDir = "/run/cinder-csi-realnode"

// namePrefix starts the names of every network namespace and cgroup a run creates:
// ccsi-<run id>-<node name>.
const namePrefix = "ccsi-"

// Files of a run directory.
const (
	lockFileName  = "lock"
	ownerFileName = "owner.json"
	runFileName   = "run.json"
	nodeFileName  = "node.json"
	egressSocket  = "egress.sock"
)

// lockPollInterval is how often a run waiting for the host-wide lock tries again.
const lockPollInterval = 200 * time.Millisecond

// RunOptions configure a Run.
type RunOptions struct {
	// LogDir, when set, receives each node's kubelet and containerd logs in <LogDir>/<node>/
	// and is kept after the run; by default the logs live in the run directory and go with it.
	LogDir string
	// Logf receives progress lines.
	Logf func(format string, args ...any)
}

// Run owns the real nodes of one process: the host-wide lock, the run directory with its
// records (what a sweep needs to undo a killed run), the egress proxy the clusters' API servers
// reach the nodes through, and the host changes every node shares (/dev made shared, the
// kernel settings kubelet changes, host directories kubelet creates).
type Run struct {
	id     string
	dir    string
	logDir string
	logf   func(format string, args ...any)
	lock   *os.File
	egress *egressProxy

	mu     sync.Mutex
	rec    runRecord
	nodes  map[string]*Node
	routes []route
	closed bool
}

// runRecord is run.json: the host changes a sweep must undo if the run is killed. Every
// change is recorded before it is made.
type runRecord struct {
	ID string `json:"id"`
	// HostPrepared is true while the shared host changes below are in effect.
	HostPrepared bool `json:"hostPrepared"`
	// Sysctls are the values kubelet's kernel settings had before the first kubelet started.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// DevPropagation is /dev's propagation before it was made shared; empty when unchanged.
	DevPropagation string `json:"devPropagation,omitempty"`
	// CreatedPaths are host paths that did not exist before the run, in creation order.
	CreatedPaths []string `json:"createdPaths,omitempty"`
}

// ownerRecord identifies the process that owns a run directory.
type ownerRecord struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
}

// route sends egress proxy connections for an address range into a node's namespace.
type route struct {
	net   *net.IPNet
	netns string
	node  string
}

// activeRun guards against two runs in one process: the second would wait forever for the
// host-wide lock the first holds.
var (
	activeMu  sync.Mutex
	activeRun *Run
)

// NewRun checks the host (see Check), takes the host-wide lock (waiting while another process
// has a run, until ctx ends), sweeps what killed runs left behind, and creates the run
// directory and the egress proxy. Close undoes all of it.
func NewRun(ctx context.Context, opts RunOptions) (_ *Run, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := Check(); err != nil {
		return nil, err
	}
	activeMu.Lock()
	defer activeMu.Unlock()
	if activeRun != nil {
		return nil, fmt.Errorf("this process already has real-node run %s; use its StartNode", activeRun.id)
	}
	lock, err := acquireLock(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			releaseLock(lock)
		}
	}()
	if err := sweepLocked(opts.Logf); err != nil {
		return nil, fmt.Errorf("sweeping earlier runs: %w", err)
	}
	idBytes := make([]byte, 3)
	if _, err := rand.Read(idBytes); err != nil {
		return nil, fmt.Errorf("generating run id: %w", err)
	}
	r := &Run{
		id:     hex.EncodeToString(idBytes),
		logDir: opts.LogDir,
		logf:   opts.Logf,
		lock:   lock,
		nodes:  map[string]*Node{},
	}
	r.dir = filepath.Join(BaseDir, r.id)
	r.rec.ID = r.id
	if err := os.MkdirAll(filepath.Join(r.dir, "nodes"), 0o700); err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	ticks, err := procs.StartTicks(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("reading own start time: %w", err)
	}
	if err := writeJSON(filepath.Join(r.dir, ownerFileName), ownerRecord{PID: os.Getpid(), StartTicks: ticks}); err != nil {
		return nil, err
	}
	if err := r.saveRecord(); err != nil {
		return nil, err
	}
	if r.egress, err = newEgressProxy(filepath.Join(r.dir, egressSocket), r.route, r.logf); err != nil {
		_ = os.RemoveAll(r.dir)
		return nil, err
	}
	activeRun = r
	r.logf("Real-node run %s: directory %s", r.id, r.dir)
	return r, nil
}

// ID returns the run id, part of every namespace and cgroup name of the run.
func (r *Run) ID() string { return r.id }

// Dir returns the run directory.
func (r *Run) Dir() string { return r.dir }

// EgressSocket returns the path of the egress proxy's unix socket.
func (r *Run) EgressSocket() string { return filepath.Join(r.dir, egressSocket) }

// ClusterOptions returns what a local cluster numbered cluster (see the address plan) needs for
// real nodes of this run: its serving certificate valid for every address of the cluster's
// part of the plan, and its "cluster" egress through this run's proxy. Set it as
// localcluster.Options.RealNodes before starting the cluster.
func (r *Run) ClusterOptions(cluster int) *localcluster.RealNodes {
	return &localcluster.RealNodes{ServingIPs: servingIPs(cluster), EgressSocket: r.EgressSocket()}
}

// Nodes returns the running nodes.
func (r *Run) Nodes() []*Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, n)
	}
	return out
}

// Close stops every node, undoes the shared host changes, stops the egress proxy, removes the
// run directory and releases the host-wide lock. It is safe to call more than once.
func (r *Run) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	nodes := make([]*Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		nodes = append(nodes, n)
	}
	r.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		errs = append(errs, n.Stop())
	}
	r.mu.Lock()
	errs = append(errs, r.releaseHostLocked())
	r.mu.Unlock()
	errs = append(errs, r.egress.Close())
	if err := errors.Join(errs...); err != nil {
		// The records stay, so that the next run's sweep can finish the job.
		r.finish()
		return fmt.Errorf("closing real-node run %s: %w", r.id, err)
	}
	if err := removeDir(r.dir); err != nil {
		errs = append(errs, err)
	}
	r.finish()
	return errors.Join(errs...)
}

// finish releases the lock and the process's run slot.
func (r *Run) finish() {
	releaseLock(r.lock)
	activeMu.Lock()
	if activeRun == r {
		activeRun = nil
	}
	activeMu.Unlock()
}

// saveRecord writes run.json; the caller holds r.mu or owns r exclusively.
func (r *Run) saveRecord() error {
	return writeJSON(filepath.Join(r.dir, runFileName), r.rec)
}

// addRoutes makes the egress proxy send connections for nets into a node's namespace.
func (r *Run) addRoutes(node, netnsPath string, nets ...*net.IPNet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range nets {
		r.routes = append(r.routes, route{net: n, netns: netnsPath, node: node})
	}
}

// removeRoutes forgets a node's routes.
func (r *Run) removeRoutes(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.routes[:0]
	for _, rt := range r.routes {
		if rt.node != node {
			kept = append(kept, rt)
		}
	}
	r.routes = kept
}

// route returns the namespace that owns ip; the most specific range wins.
func (r *Run) route(ip net.IP) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, bestLen := "", -1
	for _, rt := range r.routes {
		if ones, _ := rt.net.Mask.Size(); rt.net.Contains(ip) && ones > bestLen {
			best, bestLen = rt.netns, ones
		}
	}
	return best, bestLen >= 0
}

// hostPathCandidates are host paths kubelet or containerd create outside the directories a
// run gives them: kubelet's device-plugin socket directory is fixed, kubelet links container
// logs into /var/log/containers, libcni caches results under /var/lib/cni, and the runc shims
// put their sockets under /run/containerd/s whatever containerd's state directory is. Whichever
// of them did not exist before the run is removed again at its end.
var hostPathCandidates = []string{
	netnsDir, // `ip netns add` creates it and bind-mounts it on itself
	"/var/lib/kubelet",
	"/var/lib/kubelet/device-plugins",
	"/var/log/containers",
	"/var/lib/cni",
	"/var/lib/cni/results",
	"/run/containerd",
	"/run/containerd/s",
	// runc's default state root; the nodes configure their own, but a shim that cannot read
	// its options falls back to this one.
	"/run/containerd/runc",
	"/run/containerd/runc/" + criNamespace,
}

// wholeOurs are created paths whose whole content is the run's: nothing but this run's
// kubelets (the host-wide lock keeps others out, and Check refuses a foreign kubelet) writes
// there. Other created paths are removed only when empty after each node removed its entries.
var wholeOurs = map[string]bool{
	"/var/lib/kubelet":                true,
	"/var/lib/kubelet/device-plugins": true,
}

// prepareHostLocked makes the host changes every node needs, once per run, recording each before
// making it: /dev shared (the CSI node plugin's device mounts must propagate), kubelet's
// kernel settings saved for restoring, and the host paths that do not exist yet. Called with
// r.mu held.
func (r *Run) prepareHostLocked() error {
	for _, p := range hostPathCandidates {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) && !slices.Contains(r.rec.CreatedPaths, p) {
			r.rec.CreatedPaths = append(r.rec.CreatedPaths, p)
		}
	}
	if r.rec.HostPrepared {
		return r.saveRecord()
	}
	values, err := readSysctls()
	if err != nil {
		return err
	}
	r.rec.Sysctls = values
	prev, err := propagationOf("/dev")
	if err != nil {
		return err
	}
	if prev != "shared" && prev != "shared+slave" {
		r.rec.DevPropagation = prev
	}
	r.rec.HostPrepared = true
	if err := r.saveRecord(); err != nil {
		return err
	}
	if r.rec.DevPropagation != "" {
		if _, err := makeShared("/dev"); err != nil {
			return err
		}
	}
	return nil
}

// releaseHostLocked undoes prepareHostLocked once no node runs. Called with r.mu held.
func (r *Run) releaseHostLocked() error {
	if len(r.nodes) > 0 {
		return nil
	}
	if err := releaseHost(&r.rec, r.logf); err != nil {
		return err
	}
	return r.saveRecord()
}

// releaseHost undoes the shared host changes a run record lists and clears them from it.
func releaseHost(rec *runRecord, logf func(string, ...any)) error {
	var errs []error
	for i := len(rec.CreatedPaths) - 1; i >= 0; i-- {
		p := rec.CreatedPaths[i]
		if wholeOurs[p] {
			if err := removeDir(p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// A created mount point (/run/netns) is unmounted once empty.
		if entries, err := os.ReadDir(p); err == nil && len(entries) == 0 {
			if points, _ := mountsUnder(p); slices.Contains(points, p) {
				if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
					errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
					continue
				}
			}
		}
		// Left in place when something else has put files there meanwhile.
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		} else if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			logf("Leaving %s: something besides this run's nodes has put files there", p)
		}
	}
	if errs == nil {
		rec.CreatedPaths = nil
	}
	if rec.HostPrepared {
		if err := restoreSysctls(rec.Sysctls); err != nil {
			errs = append(errs, err)
		}
		if rec.DevPropagation != "" {
			if err := restorePropagation("/dev", rec.DevPropagation); err != nil {
				errs = append(errs, err)
			}
		}
		if errs == nil {
			rec.HostPrepared, rec.Sysctls, rec.DevPropagation = false, nil, ""
		}
	}
	return errors.Join(errs...)
}

// kubeletSysctls are the kernel settings kubelet sets at start unless protectKernelDefaults is
// on, in which case it refuses to start when they differ; on a shared machine they are put back
// afterwards.
var kubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// readSysctls reads kubeletSysctls.
func readSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return nil, fmt.Errorf("reading sysctl %s: %w", k, err)
		}
		out[k] = strings.TrimSpace(string(v))
	}
	return out, nil
}

// restoreSysctls writes back saved values that differ now.
func restoreSysctls(saved map[string]string) error {
	var errs []error
	for k, v := range saved {
		cur, err := os.ReadFile("/proc/sys/" + k)
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s to %s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// acquireLock takes the host-wide lock, waiting while another process holds it. The lock is an
// flock, so the kernel releases it when its holder dies, however it dies.
func acquireLock(ctx context.Context, logf func(string, ...any)) (*os.File, error) {
	if err := os.MkdirAll(BaseDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", BaseDir, err)
	}
	path := filepath.Join(BaseDir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	logged := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !logged {
			holder, _ := os.ReadFile(path)
			logf("Waiting for the real-node lock %s, held by pid %s", path, strings.TrimSpace(string(holder)))
			logged = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the real-node lock %s: %w", path, ctx.Err())
		case <-time.After(lockPollInterval):
		}
	}
	// The holder's pid is only for the message above; the flock is what counts.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// releaseLock drops the host-wide lock.
func releaseLock(f *os.File) {
	if f == nil {
		return
	}
	_ = f.Truncate(0)
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}

// Sweep removes everything left by real-node runs whose process is gone: their containers and
// shims, mounts, network namespaces, cgroups, host paths and host settings, and their run
// directories. It takes the host-wide lock, waiting while a live run holds it until ctx ends.
// NewRun sweeps on its own; this is for `make clean-realnode` (e2e/cmd/realnode-sweep).
func Sweep(ctx context.Context, logf func(format string, args ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	lock, err := acquireLock(ctx, logf)
	if err != nil {
		return err
	}
	defer releaseLock(lock)
	return sweepLocked(logf)
}

// sweepLocked sweeps every run directory whose owner is gone, then namespaces and cgroups
// named like a run's whose run has no live owner. The caller holds the host-wide lock, so no
// other process is between creating a resource and recording it.
func sweepLocked(logf func(string, ...any)) error {
	entries, err := os.ReadDir(BaseDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", BaseDir, err)
	}
	live := map[string]bool{}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !isRunID(e.Name()) {
			continue
		}
		dir := filepath.Join(BaseDir, e.Name())
		if ownerAlive(dir) {
			live[e.Name()] = true
			continue
		}
		logf("Sweeping real-node run %s left by a process that is gone", e.Name())
		if err := sweepRunDir(dir, logf); err != nil {
			errs = append(errs, fmt.Errorf("sweeping run %s: %w", e.Name(), err))
		}
	}
	// Namespaces and cgroups whose run directory is gone (removed by hand, say) are found by
	// name. Without their record only the processes, namespace and cgroups can be undone.
	var orphans []string
	if nss, err := os.ReadDir(netnsDir); err == nil {
		for _, ns := range nss {
			if id, ok := runIDOf(ns.Name()); ok && !live[id] {
				orphans = append(orphans, ns.Name())
			}
		}
	}
	cgs, err := cgroupNamesWithPrefix(namePrefix)
	if err != nil {
		errs = append(errs, err)
	}
	cgroupOf := map[string]string{}
	for _, cg := range cgs {
		// A node's network namespace and cgroup have one name; the cgroup may sit under
		// CgroupParentEnv's.
		name := filepath.Base(cg)
		if id, ok := runIDOf(name); ok && !live[id] {
			cgroupOf[name] = cg
			if !slices.Contains(orphans, name) {
				orphans = append(orphans, name)
			}
		}
	}
	for _, name := range orphans {
		logf("Sweeping %s, left by a real-node run without a record", name)
		rec := nodeRecord{Netns: name, Cgroup: cmp.Or(cgroupOf[name], name)}
		if err := cleanupNode(&rec, logf); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepRunDir undoes one dead run from its records and removes its directory.
func sweepRunDir(dir string, logf func(string, ...any)) error {
	var errs []error
	nodeDirs, _ := os.ReadDir(filepath.Join(dir, "nodes"))
	for _, nd := range nodeDirs {
		var rec nodeRecord
		if err := readJSON(filepath.Join(dir, "nodes", nd.Name(), nodeFileName), &rec); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // killed before recording anything
			}
			errs = append(errs, err)
			continue
		}
		if err := cleanupNode(&rec, logf); err != nil {
			errs = append(errs, err)
		}
	}
	var rec runRecord
	if err := readJSON(filepath.Join(dir, runFileName), &rec); err == nil {
		if err := releaseHost(&rec, logf); err != nil {
			errs = append(errs, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return removeDir(dir)
}

// ownerAlive reports whether the process that created a run directory still runs. A missing
// or unreadable owner file means the owner died while creating the directory.
func ownerAlive(dir string) bool {
	var owner ownerRecord
	if err := readJSON(filepath.Join(dir, ownerFileName), &owner); err != nil || owner.PID <= 0 {
		return false
	}
	ticks, err := procs.StartTicks(owner.PID)
	return err == nil && ticks == owner.StartTicks
}

// isRunID reports whether s looks like a run id (six hexadecimal digits).
func isRunID(s string) bool {
	if len(s) != 6 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// runIDOf extracts the run id from a namespace or cgroup name ccsi-<id>-<node>.
func runIDOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "-")
	return id, ok && isRunID(id)
}

// removeDir removes a directory tree after unmounting whatever is mounted inside it. It refuses
// when a mount cannot be removed, rather than deleting through it into another file system.
func removeDir(dir string) error {
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
		return fmt.Errorf("not removing %s: still mounted inside: %v %w", dir, left, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// writeJSON writes v to path atomically (a rename), so that a sweep never reads half a record.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readJSON reads a record written by writeJSON.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}
