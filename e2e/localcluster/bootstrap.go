package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

// Node labels and taints, as OpenShift and HyperShift set them.
const (
	// MasterRoleLabel is the legacy OpenShift control-plane role label.
	MasterRoleLabel = "node-role.kubernetes.io/master"
	// ControlPlaneRoleLabel is the upstream control-plane role label.
	ControlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"
	// WorkerRoleLabel is the OpenShift worker role label.
	WorkerRoleLabel = "node-role.kubernetes.io/worker"
	// ZoneLabel is the well-known topology zone label.
	ZoneLabel = "topology.kubernetes.io/zone"
)

// kwokNodeLabel and kwokNodeValue mark the fake nodes; with RealNodes kwok manages only these.
const (
	kwokNodeLabel = "type"
	kwokNodeValue = "kwok"
)

// auditPolicy records every request at Metadata level, which carries the user, impersonated
// user, user agent, verb and object reference. Events and leases written by the cluster's own
// components are left out: they are most of the traffic of an idle cluster and say nothing
// about the operator under test.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["` + controllerManagerUser + `", "` + schedulerUser + `", "` + kwokUser + `"]
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Metadata
`

// newScheme returns the scheme of the bootstrap client: core types plus CRDs.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering core types: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering CRD types: %w", err)
	}
	return s, nil
}

// bootstrap creates what every local cluster has besides the API server's own defaults: the
// nodes and the CRDs; then it waits until the cluster is usable. What HyperShift or an OpenShift
// installer would add (the HyperShift priority class among it) is env.Seed's, so that seeding a
// kind cluster adds the same.
func (c *Cluster) bootstrap(ctx context.Context, opts Options) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	cl, err := client.New(c.restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating bootstrap client: %w", err)
	}
	nodes := desiredNodes(opts)
	for i := range nodes {
		if err := createNode(ctx, cl, &nodes[i]); err != nil {
			return err
		}
	}
	if err := installCRDs(ctx, cl, opts.CRDs, c.checkAlive); err != nil {
		return err
	}
	if opts.ControlPlaneOnly {
		return nil
	}
	if err := c.waitNodesReady(ctx, cl, len(nodes)); err != nil {
		return err
	}
	// Pods are rejected by the ServiceAccount admission plugin until the controller-manager has
	// created the namespace's default service account; waiting here saves every caller a retry.
	return c.poll(ctx, "the default service account", func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	}, func() error { return errors.New("not created yet") })
}

// desiredNodes returns the fake nodes of a cluster: masters first, then workers.
func desiredNodes(opts Options) []corev1.Node {
	// Generous capacity so the scheduler never rejects a test pod for resources.
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	var nodes []corev1.Node
	for i := 0; i < opts.Masters+opts.Workers; i++ {
		role, index := "master", i
		if i >= opts.Masters {
			role, index = "worker", i-opts.Masters
		}
		name := opts.Name + "-" + role + "-" + strconv.Itoa(index)
		labels := map[string]string{
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"kubernetes.io/hostname": name,
			kwokNodeLabel:            kwokNodeValue,
		}
		for k, v := range opts.NodeLabels {
			labels[k] = v
		}
		if len(opts.Zones) > 0 {
			labels[ZoneLabel] = opts.Zones[i%len(opts.Zones)]
		}
		var taints []corev1.Taint
		if role == "master" {
			labels[MasterRoleLabel] = ""
			labels[ControlPlaneRoleLabel] = ""
			taints = []corev1.Taint{{Key: MasterRoleLabel, Effect: corev1.TaintEffectNoSchedule}}
		} else {
			labels[WorkerRoleLabel] = ""
		}
		nodes = append(nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   name,
				Labels: labels,
				// kwok's conventional marker; harmless with --manage-all-nodes and lets people
				// tell fake nodes apart.
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			},
			Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{
				Capacity:    resources.DeepCopy(),
				Allocatable: resources.DeepCopy(),
				NodeInfo: corev1.NodeSystemInfo{
					Architecture:    "amd64",
					OperatingSystem: "linux",
				},
			},
		})
	}
	return nodes
}

// createNode creates a node and makes sure its status carries capacity, which the API server may
// drop on create depending on the version.
func createNode(ctx context.Context, cl client.Client, node *corev1.Node) error {
	status := *node.Status.DeepCopy()
	if err := cl.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node %s: %w", node.Name, err)
	}
	if len(node.Status.Allocatable) > 0 {
		return nil
	}
	node.Status = status
	if err := cl.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("setting status of node %s: %w", node.Name, err)
	}
	return nil
}

// waitNodesReady waits until want nodes report Ready, which kwok does once it sees them.
func (c *Cluster) waitNodesReady(ctx context.Context, cl client.Client, want int) error {
	ready := 0
	return c.poll(ctx, "nodes to become Ready", func() (bool, error) {
		var list corev1.NodeList
		if err := cl.List(ctx, &list); err != nil {
			return false, fmt.Errorf("listing nodes: %w", err)
		}
		ready = 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= want, nil
	}, func() error { return fmt.Errorf("%d of %d nodes Ready", ready, want) })
}

// InstallCRDs creates the CustomResourceDefinitions in the YAML files (see ManagementCRDs and
// GuestCRDs) on the cluster cl talks to, leaving any that exists, and waits until each is
// served. Start installs Options.CRDs with it; other clusters (kind) get the same CRDs through it.
func InstallCRDs(ctx context.Context, cl client.Client, paths []string) error {
	return installCRDs(ctx, cl, paths, func() error { return nil })
}

// installCRDs is InstallCRDs; alive reports a dead cluster process, which ends the wait.
func installCRDs(ctx context.Context, cl client.Client, paths []string, alive func() error) error {
	crds, err := readCRDs(paths)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := cl.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		w := procs.Wait{What: "CRD " + crd.Name + " to be Established", Interval: pollInterval, Alive: alive,
			Last: func() error { return errors.New("not Established yet") }}
		err := procs.Poll(ctx, w, func() (bool, error) {
			var live apiextensionsv1.CustomResourceDefinition
			if err := cl.Get(ctx, client.ObjectKey{Name: crd.Name}, &live); err != nil {
				return false, fmt.Errorf("getting CRD %s: %w", crd.Name, err)
			}
			return clusters.Established(&live), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readCRDs decodes every CustomResourceDefinition in the given YAML files (one or more documents
// each). A CRD named twice is installed once, so callers may concatenate helper lists.
func readCRDs(paths []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	seen := map[string]bool{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("opening CRD file: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := dec.Decode(crd)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("decoding %s: %w", path, err)
			}
			if crd.Kind == "" && crd.Name == "" {
				continue // an empty document between separators
			}
			if crd.Kind != "CustomResourceDefinition" {
				_ = f.Close()
				return nil, fmt.Errorf("%s holds a %s, not a CustomResourceDefinition", path, crd.Kind)
			}
			if !seen[crd.Name] {
				seen[crd.Name] = true
				crds = append(crds, crd)
			}
		}
		_ = f.Close()
	}
	return crds, nil
}
