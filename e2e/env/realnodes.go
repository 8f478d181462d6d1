package env

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/pki"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// RealNodeOptions turn an environment's nodes into real ones: a kubelet and a private containerd
// per node, in network namespaces of their own (package realnode), running the operator's pods
// from images built here (package images) against the fake OpenStack, whose attachments are loop
// devices. In HyperShift mode the management cluster gets one real control-plane node, where the
// operator and the CSI controller run, and the guest one real worker, where the node plugin runs;
// in standalone mode the one cluster gets one real master that is also a worker, as a
// single-node OpenShift. The clusters get no kwok nodes: a pod that landed on one would only
// pretend to run.
type RealNodeOptions struct {
	// BinDir holds the kubelet and the operand binaries (`make operand-images`); the image
	// tars are packed there too, when missing.
	BinDir string
}

// RealNodes is the real part of an environment started with RealNodeOptions.
type RealNodes struct {
	// Images are the operand and test images, imported into every node.
	Images imagetars.Set
	// MgmtNode runs the operator and the CSI controller; GuestNode runs the node plugin and
	// the test pods. They are the same node in standalone mode.
	MgmtNode, GuestNode *realnode.Node
	// GuestServerID is the Nova server of the guest node: its metadata uuid, the driver's node
	// ID.
	GuestServerID string
	// Disks back the fake's volumes with loop devices.
	Disks *fakeopenstack.LoopDisks
	// OpenStackURL is where the fake OpenStack is reached inside the management node's
	// network namespace, the base of the auth_url in clouds.yaml.
	OpenStackURL string
	// MgmtKubeconfig and GuestKubeconfig are kubeconfig files that work inside the
	// management node's network namespace, where the operator runs.
	MgmtKubeconfig, GuestKubeconfig string
	// GuestKubeconfigInMgmt is the guest kubeconfig of the management node's pods
	// (service-network-admin-kubeconfig).
	GuestKubeconfigInMgmt []byte

	run *realnode.Run
	// clusters are the environment's numbers in the run's address plan (realnode.ClusterIP):
	// the management cluster's, then in HyperShift mode the guest's.
	clusters  []int
	listeners []net.Listener
	// cloudNode is the guest node's part in the real cloud, when the environment runs on one.
	cloudNode *realCloudNode
	// workers are the guest's workers added by AddWorker, in order.
	workers []*Worker
}

// Zone is the zone of the environment's real nodes and of the fake's default compute and
// volume zones.
func (e *Env) Zone() string { return e.options.Zones[0] }

// prepareRealNodes checks the host, packs the images, takes the host's real-node lock and
// creates the loop-device backend of the fake OpenStack, which is created next.
func (e *Env) prepareRealNodes(ctx context.Context) error {
	r := &RealNodes{}
	e.Real = r
	var err error
	if err := realnode.Check(); err != nil {
		return err
	}
	if r.Images, err = imagetars.BuildAll(ctx, e.options.RealNodes.BinDir); err != nil {
		return fmt.Errorf("operand images: %w", err)
	}
	count := 2
	if e.options.Mode == ModeStandalone {
		count = 1
	}
	if r.run, r.clusters, err = acquireRun(ctx, count); err != nil {
		return err
	}
	if e.options.RealCloud != nil {
		// The real cloud's follower gives the node its devices (wireRealCloud).
		return nil
	}
	r.Disks, err = newLoopDisks(e.Dir)
	return err
}

// mgmtCluster and guestCluster are the environment's cluster numbers in the address plan; they
// are the same in standalone mode.
func (r *RealNodes) mgmtCluster() int  { return r.clusters[0] }
func (r *RealNodes) guestCluster() int { return r.clusters[len(r.clusters)-1] }

// openStackIP is where the environment's OpenStack is reached inside the management node: the
// fake's address of the management cluster, or the real cloud's.
func (e *Env) openStackIP() net.IP {
	if e.options.RealCloud != nil {
		return RealCloudIP()
	}
	return realnode.FakeOpenStackIP(e.Real.mgmtCluster())
}

// startRealClusters starts the clusters prepared for real nodes, then the nodes, and wires the
// fake OpenStack into their network namespaces.
func (e *Env) startRealClusters(ctx context.Context, guestOpts localcluster.Options, mgmtCRDs []string) error {
	o := e.options
	r := e.Real
	snapshotCRDs, err := localcluster.SnapshotCRDs()
	if err != nil {
		return err
	}
	guestOpts.CRDs = append(guestOpts.CRDs, snapshotCRDs...)
	guestOpts.Masters, guestOpts.Workers = 0, 0

	pause := r.Images[imagetars.Pause]
	zone := e.Zone()
	// Every real node enforces NetworkPolicy, as an OpenShift cluster's network plugin does, so
	// the platform's policies that Start seeds hold for the operator and its operands.
	netpol := &realnode.NetworkPolicyOptions{KubeRouter: imagetars.KubeRouterPath(o.RealNodes.BinDir, imagetars.DefaultVersions())}
	nodeLabels := map[string]string{corev1.LabelTopologyZone: zone}
	if o.Mode == ModeStandalone {
		guestOpts.RealNodes = r.run.ClusterOptions(r.mgmtCluster())
		if e.Guest, err = localcluster.Start(ctx, guestOpts); err != nil {
			return err
		}
		e.Mgmt = e.Guest
		labels := mergeLabels(nodeLabels, map[string]string{
			"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "",
		})
		if r.GuestNode, err = r.run.StartNode(ctx, realnode.NodeOptions{
			Cluster: e.Guest, ClusterNumber: r.mgmtCluster(), Name: "master-0",
			Kubelet: imagetars.KubeletPath(o.RealNodes.BinDir, imagetars.DefaultVersions()), RootDir: realnode.DefaultRootDir,
			SandboxImage: pause.Ref, Images: r.Images.Tars(), Labels: labels,
			ExtraIPs:      []net.IP{e.openStackIP()},
			NetworkPolicy: netpol,
		}); err != nil {
			return err
		}
		r.MgmtNode = r.GuestNode
	} else {
		mgmtOpts := localcluster.Options{
			Name: "management", WorkDir: e.Dir, CRDs: mgmtCRDs, Audit: o.Audit, Logf: o.Logf,
			RealNodes: r.run.ClusterOptions(r.mgmtCluster()),
		}
		guestOpts.RealNodes = r.run.ClusterOptions(r.guestCluster())
		if e.Mgmt, e.Guest, err = localcluster.StartPair(ctx, mgmtOpts, guestOpts); err != nil {
			return err
		}
		kubelet := imagetars.KubeletPath(o.RealNodes.BinDir, imagetars.DefaultVersions())
		if r.MgmtNode, err = r.run.StartNode(ctx, realnode.NodeOptions{
			Cluster: e.Mgmt, ClusterNumber: r.mgmtCluster(), Name: "management-0", Kubelet: kubelet,
			SandboxImage: pause.Ref, Images: r.Images.Tars(),
			Labels:        mergeLabels(nodeLabels, map[string]string{names.ControlPlaneNodeLabel: "true"}),
			ExtraIPs:      []net.IP{e.openStackIP()},
			NetworkPolicy: netpol,
		}); err != nil {
			return err
		}
		if r.GuestNode, err = r.run.StartNode(ctx, realnode.NodeOptions{
			Cluster: e.Guest, ClusterNumber: r.guestCluster(), Name: "worker-0", Kubelet: kubelet,
			RootDir: realnode.DefaultRootDir, SandboxImage: pause.Ref, Images: r.Images.Tars(),
			Labels:        mergeLabels(nodeLabels, map[string]string{"node-role.kubernetes.io/worker": ""}),
			NetworkPolicy: netpol,
		}); err != nil {
			return err
		}
	}
	return e.wireRealNodes(ctx)
}

// wireRealNodes serves the fake OpenStack where the operator and the CSI controller run, the
// metadata service on the guest node, and writes the kubeconfigs that work inside the
// management node's network namespace.
func (e *Env) wireRealNodes(ctx context.Context) error {
	r := e.Real
	if e.options.RealCloud != nil {
		if err := e.wireRealCloud(ctx); err != nil {
			return err
		}
	} else if err := e.wireFakeCloud(); err != nil {
		return err
	}

	write := func(name string, data []byte) (string, error) {
		p := e.Path(name)
		return p, os.WriteFile(p, data, 0o600)
	}
	mgmtKC, err := realnode.Kubeconfig(e.Mgmt, realnode.APIServerURL(r.MgmtNode.IP()))
	if err != nil {
		return err
	}
	if r.MgmtKubeconfig, err = write("operator-management.kubeconfig", mgmtKC); err != nil {
		return err
	}
	if e.Mode == ModeStandalone {
		r.GuestKubeconfig = r.MgmtKubeconfig
		return nil
	}
	url, err := r.MgmtNode.ExposeAPIServer(e.Guest, r.guestCluster())
	if err != nil {
		return err
	}
	if r.GuestKubeconfigInMgmt, err = realnode.Kubeconfig(e.Guest, url); err != nil {
		return err
	}
	r.GuestKubeconfig, err = write("operator-guest.kubeconfig", r.GuestKubeconfigInMgmt)
	return err
}

// wireFakeCloud serves the fake OpenStack inside the management node and its metadata service,
// for the guest node's server, inside the guest node.
func (e *Env) wireFakeCloud() error {
	r := e.Real
	fakeIP := e.openStackIP()
	r.OpenStackURL = "https://" + fakeIP.String()
	if err := e.OpenStack.AddHosts(fakeIP.String()); err != nil {
		return err
	}
	api, err := r.MgmtNode.Listen("tcp", net.JoinHostPort(fakeIP.String(), "443"))
	if err != nil {
		return fmt.Errorf("fake OpenStack listener in node %s: %w", r.MgmtNode.Name(), err)
	}
	r.listeners = append(r.listeners, api)
	go func() { _ = e.OpenStack.Serve(api) }()

	r.GuestServerID = serverID(r.GuestNode.Name())
	if err := e.OpenStack.AddServer(fakeopenstack.ServerInfo{ID: r.GuestServerID, Name: r.GuestNode.Name(), Zone: e.Zone()}); err != nil {
		return err
	}
	md, err := r.GuestNode.Listen("tcp", "169.254.169.254:80")
	if err != nil {
		return fmt.Errorf("metadata listener in node %s: %w", r.GuestNode.Name(), err)
	}
	r.listeners = append(r.listeners, md)
	go func() { _ = e.OpenStack.ServeMetadata(md, r.GuestServerID) }()
	return nil
}

// seedRealNodes creates what the platform runs beside the operator on a real cluster: the
// metrics serving certificates that OpenShift's service-ca would issue for the controller's
// metrics Service (kube-rbac-proxy will not start without it) and the operator's, and the
// snapshot controller.
func (e *Env) seedRealNodes(ctx context.Context) error {
	r := e.Real
	ca, err := pki.NewCA("service-ca")
	if err != nil {
		return err
	}
	e.serviceCA = ca
	for secret, service := range map[string]string{
		names.ControllerMetricsSecret: names.ControllerMetricsService,
		csoServingSecret:              names.OperatorMetricsService,
	} {
		cert, key, err := e.servingCert(service + "." + e.Namespace + ".svc")
		if err != nil {
			return err
		}
		if err := createAll(ctx, e.MgmtClient, []client.Object{&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: secret},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
		}}); err != nil {
			return err
		}
	}
	objs := snapshotControllerObjects(r.Images[imagetars.SnapshotController].Ref)
	return createAll(ctx, e.GuestClient, objs)
}

// Nodes returns the environment's distinct nodes, the guest's first: two in HyperShift mode,
// the one node in standalone mode, none before they started; then the workers AddWorker added.
func (r *RealNodes) Nodes() []*realnode.Node {
	var nodes []*realnode.Node
	all := []*realnode.Node{r.GuestNode, r.MgmtNode}
	for _, w := range r.workers {
		all = append(all, w.Node)
	}
	for _, n := range all {
		if n != nil && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// stopReal stops the nodes (which unmounts every volume), gives the run back, then frees the
// loop devices.
func (r *RealNodes) stop() error {
	var errs []error
	for _, l := range r.listeners {
		_ = l.Close()
	}
	// A worker's server goes after its node, as the environment's own node's does below.
	for _, w := range r.workers {
		errs = append(errs, w.Stop())
	}
	if r.run != nil {
		for _, n := range r.Nodes() {
			errs = append(errs, n.Stop())
		}
		errs = append(errs, releaseRun(r.clusters))
	}
	if r.cloudNode != nil {
		errs = append(errs, r.cloudNode.stop())
	}
	if r.Disks != nil {
		errs = append(errs, r.Disks.Close())
	}
	return errors.Join(errs...)
}

// loopDisksParent holds one directory of loop-device backing files per environment. It is
// outside the realnode run directory so that the next environment can sweep what a killed one
// left (the by-id links in /dev) before the run directories are reused.
const loopDisksParent = "/run/cinder-csi-loopdisks"

// SweepLoopDisks removes what environments whose process was killed left in loopDisksParent: their
// loop devices (and any loop device bound onto them), by-id links and files. A directory whose
// owner still runs is left alone.
func SweepLoopDisks(log logr.Logger) error {
	entries, err := os.ReadDir(loopDisksParent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, ent := range entries {
		dir := filepath.Join(loopDisksParent, ent.Name())
		_, err := fakeopenstack.SweepLoopDisks(dir, log)
		switch {
		case errors.Is(err, fakeopenstack.ErrLoopDisksInUse):
		case err != nil:
			errs = append(errs, err)
		default:
			_ = os.Remove(dir)
		}
	}
	return errors.Join(errs...)
}

func newLoopDisks(envDir string) (*fakeopenstack.LoopDisks, error) {
	if err := fakeopenstack.LoopDisksAvailable(); err != nil {
		return nil, err
	}
	// What a killed environment left does not stop this one: its own directory is new.
	_ = SweepLoopDisks(logr.Discard())
	return fakeopenstack.NewLoopDisks(fakeopenstack.LoopOptions{Dir: filepath.Join(loopDisksParent, filepath.Base(envDir))})
}

// serverID derives a Nova server UUID from a node name, so that a node keeps its identity
// across restarts of the same environment, as an instance does.
func serverID(node string) string {
	h := fmt.Sprintf("%x", sha256.Sum256([]byte(node)))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func mergeLabels(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// servingCert returns a serving certificate (followed by the CA that signed it) and key for
// host, from the environment's service CA, as service-ca issues them for a Service's
// serving-cert Secret.
func (e *Env) servingCert(host string) (chainPEM, keyPEM []byte, err error) {
	if e.serviceCA == nil {
		return nil, nil, errors.New("no service CA: the environment runs no real nodes")
	}
	return e.serviceCA.ServingPEM(host, host)
}
