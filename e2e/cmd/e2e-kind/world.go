package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// fieldOwner is the field manager of what this runner applies in the operator's stead.
const fieldOwner = "cinder-csi-e2e-kind"

// world is the two clusters and the fake OpenStack, seen through admin clients.
type world struct {
	Namespace   string
	o           options
	mgmt, guest client.Client
	mgmtConfig  *rest.Config
	OpenStack   *fakeopenstack.Server
}

// newWorld connects to both clusters and starts the fake OpenStack on host, an address of this
// machine that the clusters' pods reach (kind: the kind network's gateway). Listening there
// makes the URLs in clouds.yaml and in the catalog the same for this machine and for the pods,
// and the serving certificate names it.
func newWorld(o options, mgmt, guest *rest.Config, host string) (*world, error) {
	scheme, err := clusters.NewScheme()
	if err != nil {
		return nil, err
	}
	w := &world{Namespace: "clusters-" + o.HostedCluster, o: o, mgmtConfig: mgmt}
	if w.mgmt, err = client.New(mgmt, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if w.guest, err = client.New(guest, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if w.OpenStack, err = fakeopenstack.New(fakeopenstack.Options{Addr: net.JoinHostPort(host, "0"), ExtraHosts: []string{host}}); err != nil {
		return nil, fmt.Errorf("starting the fake OpenStack on %s: %w", host, err)
	}
	logf("Fake OpenStack at %s", w.OpenStack.URL())
	return w, nil
}

// Close stops the fake OpenStack.
func (w *world) Close() { w.OpenStack.Close() }

// Prepare installs the CRDs, seeds both clusters and deploys the operator from its install
// manifests, then waits for the operator's Deployment to be available. guestKubeconfig is the
// guest admin kubeconfig as the management cluster's pods reach the guest.
func (w *world) Prepare(ctx context.Context, guestKubeconfig []byte) error {
	nodes := &corev1.NodeList{}
	if err := w.mgmt.List(ctx, nodes); err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		// The seeded HostedControlPlane's nodeSelector: nodes that may run control planes.
		n.Labels[names.ControlPlaneNodeLabel] = "true"
		if err := w.mgmt.Patch(ctx, n, patch); err != nil {
			return fmt.Errorf("labelling node %s: %w", n.Name, err)
		}
	}

	mgmtCRDs, err := localcluster.ManagementCRDs()
	if err != nil {
		return err
	}
	guestCRDs, err := localcluster.GuestCRDs()
	if err != nil {
		return err
	}
	if err := localcluster.InstallCRDs(ctx, w.mgmt, mgmtCRDs); err != nil {
		return err
	}
	if err := localcluster.InstallCRDs(ctx, w.guest, guestCRDs); err != nil {
		return err
	}

	seed := env.Seed{
		Mode: env.ModeHyperShift, Mgmt: w.mgmt, Guest: w.guest, Namespace: w.Namespace,
		HostedCluster: w.o.HostedCluster, OpenStack: w.OpenStack, GuestKubeconfig: guestKubeconfig,
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := seed.Create(sctx); err != nil {
		return fmt.Errorf("seeding the clusters: %w", err)
	}

	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	replace := install.Replacer(w.Namespace, w.o.OperatorImage, w.o.Images)
	for _, f := range []struct {
		c    client.Client
		path string
	}{
		{w.guest, "manifests/install/hypershift/guest.yaml"},
		{w.mgmt, "manifests/install/hypershift/management.yaml"},
	} {
		if err := install.Apply(ctx, f.c, filepath.Join(root, f.path), replace, fieldOwner, nil); err != nil {
			return err
		}
	}
	logf("Waiting for the operator Deployment in %s", w.Namespace)
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		dep := &appsv1.Deployment{}
		if err := w.mgmt.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: env.OperatorName(env.ModeHyperShift)}, dep); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return dep.Status.AvailableReplicas > 0, nil
	})
	if err != nil {
		w.DumpOperatorLogs(ctx)
		return fmt.Errorf("the operator Deployment did not become available: %w", err)
	}
	return nil
}

// DumpOperatorLogs prints the end of each operator container's log, for a failed run.
func (w *world) DumpOperatorLogs(ctx context.Context) {
	cs, err := kubernetes.NewForConfig(w.mgmtConfig)
	if err != nil {
		logf("Reading the operator's logs: %v", err)
		return
	}
	pods, err := cs.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=cinder-csi-operator"})
	if err != nil {
		logf("Listing the operator's pods: %v", err)
		return
	}
	tail := int64(60)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			b, err := cs.CoreV1().Pods(w.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				logf("Log of %s/%s: %v", p.Name, c.Name, err)
				continue
			}
			fmt.Fprintf(os.Stderr, "--- %s/%s (last %d lines) ---\n%s\n", p.Name, c.Name, tail, b)
		}
	}
}
