package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// Options describe one local cluster. The zero value plus a Name is a usable cluster with no
// nodes.
type Options struct {
	// Name identifies the cluster in directory names, node names, the kubeconfig context and log
	// lines, for example "management" or "guest". It must be a DNS-1123 label; default "local".
	Name string
	// WorkDir is the parent directory of the cluster's directory (<WorkDir>/<Name>, holding data,
	// certificates, kubeconfigs and logs). When empty a temporary directory is created and Stop
	// removes it; a given WorkDir is kept after Stop so its logs can be read.
	WorkDir string
	// Masters and Workers are the numbers of kwok nodes. Masters carry the master and
	// control-plane role labels and the master NoSchedule taint, as on OpenShift.
	Masters, Workers int
	// Zones, when not empty, are assigned round-robin to the nodes as topology.kubernetes.io/zone.
	Zones []string
	// NodeLabels are extra labels for every node, for example
	// hypershift.openshift.io/control-plane=true on a management cluster.
	NodeLabels map[string]string
	// CRDs are CustomResourceDefinition YAML files installed, and Established, before Start
	// returns.
	CRDs []string
	// Audit turns on the API server's audit log at AuditLogPath.
	Audit bool
	// ControlPlaneOnly starts only etcd and kube-apiserver: no controller-manager, scheduler or
	// kwok, so nothing reconciles workloads and nodes never become Ready. Integration tests that
	// only need API semantics start faster and use less memory this way.
	ControlPlaneOnly bool
	// RealNodes, when set, prepares the cluster for real kubelets joining it (package
	// e2e/realnode) next to its kwok nodes.
	RealNodes *RealNodes
	// Logf, when set, receives progress lines (StartForTest sets it to t.Logf).
	Logf func(format string, args ...any)
}

// RealNodes prepares a cluster for real kubelets that run in network namespaces of their own on
// this host. Setting it changes two things besides the fields below: kwok manages only the
// fake nodes Start creates (a kwok that managed every node would mark a real node's pods
// Running before they run), and the API server reaches kubelets at their InternalIP, the
// address a real node registers with --node-ip, rather than at a host name nothing resolves.
type RealNodes struct {
	// ServingIPs are extra IP addresses in the API server's serving certificate. Clients inside
	// a node's network namespace reach the API server through a forwarder at an address of
	// that namespace, and verify the certificate against that address.
	ServingIPs []net.IP
	// EgressSocket, when not empty, is the path of a unix socket serving HTTP CONNECT, through
	// which the API server opens its "cluster" egress connections: to kubelets (logs, exec,
	// port-forward), to pods and services it proxies, and to service-backed webhooks. The
	// API server runs on the host and cannot route to addresses inside node namespaces; the
	// proxy behind the socket can. The API server dials the socket per connection, so it may
	// be created after Start.
	EgressSocket string
}

// Cluster is a running local cluster. Its methods are safe for concurrent use.
type Cluster struct {
	name       string
	dir        string
	ownsDir    bool
	kubeconfig string
	auditLog   string
	restConfig *rest.Config
	ports      []int
	logf       func(format string, args ...any)

	mu    sync.Mutex
	procs []*procs.Process

	stopOnce sync.Once
	stopErr  error
}

// Cluster layout constants. Both clusters of a pair use the same ranges: they are separate API
// servers and nothing routes between them.
const (
	podCIDR    = "10.244.0.0/16"
	fakeNodeIP = "10.0.0.1"

	// startTimeout bounds a whole start, including retries after a port conflict, on the
	// reference machine (see package machine; a slower one gets more). A hang guard: a start
	// takes seconds alone, but make test starts eight clusters at once beside the storage phase,
	// and at a load of 60 on two cores their API servers took two minutes to be ready, the
	// whole start more than three (the bound this was before).
	startTimeout = 8 * time.Minute
	// portAttempts is how often Start picks new ports after a bind conflict.
	portAttempts = 3
	// markerFile marks a directory as created by this package, so that a restart may wipe it.
	markerFile = ".localcluster"
	// pollInterval is how often start-up conditions are checked.
	pollInterval = 100 * time.Millisecond
	// stopGrace is how long a component gets to exit after SIGTERM before it is killed. The
	// API server's graceful shutdown waits for watches to drain; nothing here needs that.
	stopGrace = 5 * time.Second
)

// startSlots bounds how many clusters of this process start at once. A start is CPU-bound (an
// API server compiling its OpenAPI and serving the CRDs, etcd, kwok), and the integration tests
// start up to eight at once: together on two cores, beside make test's storage phase, each took
// over three minutes, where two at a time take seconds each. A start waits for a slot before its
// own bound (startTimeout) begins; a cluster never waits for another one's start, so the clusters
// of a pair cannot hold each other up.
var startSlots = make(chan struct{}, 2)

// errPortConflict marks a start that failed because a chosen port was taken between choosing it
// and the component binding it; Start retries with new ports then.
var errPortConflict = errors.New("port already in use")

// The service network of every local cluster. Real nodes (package e2e/realnode) route it and
// translate the kubernetes Service address themselves, as they run no kube-proxy.
const (
	// ServiceCIDR is the API server's --service-cluster-ip-range.
	ServiceCIDR = "10.96.0.0/12"
	// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service (port 443).
	KubernetesServiceIP = "10.96.0.1"
)

// Start starts a cluster and returns once its API server is ready, its nodes exist (and, unless
// ControlPlaneOnly, are Ready), the default priority class and the requested CRDs are installed.
// On error nothing is left running. A port taken between choosing and binding it is retried with
// fresh ports.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "local"
	}
	if errs := validation.IsDNS1123Label(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("invalid cluster name %q: %v", opts.Name, errs)
	}
	if opts.Masters < 0 || opts.Workers < 0 {
		return nil, fmt.Errorf("invalid node counts %d masters, %d workers", opts.Masters, opts.Workers)
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	bins, err := findBinaries(opts.ControlPlaneOnly, opts.needsKwok())
	if err != nil {
		return nil, err
	}
	removeStaleTempDirs()
	queued := time.Now()
	select {
	case startSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("starting cluster %s: waiting for a start slot: %w", opts.Name, ctx.Err())
	}
	defer func() { <-startSlots }()
	if waited := time.Since(queued); waited > time.Second {
		opts.Logf("Cluster %s: waited %s for one of the %d starts at once", opts.Name, waited.Round(100*time.Millisecond), cap(startSlots))
	}
	ctx, cancel := context.WithTimeout(ctx, machine.Scale(startTimeout))
	defer cancel()
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, opts, bins)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortConflict) || attempt == portAttempts || ctx.Err() != nil {
			return nil, fmt.Errorf("starting cluster %s: %w", opts.Name, err)
		}
		opts.Logf("Cluster %s: a port was taken before it could be bound, retrying with new ports", opts.Name)
	}
}

// needsKwok reports whether the cluster runs kwok: for its fake nodes, or on every cluster
// without real nodes (tests add fake nodes later). A cluster of real nodes only has nothing for
// it to manage.
func (o Options) needsKwok() bool {
	return o.RealNodes == nil || o.Masters+o.Workers > 0
}

// StartPair starts two clusters concurrently, typically a HyperShift management cluster and a
// guest cluster. If either fails, the other is stopped and both errors are returned.
func StartPair(ctx context.Context, mgmt, guest Options) (*Cluster, *Cluster, error) {
	if mgmt.Name == guest.Name && mgmt.WorkDir == guest.WorkDir && mgmt.WorkDir != "" {
		return nil, nil, fmt.Errorf("both clusters would use %s", filepath.Join(mgmt.WorkDir, mgmt.Name))
	}
	// Checked once up front so that missing binaries give one error rather than two.
	if _, err := findBinaries(mgmt.ControlPlaneOnly && guest.ControlPlaneOnly, mgmt.needsKwok() || guest.needsKwok()); err != nil {
		return nil, nil, err
	}
	var (
		wg                 sync.WaitGroup
		m, g               *Cluster
		mgmtErr, guestErr  error
		startCtx, cancelFn = context.WithCancel(ctx)
	)
	defer cancelFn()
	wg.Add(2)
	go func() {
		defer wg.Done()
		if m, mgmtErr = Start(startCtx, mgmt); mgmtErr != nil {
			cancelFn() // the pair is useless without both; stop waiting for the other one
		}
	}()
	go func() {
		defer wg.Done()
		if g, guestErr = Start(startCtx, guest); guestErr != nil {
			cancelFn()
		}
	}()
	wg.Wait()
	if mgmtErr == nil && guestErr == nil {
		return m, g, nil
	}
	var errs []error
	for _, c := range []*Cluster{m, g} {
		if c != nil {
			errs = append(errs, c.Stop())
		}
	}
	// The error of the cluster that failed first explains the failure; the other one was merely
	// cancelled, so it goes last.
	if errors.Is(mgmtErr, context.Canceled) {
		errs = append([]error{guestErr, mgmtErr}, errs...)
	} else {
		errs = append([]error{mgmtErr, guestErr}, errs...)
	}
	return nil, nil, errors.Join(errs...)
}

// Stop ends every process of the cluster (SIGTERM, then SIGKILL after a few seconds), waits
// until they are reaped, releases the ports and removes the working directory if Start created
// it. It is safe to call more than once; later calls return the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		start := time.Now()
		c.mu.Lock()
		running := c.procs
		c.mu.Unlock()
		// Clients go first, then the API server, then etcd: an API server whose etcd is gone
		// spends the whole grace period trying to remove its lease, while in this order the
		// whole cluster stops in about a second. Processes of one tier stop in parallel.
		for tier := len(stopTiers); tier >= 0; tier-- {
			var wg sync.WaitGroup
			for _, p := range running {
				if stopTier(p.Name()) != tier {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.Stop(stopGrace)
				}()
			}
			wg.Wait()
		}
		releasePorts(c.ports)
		if c.ownsDir {
			if err := os.RemoveAll(c.dir); err != nil {
				c.stopErr = fmt.Errorf("removing %s: %w", c.dir, err)
			}
		}
		c.logf("Cluster %s stopped in %s", c.name, time.Since(start).Round(time.Millisecond))
	})
	return c.stopErr
}

// KubeconfigPath returns the path of the admin kubeconfig (a token user in system:masters).
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// RESTConfig returns a copy of the admin client configuration. Client-side rate limits are
// raised because tests create objects in bursts and throttling would only slow them down.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// AuditLogPath returns the path of the API server's audit log, or "" when Audit was not set.
// Every request is recorded at Metadata level (user, impersonated user, user agent, verb,
// resource, namespace, name) except events and leases written by the controller-manager,
// scheduler and kwok.
func (c *Cluster) AuditLogPath() string { return c.auditLog }

// Name returns the cluster's name.
func (c *Cluster) Name() string { return c.name }

// Dir returns the cluster's directory, which holds logs/<component>.log.
func (c *Cluster) Dir() string { return c.dir }

// stopTiers lists the components others depend on, in start order; every other component is
// in the last tier and stops first.
var stopTiers = []string{"etcd", "kube-apiserver"}

// stopTier returns the shutdown tier of a component: higher tiers stop earlier.
func stopTier(name string) int {
	for i, n := range stopTiers {
		if n == name {
			return i
		}
	}
	return len(stopTiers)
}

// processes returns the processes started so far.
func (c *Cluster) processes() []*procs.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*procs.Process(nil), c.procs...)
}

// checkAlive returns an error quoting the log of the first process that has exited. During start
// every component is expected to keep running; one that could not bind its port marks the
// error with errPortConflict.
func (c *Cluster) checkAlive() error {
	err := procs.FirstExit(c.processes()...)
	if err != nil && strings.Contains(err.Error(), "address already in use") {
		return fmt.Errorf("%w: %w", errPortConflict, err)
	}
	return err
}

// start makes one attempt at starting the cluster; on error it stops what it started.
func start(ctx context.Context, opts Options, bins binaries) (_ *Cluster, err error) {
	begin := time.Now()
	c := &Cluster{name: opts.Name, logf: opts.Logf}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if err := c.prepareDir(opts.WorkDir); err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	for _, d := range []string{"pki", "etcd", "logs", "kubeconfigs", "kwok-home"} {
		dirs[d] = filepath.Join(c.dir, d)
		if err := os.MkdirAll(dirs[d], 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dirs[d], err)
		}
	}
	var extraIPs []net.IP
	if opts.RealNodes != nil {
		extraIPs = opts.RealNodes.ServingIPs
	}
	certs, err := writePKI(dirs["pki"], extraIPs...)
	if err != nil {
		return nil, err
	}
	ids, err := newIdentities()
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dirs["pki"], "tokens.csv")
	if err := writeTokenFile(tokenFile, ids); err != nil {
		return nil, err
	}
	c.ports, err = reservePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := c.ports[0], c.ports[1], c.ports[2]
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	kubeconfigs := map[string]string{}
	for user, id := range ids {
		kubeconfigs[user] = filepath.Join(dirs["kubeconfigs"], sanitize(user)+".kubeconfig")
		if err := writeKubeconfig(kubeconfigs[user], opts.Name, server, certs.caPEM, id); err != nil {
			return nil, err
		}
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := writeKubeconfig(c.kubeconfig, opts.Name, server, certs.caPEM, ids[adminUser]); err != nil {
		return nil, err
	}
	c.restConfig = &rest.Config{
		Host:            server,
		BearerToken:     ids[adminUser].token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certs.caPEM},
		QPS:             200,
		Burst:           400,
	}

	// etcd and the API server start together: the API server retries its etcd connection, and
	// starting them back to back saves the time etcd needs to come up.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.run("etcd", bins.etcd, nil,
		"--name=default",
		"--data-dir="+dirs["etcd"],
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// A throwaway cluster does not need durability; fsync dominates write latency on
		// slow CI disks.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	); err != nil {
		return nil, err
	}
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + dirs["pki"],
		"--tls-cert-file=" + certs.servingCert,
		"--tls-private-key-file=" + certs.servingKey,
		"--client-ca-file=" + certs.caCert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
		// As on OpenShift: an owner reference that blocks the owner's deletion needs update
		// on the owner's finalizers, so the install RBAC is checked for it.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.saPub,
		"--service-account-signing-key-file=" + certs.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	if opts.RealNodes != nil {
		apiArgs = append(apiArgs, "--kubelet-preferred-address-types=InternalIP")
		if opts.RealNodes.EgressSocket != "" {
			egress := filepath.Join(dirs["pki"], "egress-selector.yaml")
			if err := os.WriteFile(egress, []byte(egressSelectorConfig(opts.RealNodes.EgressSocket)), 0o600); err != nil {
				return nil, fmt.Errorf("writing egress selector configuration: %w", err)
			}
			apiArgs = append(apiArgs, "--egress-selector-config-file="+egress)
		}
	}
	if opts.Audit {
		policy := filepath.Join(dirs["pki"], "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, fmt.Errorf("writing audit policy: %w", err)
		}
		c.auditLog = filepath.Join(c.dir, "logs", "audit.log")
		apiArgs = append(apiArgs, "--audit-policy-file="+policy, "--audit-log-path="+c.auditLog,
			// Blocking mode writes each event before the response is sent, so a test can read
			// the log right after its request.
			"--audit-log-mode=blocking", "--audit-log-maxbackup=1")
	}
	if err := c.run("kube-apiserver", bins.apiserver, nil, apiArgs...); err != nil {
		return nil, err
	}
	if err := c.waitAPIServer(ctx, server, certs.caPEM, ids[adminUser].token); err != nil {
		return nil, err
	}
	opts.Logf("Cluster %s: API server ready at %s after %s", opts.Name, server, time.Since(begin).Round(time.Millisecond))
	machine.Started("cluster "+opts.Name+": API server", time.Since(begin))

	if !opts.ControlPlaneOnly {
		if err := c.run("kube-controller-manager", bins.controllerManager, nil,
			"--kubeconfig="+kubeconfigs[controllerManagerUser],
			"--service-account-private-key-file="+certs.saKey,
			"--root-ca-file="+certs.caCert,
			// nodeipam would need a cluster CIDR; kwok assigns pod IPs itself.
			"--controllers=*,-nodeipam",
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
			"--cluster-name="+opts.Name,
			// The default client limits (20 requests a second, bursts of 30) are sized for a
			// shared production API server; here they were the bottleneck: a management
			// cluster given 3000 Deployments at once took ten minutes to create their
			// ReplicaSets, and a DaemonSet reached 1000 nodes 250 pods every 12 s.
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			// kwok renews a node's status every 20 to 45 s. A kwok starved of CPU (a guest of
			// 1000 nodes on a loaded machine) can miss the default grace of 50 s; the
			// controller-manager then marks the nodes NotReady and their pods not ready, and
			// kwok, which readies only Pending pods, never readies them again: a DaemonSet
			// stays unavailable for good. Simulated nodes are never really gone.
			"--node-monitor-grace-period=5m",
			"--v=1",
		); err != nil {
			return nil, err
		}
		if err := c.run("kube-scheduler", bins.scheduler, nil,
			"--kubeconfig="+kubeconfigs[schedulerUser],
			"--leader-elect=false",
			"--secure-port=0",
			"--v=1",
		); err != nil {
			return nil, err
		}
		if opts.needsKwok() {
			// kwok also reads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a developer's
			// own kwok configuration out of the cluster. Without --server-address and --node-port
			// kwok opens no port.
			manage := []string{"--manage-all-nodes=true"}
			if opts.RealNodes != nil {
				manage = []string{"--manage-all-nodes=false", "--manage-nodes-with-label-selector=" + kwokNodeLabel + "=" + kwokNodeValue}
			}
			kwokArgs := append([]string{
				"--kubeconfig=" + kubeconfigs[kwokUser],
				"--config=" + bins.kwokStages,
				"--node-ip=" + fakeNodeIP,
				"--cidr=" + podCIDR,
			}, manage...)
			if err := c.run("kwok", bins.kwok, []string{"HOME=" + dirs["kwok-home"]}, kwokArgs...); err != nil {
				return nil, err
			}
		}
	}
	if err := c.bootstrap(ctx, opts); err != nil {
		return nil, err
	}
	opts.Logf("Cluster %s: started in %s (kubeconfig %s)", opts.Name, time.Since(begin).Round(time.Millisecond), c.kubeconfig)
	machine.Started("cluster "+opts.Name, time.Since(begin))
	return c, nil
}

// egressSelectorConfig returns an EgressSelectorConfiguration that sends the API server's
// "cluster" traffic through an HTTP CONNECT proxy on the unix socket at path; control-plane and
// etcd traffic stays direct.
func egressSelectorConfig(path string) string {
	return `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: ` + strconv.Quote(path) + `
`
}

// prepareDir creates the cluster directory. A directory left by an earlier run (it has the
// marker file) is wiped so that stale etcd data never leaks into a new cluster; any other
// non-empty directory is refused rather than deleted.
func (c *Cluster) prepareDir(workDir string) error {
	if workDir == "" {
		dir, err := os.MkdirTemp("", "localcluster-"+c.name+"-")
		if err != nil {
			return fmt.Errorf("creating temporary directory: %w", err)
		}
		c.dir, c.ownsDir = dir, true
		// The owner's pid lets a later Start remove this directory if this process is killed
		// before Stop runs (see removeStaleTempDirs).
		if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return fmt.Errorf("marking %s: %w", dir, err)
		}
		return nil
	}
	abs, err := filepath.Abs(filepath.Join(workDir, c.name))
	if err != nil {
		return fmt.Errorf("resolving work directory: %w", err)
	}
	c.dir = abs
	if entries, err := os.ReadDir(abs); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(abs, markerFile)); err != nil {
			return fmt.Errorf("%s is not empty and was not created by localcluster; refusing to wipe it", abs)
		}
		if err := os.RemoveAll(abs); err != nil {
			return fmt.Errorf("wiping %s: %w", abs, err)
		}
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", abs, err)
	}
	if err := os.WriteFile(filepath.Join(abs, markerFile), nil, 0o644); err != nil {
		return fmt.Errorf("marking %s: %w", abs, err)
	}
	return nil
}

// removeStaleTempDirs removes temporary cluster directories whose owning process is gone. A
// SIGKILLed test binary cannot run Stop; its children die with it (Pdeathsig) but its directory,
// with etcd data, would otherwise pile up in the temporary directory run after run. Directories
// without a marker are skipped: their owner may be between creating and marking them.
func removeStaleTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "localcluster-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, markerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(data))
		if err != nil || pid <= 0 {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// run starts a component in a process group of its own, so that Stop and Pause reach whatever
// it forks, and records it. extraEnv is added to the inherited environment. The start is logged
// so the log file can be found.
func (c *Cluster) run(name, bin string, extraEnv []string, args ...string) error {
	o := procs.Options{Name: name, Path: bin, Args: args, LogDir: filepath.Join(c.dir, "logs"), Group: true}
	if extraEnv != nil {
		o.Env = append(os.Environ(), extraEnv...)
	}
	p, err := procs.Start(o)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	c.logf("Cluster %s: started %s (pid %d, log %s)", c.name, name, p.Pid(), p.LogPath())
	return nil
}

// waitAPIServer polls /readyz with the admin token until it answers 200, a component exits or
// the context ends. /readyz includes the etcd check and the RBAC bootstrap, so once it passes
// the bootstrap roles and priority classes exist.
func (c *Cluster) waitAPIServer(ctx context.Context, server string, caPEM []byte, token string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	defer client.CloseIdleConnections()
	lastErr := errors.New("no answer yet")
	return c.poll(ctx, "the API server to become ready", func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		if err != nil {
			return false, fmt.Errorf("building readyz request: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			lastErr = err
			return false, nil //nolint:nilerr // not listening yet: poll again
		}
		_ = resp.Body.Close()
		lastErr = fmt.Errorf("readyz answered %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	}, func() error { return lastErr })
}

// poll calls cond every pollInterval until it returns true or an error, a component exits, or
// the context ends; then the error names what was awaited and, through last, why it did not
// happen.
func (c *Cluster) poll(ctx context.Context, what string, cond func() (bool, error), last func() error) error {
	return procs.Poll(ctx, procs.Wait{What: what, Interval: pollInterval, Alive: c.checkAlive, Last: last}, cond)
}

// reservedPorts are ports handed out to clusters of this process and not yet released, so that
// concurrent starts (StartPair) never pick the same port twice.
var (
	reservedMu    sync.Mutex
	reservedPorts = map[int]bool{}
)

// reservePorts picks n free loopback ports by binding port 0 and closing the listener. Another
// process may still grab one before the component binds it; Start retries in that case.
func reservePorts(n int) ([]int, error) {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choosing a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if reservedPorts[port] {
			continue
		}
		reservedPorts[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// releasePorts makes ports available to later clusters.
func releasePorts(ports []int) {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	for _, p := range ports {
		delete(reservedPorts, p)
	}
}

// sanitize turns a user name into a file name.
func sanitize(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch == ':' || ch == '/' {
			b[i] = '-'
		}
	}
	return string(b)
}
