package realnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

func TestPlan(t *testing.T) {
	t.Run("When nodes of two clusters are planned, it should give them distinct addresses and subnets inside 10.200/10.201", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(NodeIP(1, 0).String()).To(Equal("10.200.1.10"))
		g.Expect(NodeIP(2, 3).String()).To(Equal("10.200.2.13"))
		g.Expect(APIServerIP(2).String()).To(Equal("10.200.2.3"))
		g.Expect(PodSubnet(1, 0).String()).To(Equal("10.201.16.0/24"))
		g.Expect(PodSubnet(2, 1).String()).To(Equal("10.201.33.0/24"))
		g.Expect(PodSubnet(MaxClusters, MaxNodesPerCluster-1).String()).To(Equal("10.201.255.0/24"))
		g.Expect(checkPlan(0, 0)).To(HaveOccurred())
		g.Expect(checkPlan(1, MaxNodesPerCluster)).To(HaveOccurred())
	})
	t.Run("When a run id and node name form a namespace name, it should find the run id again", func(t *testing.T) {
		g := NewWithT(t)
		id, ok := runIDOf("ccsi-0a1b2c-guest-real-0")
		g.Expect(ok).To(BeTrue())
		g.Expect(id).To(Equal("0a1b2c"))
		_, ok = runIDOf("ccsi-test-x")
		g.Expect(ok).To(BeFalse())
		_, ok = runIDOf("cni-1234")
		g.Expect(ok).To(BeFalse())
	})
}

func TestMountinfo(t *testing.T) {
	t.Run("When mountinfo escapes a space, it should unescape it", func(t *testing.T) {
		NewWithT(t).Expect(unescapeMount(`/a\040b`)).To(Equal("/a b"))
	})
	t.Run("When a path is compared with a directory, it should not match a sibling with the same prefix", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(under("/var/lib/kubelet/pods", "/var/lib/kubelet")).To(BeTrue())
		g.Expect(under("/var/lib/kubelet", "/var/lib/kubelet")).To(BeTrue())
		g.Expect(under("/var/lib/kubelet2", "/var/lib/kubelet")).To(BeFalse())
	})
}

// hostSnapshot is the host state a run must leave as it found it.
type hostSnapshot struct {
	devPropagation string
	sysctls        map[string]string
	paths          map[string]bool
	netns          []string
	cniResults     []string
	shimSockets    []string
}

// snapshotHost records the host state that real nodes touch.
func snapshotHost(t *testing.T) hostSnapshot {
	t.Helper()
	s := hostSnapshot{paths: map[string]bool{}}
	var err error
	if s.devPropagation, err = propagationOf("/dev"); err != nil {
		t.Fatal(err)
	}
	if s.sysctls, err = readSysctls(); err != nil {
		t.Fatal(err)
	}
	for _, p := range hostPathCandidates {
		_, err := os.Lstat(p)
		s.paths[p] = err == nil
	}
	s.netns = dirNames(netnsDir)
	s.cniResults = dirNames(cniResultsDir)
	s.shimSockets = dirNames(shimSocketDir)
	return s
}

// dirNames lists a directory's entries; a missing directory has none.
func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// snapshotUnderLock sweeps and snapshots the host while holding the host-wide lock, so that
// no other process's run is in the middle of changing it.
func snapshotUnderLock(t *testing.T) hostSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	lock, err := acquireLock(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseLock(lock)
	if err := sweepLocked(t.Logf); err != nil {
		t.Fatal(err)
	}
	return snapshotHost(t)
}

// expectNothingLeft checks that no trace of the node remains and the host is as before.
func expectNothingLeft(g Gomega, before hostSnapshot, n nodeRecord, runDir string) {
	after := hostSnapshot{paths: map[string]bool{}}
	after.devPropagation, _ = propagationOf("/dev")
	after.sysctls, _ = readSysctls()
	g.Expect(after.devPropagation).To(Equal(before.devPropagation), "/dev propagation")
	g.Expect(after.sysctls).To(Equal(before.sysctls), "kernel settings kubelet changes")
	for _, p := range hostPathCandidates {
		_, err := os.Lstat(p)
		g.Expect(err == nil).To(Equal(before.paths[p]), "existence of %s", p)
	}
	g.Expect(dirNames(netnsDir)).To(ConsistOf(before.netns), "network namespaces")
	g.Expect(dirNames(cniResultsDir)).To(ConsistOf(before.cniResults), "libcni result cache")
	g.Expect(dirNames(shimSocketDir)).To(ConsistOf(before.shimSockets), "shim sockets")
	dirs, err := cgroupDirs(n.Cgroup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dirs).To(BeEmpty(), "cgroups")
	mounts, err := mountsUnder(runDir, n.RootDir, "/run/containerd")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mounts).To(BeEmpty(), "mounts")
	g.Expect(n.Dir).NotTo(BeADirectory(), "node directory")
	g.Expect(runDir).NotTo(BeADirectory(), "run directory")
	g.Expect(foreignKubelets()).To(BeEmpty())
	// No process of the host runs in the node's namespace or cgroups.
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || exitedOrZombie(pid) {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cgroup"))
		if err == nil {
			g.Expect(string(cg)).NotTo(ContainSubstring(n.Cgroup), "cgroup of pid %s", p.Name())
		}
	}
	if entries, err := os.ReadDir(varLogContainers); err == nil {
		for _, e := range entries {
			dest, _ := os.Readlink(filepath.Join(varLogContainers, e.Name()))
			g.Expect(dest).NotTo(HavePrefix(runDir), "log link %s", e.Name())
		}
	}
}

// podImages builds the pause and toolbox images the test nodes run; a host that cannot build
// them is treated like one that cannot run real nodes.
func podImages(t *testing.T) (pause, toolbox imagetars.Built) {
	t.Helper()
	set, err := imagetars.Build(t.Context(), binDir(t), imagetars.DefaultVersions(), imagetars.Pause, imagetars.Toolbox)
	if err != nil {
		skipOrFail(t, fmt.Errorf("%w: building the pause and toolbox images: %w", ErrHostUnsupported, err))
	}
	return set[imagetars.Pause], set[imagetars.Toolbox]
}

func TestRealNode(t *testing.T) {
	run := NewRunForTest(t)
	// Taken under the run's lock, after its sweep: another process's run may have held the
	// host until then.
	before := snapshotHost(t)
	g := NewWithT(t)
	pause, toolbox := podImages(t)

	cluster := localcluster.StartForTest(t, localcluster.Options{Name: "rn", RealNodes: run.ClusterOptions(1)})
	node := StartNodeForTest(t, run, NodeOptions{
		Cluster: cluster, ClusterNumber: 1, Index: 0, RootDir: DefaultRootDir,
		SandboxImage: pause.Ref, Images: []string{pause.Tar, toolbox.Tar},
		Labels: map[string]string{"node-role.kubernetes.io/worker": "", "realnode.test/label": "yes"},
	})
	kubelet, containerd := node.Memory()
	t.Logf("Measured: node start (namespace, containerd, image import, kubelet to Ready) %s; RSS kubelet %d MiB, containerd %d MiB",
		node.StartDuration().Round(time.Millisecond), kubelet>>20, containerd>>20)

	cs, err := kubernetes.NewForConfig(cluster.RESTConfig())
	g.Expect(err).NotTo(HaveOccurred())
	k8sNode, err := cs.CoreV1().Nodes().Get(t.Context(), node.Name(), metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8sNode.Labels).To(HaveKeyWithValue("realnode.test/label", "yes"))
	g.Expect(k8sNode.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: node.IP().String()}))

	t.Run("When a listener is created in the node namespace, it should be reachable there and not from the host", func(t *testing.T) {
		g := NewWithT(t)
		ln, err := node.Listen("tcp", net.JoinHostPort(node.IP().String(), "7000"))
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = ln.Close() }()
		go func() {
			if c, err := ln.Accept(); err == nil {
				_, _ = c.Write([]byte("inside"))
				_ = c.Close()
			}
		}()
		c, err := DialIn(t.Context(), node.NetnsPath(), "tcp", ln.Addr().String())
		g.Expect(err).NotTo(HaveOccurred())
		got, _ := io.ReadAll(c)
		_ = c.Close()
		g.Expect(string(got)).To(Equal("inside"))
		// The address exists only inside the node: no host interface has it. (Dialling it from
		// the host would send the packet to the host's default route, off the machine.)
		addrs, err := net.InterfaceAddrs()
		g.Expect(err).NotTo(HaveOccurred())
		for _, a := range addrs {
			g.Expect(a.String()).NotTo(HavePrefix(node.IP().String()+"/"), "host address")
		}
		// Every thread of the process is back in the host namespace.
		host, err := os.Readlink("/proc/self/ns/net")
		g.Expect(err).NotTo(HaveOccurred())
		for _, task := range dirNames("/proc/self/task") {
			ns, err := os.Readlink("/proc/self/task/" + task + "/ns/net")
			if err == nil {
				g.Expect(ns).To(Equal(host), "thread %s", task)
			}
		}
	})

	podStart := time.Now()
	podNet := testPod("pod-net", toolbox.Ref, false)
	podHost := testPod("pod-host", toolbox.Ref, true)
	for _, p := range []*corev1.Pod{podNet, podHost} {
		p.Spec.NodeName = node.Name()
		_, err := cs.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	running := map[string]*corev1.Pod{}
	g.Eventually(func(g Gomega) {
		for _, name := range []string{podNet.Name, podHost.Name} {
			p, err := cs.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s: %v", name, p.Status)
			running[name] = p
		}
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	t.Logf("Measured: two pods Running %s after creation", time.Since(podStart).Round(time.Millisecond))

	t.Run("When pods run, the pod-network pod should get an address of the node's subnet and the hostNetwork pod the node IP", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(node.PodSubnet().Contains(net.ParseIP(running[podNet.Name].Status.PodIP))).To(BeTrue(), "pod IP %s", running[podNet.Name].Status.PodIP)
		g.Expect(running[podHost.Name].Status.PodIP).To(Equal(node.IP().String()))
	})

	t.Run("When the API server is asked for container logs, it should fetch them from the kubelet", func(t *testing.T) {
		for _, name := range []string{podNet.Name, podHost.Name} {
			g := NewWithT(t)
			g.Eventually(func() (string, error) {
				data, err := cs.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(t.Context())
				return string(data), err
			}).WithTimeout(30 * time.Second).Should(ContainSubstring("hello from " + name))
		}
	})

	t.Run("When a command is executed through the API server, it should run in the container and return its output", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := execInPod(t.Context(), cluster.RESTConfig(), cs, "default", podNet.Name, "sh", "-c", "cat /etc/hostname; echo to-stderr >&2")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(podNet.Name))
		g.Expect(errOut).To(Equal("to-stderr"))
		out, _, err = execInPod(t.Context(), cluster.RESTConfig(), cs, "default", podHost.Name,
			"cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("default"))
	})

	t.Run("When the pod's network namespace connects to the kubernetes Service, it should reach the API server", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range []string{podNet.Name, podHost.Name} {
			ns, err := node.PodNetns(running[name].UID)
			g.Expect(err).NotTo(HaveOccurred())
			version, err := getVersion(t.Context(), ns, "https://"+localcluster.KubernetesServiceIP+":443", cluster.RESTConfig())
			g.Expect(err).NotTo(HaveOccurred(), "pod %s", name)
			g.Expect(version).To(ContainSubstring("gitVersion"))
		}
	})

	t.Run("When a pod's port is forwarded or proxied through the API server, it should reach a listener inside the pod", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := node.PodNetns(running[podNet.Name].UID)
		g.Expect(err).NotTo(HaveOccurred())
		ln, err := ListenIn(ns, "tcp", ":8080")
		g.Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "served inside the pod")
		}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer func() { _ = srv.Close() }()

		body, err := cs.CoreV1().Pods("default").ProxyGet("http", podNet.Name, "8080", "/", nil).DoRaw(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(Equal("served inside the pod"))

		local, stop, err := portForward(cluster.RESTConfig(), cs, "default", podNet.Name, 8080)
		g.Expect(err).NotTo(HaveOccurred())
		defer stop()
		resp, err := http.Get("http://" + local + "/")
		g.Expect(err).NotTo(HaveOccurred())
		body, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(string(body)).To(Equal("served inside the pod"))
	})

	t.Run("When the node reboots, its processes and mounts should go, and it should come back Ready with its pods running in new containers", func(t *testing.T) {
		g := NewWithT(t)
		node.mu.Lock()
		oldMounts, oldKubelet := node.mounts.Pid(), node.kubelet.Pid()
		node.mu.Unlock()
		begin := time.Now()
		g.Expect(node.Reboot(t.Context())).To(Succeed())
		t.Logf("Measured: reboot to Ready %s", time.Since(begin).Round(time.Millisecond))
		node.mu.Lock()
		g.Expect(node.mounts.Pid()).NotTo(Equal(oldMounts), "a new mount namespace")
		g.Expect(node.kubelet.Pid()).NotTo(Equal(oldKubelet), "a new kubelet")
		node.mu.Unlock()
		for _, pid := range []int{oldMounts, oldKubelet} {
			g.Expect(exitedOrZombie(pid)).To(BeTrue(), "process %d of the node before the reboot", pid)
		}
		g.Eventually(func(g Gomega) {
			for _, name := range []string{podNet.Name, podHost.Name} {
				p, err := cs.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s: %v", name, p.Status)
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				st := p.Status.ContainerStatuses[0]
				g.Expect(st.Ready).To(BeTrue(), "pod %s", name)
				g.Expect(st.ContainerID).NotTo(Equal(running[name].Status.ContainerStatuses[0].ContainerID), "pod %s runs a new container", name)
			}
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	stopStart := time.Now()
	g.Expect(node.Stop()).To(Succeed())
	t.Logf("Measured: node stop %s", time.Since(stopStart).Round(time.Millisecond))
	g.Expect(run.Close()).To(Succeed())
	expectNothingLeft(g, before, node.rec, run.Dir())
}

// testPod returns a pod that prints a line naming itself and sleeps.
func testPod(name, image string, hostNetwork bool) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:                   hostNetwork,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", "echo hello from " + name + "; exec sleep 3600"},
			}},
		},
	}
}

// execInPod runs a command in a pod's first container through the API server, with the
// websocket protocol and SPDY as fallback (as kubectl does), returning stdout and stderr.
func execInPod(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns, pod string, cmd ...string) (stdout, stderr string, err error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return "", "", err
	}
	// Separate buffers: the executor writes the two streams from different goroutines.
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	return strings.TrimSpace(out.String()), strings.TrimSpace(errOut.String()), err
}

// getVersion asks the API server at server for /version from inside a network namespace,
// verifying its certificate with the cluster CA.
func getVersion(ctx context.Context, netnsPath, server string, cfg *rest.Config) (string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cfg.CAData)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialIn(ctx, netnsPath, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/version", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// portForward forwards a local loopback port to a pod's port through the API server (SPDY, as
// kubectl port-forward does) and returns the local address and a function that stops it.
func portForward(cfg *rest.Config, cs kubernetes.Interface, ns, pod string, port int) (string, func(), error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stopCh, readyCh, io.Discard, io.Discard)
	if err != nil {
		return "", nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-failed:
		return "", nil, fmt.Errorf("port-forward: %w", err)
	case <-time.After(30 * time.Second):
		close(stopCh)
		return "", nil, errors.New("port-forward not ready in time")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stopCh)
		return "", nil, fmt.Errorf("port-forward ports: %w", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), func() { close(stopCh) }, nil
}

// binDir returns the module's bin directory.
func binDir(t *testing.T) string {
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin")
}

// sweepChildEnv, when set, makes TestSweepAfterKill the child that starts a node and waits to be
// killed; its value is the file the child writes its node record to once a pod runs.
const sweepChildEnv = "REALNODE_SWEEP_CHILD"

func TestSweepAfterKill(t *testing.T) {
	if ready := os.Getenv(sweepChildEnv); ready != "" {
		runSweepChild(t, ready)
		return
	}
	if err := Check(); err != nil {
		skipOrFail(t, err)
	}
	if _, err := KubeletPath(); err != nil {
		skipOrFail(t, err)
	}
	if err := checkNetworkPolicy(&NetworkPolicyOptions{KubeRouter: imagetars.KubeRouterPath(binDir(t), imagetars.DefaultVersions())}); err != nil {
		skipOrFail(t, err)
	}
	g := NewWithT(t)
	before := snapshotUnderLock(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	logPath := filepath.Join(t.TempDir(), "child.log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = logFile.Close() }()
	child := exec.Command(os.Args[0], "-test.run=^TestSweepAfterKill$", "-test.v", "-test.timeout=5m")
	child.Env = append(os.Environ(), sweepChildEnv+"="+ready)
	child.Stdout, child.Stderr = logFile, logFile
	g.Expect(child.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	// Should the test fail before the kill, the child must not outlive it.
	defer func() { _ = child.Process.Kill() }()

	var rec struct {
		Node   nodeRecord
		RunDir string
	}
	deadline := time.After(4 * time.Minute)
	for rec.RunDir == "" {
		select {
		case err := <-exited:
			t.Fatalf("The child exited before its node ran a pod (%v):\n%s", err, procs.LogTail(logPath, 60))
		case <-deadline:
			t.Fatalf("The child's node did not run a pod in time:\n%s", procs.LogTail(logPath, 60))
		case <-time.After(200 * time.Millisecond):
		}
		if err := readJSON(ready, &rec); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}

	g.Expect(child.Process.Kill()).To(Succeed())
	g.Expect(<-exited).To(HaveOccurred(), "the killed child's exit status")
	// kubelet and containerd die with the child; the shims and containers do not.
	pids, err := cgroupPids(rec.Node.Cgroup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pids).NotTo(BeEmpty(), "containers surviving the killed run")
	g.Expect(NetnsPath(rec.Node.Netns)).To(BeAnExistingFile())
	// kube-router's rules and ipsets stay in the namespace after it died with the child; they
	// must go with the namespace.
	rules, err := exec.Command("nsenter", "--net="+NetnsPath(rec.Node.Netns), "--", "iptables-save", "-t", "filter").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rules)).To(ContainSubstring("-j KUBE-ROUTER-INPUT"), "kube-router's rules in the killed run's namespace")

	sweepStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	g.Expect(Sweep(ctx, t.Logf)).To(Succeed())
	t.Logf("Measured: sweep of a killed run %s", time.Since(sweepStart).Round(time.Millisecond))
	expectNothingLeft(g, before, rec.Node, rec.RunDir)
}

// runSweepChild starts a run, a cluster and a node that enforces NetworkPolicy with a running
// pod, reports the node's record in ready, and waits to be killed.
func runSweepChild(t *testing.T, ready string) {
	run := NewRunForTest(t)
	set, err := imagetars.Build(t.Context(), binDir(t), imagetars.DefaultVersions(), imagetars.Pause, imagetars.Toolbox)
	if err != nil {
		t.Fatal(err)
	}
	cluster := localcluster.StartForTest(t, localcluster.Options{Name: "rn-sweep", RealNodes: run.ClusterOptions(1)})
	node := StartNodeForTest(t, run, NodeOptions{
		Cluster: cluster, ClusterNumber: 1, Index: 0, RootDir: DefaultRootDir,
		SandboxImage: set[imagetars.Pause].Ref, Images: []string{set[imagetars.Pause].Tar, set[imagetars.Toolbox].Tar},
		NetworkPolicy: &NetworkPolicyOptions{KubeRouter: imagetars.KubeRouterPath(binDir(t), imagetars.DefaultVersions())},
	})
	cs, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod("survivor", set[imagetars.Toolbox].Ref, false)
	pod.Spec.NodeName = node.Name()
	if _, err := cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() (corev1.PodPhase, error) {
		p, err := cs.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return p.Status.Phase, nil
	}).WithTimeout(2 * time.Minute).Should(Equal(corev1.PodRunning))
	if err := writeJSON(ready, map[string]any{"Node": node.rec, "RunDir": run.Dir()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Minute)
}

func TestTwoClusters(t *testing.T) {
	run := NewRunForTest(t)
	// Taken under the run's lock, after its sweep: another process's run may have held the
	// host until then.
	before := snapshotHost(t)
	g := NewWithT(t)
	pause, toolbox := podImages(t)
	mgmt, guest := localcluster.StartPairForTest(t,
		localcluster.Options{Name: "mgmt", RealNodes: run.ClusterOptions(1)},
		localcluster.Options{Name: "guest", RealNodes: run.ClusterOptions(2)})

	tars := []string{pause.Tar, toolbox.Tar}
	mgmtNode := StartNodeForTest(t, run, NodeOptions{
		Cluster: mgmt, ClusterNumber: 1, Index: 0, SandboxImage: pause.Ref, Images: tars,
		Labels: map[string]string{"hypershift.openshift.io/control-plane": "true"},
	})
	guestNode := StartNodeForTest(t, run, NodeOptions{
		Cluster: guest, ClusterNumber: 2, Index: 0, RootDir: DefaultRootDir, SandboxImage: pause.Ref, Images: tars,
		ExtraIPs: []net.IP{FakeOpenStackIP(2)},
		Taints:   []corev1.Taint{{Key: "realnode.test/taint", Effect: corev1.TaintEffectNoSchedule}},
	})
	g.Expect(mgmtNode.RootDir()).To(HavePrefix(run.Dir()))
	t.Logf("Measured: management node Ready in %s, guest node in %s", mgmtNode.StartDuration().Round(time.Millisecond),
		guestNode.StartDuration().Round(time.Millisecond))

	t.Run("When the guest node's namespace is inspected, it should carry the node IP, the metadata address and the extra address on lo", func(t *testing.T) {
		g := NewWithT(t)
		out, err := guestNode.Command(t.Context(), "ip", "-o", "-4", "addr", "show", "dev", "lo").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		for _, ip := range []string{"10.200.2.10/32", MetadataIP + "/32", "10.200.2.2/32"} {
			g.Expect(string(out)).To(ContainSubstring(ip))
		}
		gn, err := kubernetes.NewForConfigOrDie(guest.RESTConfig()).CoreV1().Nodes().Get(t.Context(), guestNode.Name(), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gn.Spec.Taints).To(ContainElement(HaveField("Key", "realnode.test/taint")))
	})

	t.Run("When a management pod uses the exposed guest API server kubeconfig, it should list the guest's nodes", func(t *testing.T) {
		g := NewWithT(t)
		url, err := mgmtNode.ExposeAPIServer(guest, 2)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(url).To(Equal("https://10.200.2.3:6443"))
		kubeconfig, err := Kubeconfig(guest, url)
		g.Expect(err).NotTo(HaveOccurred())

		cs := kubernetes.NewForConfigOrDie(mgmt.RESTConfig())
		pod := testPod("controller", toolbox.Ref, false)
		pod.Spec.NodeName = mgmtNode.Name()
		_, err = cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() (corev1.PodPhase, error) {
			p, err := cs.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			pod = p
			return p.Status.Phase, nil
		}).WithTimeout(2 * time.Minute).Should(Equal(corev1.PodRunning))
		ns, err := mgmtNode.PodNetns(pod.UID)
		g.Expect(err).NotTo(HaveOccurred())

		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialIn(ctx, ns, network, addr)
		}
		nodes, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(ContainElement(HaveField("Name", guestNode.Name())))
	})

	g.Expect(run.Close()).To(Succeed())
	expectNothingLeft(g, before, mgmtNode.rec, run.Dir())
	expectNothingLeft(g, before, guestNode.rec, run.Dir())
}

func TestStartFailure(t *testing.T) {
	run := NewRunForTest(t)
	// Taken under the run's lock, after its sweep: another process's run may have held the
	// host until then.
	before := snapshotHost(t)
	g := NewWithT(t)
	cluster := localcluster.StartForTest(t, localcluster.Options{Name: "rn-fail", ControlPlaneOnly: true, RealNodes: run.ClusterOptions(1)})

	t.Run("When kubelet exits at start, it should fail with its log and leave nothing behind", func(t *testing.T) {
		g := NewWithT(t)
		_, err := run.StartNode(t.Context(), NodeOptions{
			Cluster: cluster, ClusterNumber: 1, Index: 0, RootDir: DefaultRootDir,
			SandboxImage: "localhost/cinder-csi-e2e/pause:none", Kubelet: "/bin/false",
		})
		g.Expect(err).To(MatchError(ContainSubstring("kubelet exited")))
		g.Expect(run.Nodes()).To(BeEmpty())
		dir := filepath.Join(run.Dir(), "nodes", "c1-rn-fail-real-0")
		expectNothingLeft(g, before, nodeRecord{Netns: namePrefix + run.ID() + "-c1-rn-fail-real-0",
			Cgroup: namePrefix + run.ID() + "-c1-rn-fail-real-0", Dir: dir, RootDir: DefaultRootDir}, dir)
	})

	t.Run("When kube-router exits at start, it should fail with its log and leave nothing behind", func(t *testing.T) {
		g := NewWithT(t)
		kubelet, err := KubeletPath()
		if err != nil {
			skipOrFail(t, err)
		}
		// A real kubelet registers the Node first: kube-router starts only then.
		_, err = run.StartNode(t.Context(), NodeOptions{
			Cluster: cluster, ClusterNumber: 1, Index: 0, Kubelet: kubelet,
			SandboxImage:  "localhost/cinder-csi-e2e/pause:none",
			NetworkPolicy: &NetworkPolicyOptions{KubeRouter: "/bin/false"},
		})
		g.Expect(err).To(MatchError(ContainSubstring("kube-router exited")))
		g.Expect(run.Nodes()).To(BeEmpty())
		dir := filepath.Join(run.Dir(), "nodes", "c1-rn-fail-real-0")
		expectNothingLeft(g, before, nodeRecord{Netns: namePrefix + run.ID() + "-c1-rn-fail-real-0",
			Cgroup: namePrefix + run.ID() + "-c1-rn-fail-real-0", Dir: dir, RootDir: filepath.Join(dir, "kubelet")}, dir)
	})

	t.Run("When kubelet's root directory is seen at a host path that holds someone else's files, the node should mount its own there in a namespace of its own and leave the host's alone", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(dir, "foreign"), nil, 0o600)).To(Succeed())
		_, err := run.StartNode(t.Context(), NodeOptions{
			Cluster: cluster, ClusterNumber: 1, Index: 0, RootDir: dir,
			SandboxImage: "localhost/cinder-csi-e2e/pause:none", Kubelet: "/bin/false",
		})
		g.Expect(err).To(MatchError(ContainSubstring("kubelet exited")))
		g.Expect(dirNames(dir)).To(ConsistOf("foreign"))
		mounts, err := mountsUnder(dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mounts).To(BeEmpty())
	})
	g.Expect(run.Close()).To(Succeed())
}

func TestSweepOrphans(t *testing.T) {
	if err := Check(); err != nil {
		skipOrFail(t, err)
	}
	t.Run("When a namespace and cgroup named like a run's have no run directory, it should kill their processes and remove both", func(t *testing.T) {
		g := NewWithT(t)
		name := namePrefix + "0f0f0f-orphan"
		hadNetnsDir := dirExists(netnsDir)
		g.Expect(createNetns(name)).To(Succeed())
		g.Expect(createCgroups(name)).To(Succeed())
		waited := sleepIn(t, g, name, "nsenter", "--net="+NetnsPath(name), "--")

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		g.Expect(Sweep(ctx, t.Logf)).To(Succeed())

		g.Eventually(waited).Should(Receive(), "the process in the orphaned cgroup")
		g.Expect(NetnsPath(name)).NotTo(BeAnExistingFile())
		dirs, err := cgroupDirs(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dirs).To(BeEmpty())
		if !hadNetnsDir {
			// Without a run record nobody knows that /run/netns was created for it.
			_ = unix.Unmount(netnsDir, unix.MNT_DETACH)
			_ = os.Remove(netnsDir)
		}
	})

	t.Run("When "+CgroupParentEnv+" names a cgroup limited to one CPU, a node's cgroups should nest under it with its CPU, and an orphan there should be swept", func(t *testing.T) {
		g := NewWithT(t)
		parent := fmt.Sprintf("cinder-csi-test-parent-%d", os.Getpid())
		v1, _, err := cgroupRoots()
		g.Expect(err).NotTo(HaveOccurred())
		name := filepath.Join(parent, namePrefix+"0f0f0e-orphan")
		t.Cleanup(func() {
			_ = killCgroups(name)
			_ = removeCgroups(name)
			for _, root := range v1 {
				_ = os.Remove(filepath.Join(root, parent))
			}
		})
		// The parent as make test-slow makes it: in the cpuset hierarchy only, with one CPU.
		var cpuset string
		for _, root := range v1 {
			if _, err := os.Stat(filepath.Join(root, "cpuset.cpus")); err == nil {
				cpuset = root
			}
		}
		g.Expect(cpuset).NotTo(BeEmpty(), "a cpuset hierarchy")
		g.Expect(os.Mkdir(filepath.Join(cpuset, parent), 0o755)).To(Succeed())
		mems, err := os.ReadFile(filepath.Join(cpuset, "cpuset.mems"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(cpuset, parent, "cpuset.mems"), bytes.TrimSpace(mems), 0o644)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(cpuset, parent, "cpuset.cpus"), []byte("0"), 0o644)).To(Succeed())
		t.Setenv(CgroupParentEnv, parent)

		g.Expect(cgroupParent()).To(Equal(parent))
		g.Expect(createCgroups(name)).To(Succeed())
		cpus, err := os.ReadFile(filepath.Join(cpuset, name, runtimeCgroup, "cpuset.cpus"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(string(cpus))).To(Equal("0"), "the parent's one CPU")
		waited := sleepIn(t, g, name)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		g.Expect(Sweep(ctx, t.Logf)).To(Succeed())
		g.Eventually(waited).Should(Receive(), "the process in the orphaned cgroup under the parent")
		dirs, err := cgroupDirs(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dirs).To(BeEmpty())
		g.Expect(filepath.Join(cpuset, parent)).To(BeADirectory(), "the parent is not the sweep's")
	})
}

// sleepIn starts a long sleep (behind prefix, a command that runs the rest) in the node cgroups
// name, killed when the test ends, and returns the channel its end is reported on.
func sleepIn(t *testing.T, g Gomega, name string, prefix ...string) <-chan error {
	t.Helper()
	args := slices.Concat(prefix, []string{"sleep", "300"})
	sleeper := exec.Command(args[0], args[1:]...)
	g.Expect(sleeper.Start()).To(Succeed())
	t.Cleanup(func() { _ = sleeper.Process.Kill() })
	g.Expect(joinCgroups(name, sleeper.Process.Pid)).To(Succeed())
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()
	return waited
}

// dirExists reports whether dir is an existing directory.
func dirExists(dir string) bool {
	info, err := os.Stat(dir)
	return err == nil && info.IsDir()
}
