package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// hyperShiftOperatorName is the operator's Deployment and ServiceAccount in the HyperShift
// install manifests, and the value of its pods' label app.
const hyperShiftOperatorName = "cinder-csi-operator"

// OperatorName returns the name of the operator's Deployment and ServiceAccount in mode's install
// manifests: standalone, csi-operator's (names.OperatorName), which OpenShift looks up; on
// HyperShift, the operator's own.
func OperatorName(mode string) string {
	if mode == ModeStandalone {
		return names.OperatorName
	}
	return hyperShiftOperatorName
}

// OperatorPodLabels returns the labels that select the operator's pods in mode's install
// manifests (its Deployment's selector): standalone, csi-operator's label name; on HyperShift,
// app.
func OperatorPodLabels(mode string) map[string]string {
	if mode == ModeStandalone {
		return map[string]string{"name": names.OperatorName}
	}
	return map[string]string{"app": hyperShiftOperatorName}
}

// installFieldOwner is the field manager of what the environment applies in an installer's stead.
const installFieldOwner = "cinder-csi-e2e-installer"

// operatorReadyTimeout bounds the wait for the operator's pod to become Ready: the image import,
// the pod's start and the caches' sync. A hang guard of the reference machine's, stretched on a
// slower one (package machine).
var operatorReadyTimeout = machine.Scale(3 * time.Minute)

// podPollInterval is how often the operator pod's status is looked at.
const podPollInterval = time.Second

// PodOptions configure the operator deployed as a pod.
type PodOptions struct {
	// Binary is the cinder-csi-operator binary packed into the operator's image.
	Binary string
	// ExtraArgs are appended to the operator container's arguments, for example a shorter
	// --topology-recheck-interval for a test.
	ExtraArgs []string
	// ManifestsRoot is the tree whose manifests/install are applied: the repository's own when
	// empty, an earlier release's (its binary in Binary) for an upgrade.
	ManifestsRoot string
	// Release names the release Binary is of when it is not this tree's (see
	// imagetars.BuildOperatorOf).
	Release string
	// Operands are the operand images' environment variables (DRIVER_IMAGE, ...) the manifests
	// get: the environment's images when nil. Their images must be on the nodes (ImportImages).
	Operands map[string]string
}

// OperatorPod is the operator as a platform runs it: its image built here, the install manifests
// (manifests/install) applied with the images and namespace filled in, its pod scheduled on the
// real node that runs the CSI controller (HyperShift: the management cluster's control-plane
// node; standalone: the master), with its ServiceAccount, probes, downward-API identity and
// resource requests.
type OperatorPod struct {
	// Image is the operator's image.
	Image imagetars.Built
	// Node is the real node the operator's pod runs on.
	Node *realnode.Node
	// Namespace is the operator's namespace: the HCP namespace, or openshift-cluster-csi-drivers.
	Namespace string
	// Name is the operator's Deployment (OperatorName).
	Name string

	podLabels map[string]string

	client    client.Client
	clientset kubernetes.Interface
	failed    chan error
	cancel    context.CancelFunc
	done      chan struct{}

	mu sync.Mutex
	// kills counts the container kills asked for through Kill; restarts up to that count are
	// expected, more are a crash.
	kills int32
	// deleting is set while DeletePod replaces the pod.
	deleting bool
}

// DeployOperator installs the operator from manifests/install on the environment's real nodes
// and returns once its pod is Ready. Stop (or the environment's end) stops watching it; the pod
// goes with the nodes.
func (e *Env) DeployOperator(ctx context.Context, o PodOptions) (*OperatorPod, error) {
	if e.Real == nil {
		return nil, errors.New("the operator runs as a pod only on real nodes")
	}
	img, root, err := e.operatorImage(ctx, o.Binary, o.Release)
	if err != nil {
		return nil, err
	}
	if err := e.applyInstall(ctx, img, root, o); err != nil {
		return nil, err
	}
	return e.watchOperator(ctx, img, OperatorName(e.Mode), OperatorPodLabels(e.Mode))
}

// UpgradeOperator replaces the operator that old watches by the one o describes, as a platform
// rolls a new release: the install manifests of o applied over those of old (same objects, new
// image and operand images), so that the operator's Deployment rolls out once. It returns once
// the Deployment has rolled out and a pod of the new image is Ready, and watches that one; old
// is no longer watched.
func (e *Env) UpgradeOperator(ctx context.Context, old *OperatorPod, o PodOptions) (*OperatorPod, error) {
	img, root, err := e.operatorImage(ctx, o.Binary, o.Release)
	if err != nil {
		return nil, err
	}
	// The old pod ends by the rollout: not a crash to report.
	old.Stop()
	if err := e.applyInstall(ctx, img, root, o); err != nil {
		return nil, err
	}
	name := OperatorName(e.Mode)
	if err := wait.PollUntilContextTimeout(ctx, podPollInterval, operatorReadyTimeout, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, d); err != nil {
			return false, nil //nolint:nilerr // A passing API error: poll again.
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.Replicas == want && d.Status.AvailableReplicas == want, nil
	}); err != nil {
		return nil, fmt.Errorf("waiting for the operator's Deployment to roll out the new release: %w", err)
	}
	return e.watchOperator(ctx, img, name, OperatorPodLabels(e.Mode))
}

// applyInstall applies the install manifests under root with the operator's image img and the
// operand images of o.
func (e *Env) applyInstall(ctx context.Context, img imagetars.Built, root string, o PodOptions) error {
	if o.ManifestsRoot != "" {
		root = o.ManifestsRoot
	}
	operands := o.Operands
	if operands == nil {
		operands = e.Real.Images.Env()
	}
	replace := install.Replacer(e.Namespace, img.Ref, operands)
	edit := func(u *unstructured.Unstructured) error {
		if u.GetKind() != "Deployment" || len(o.ExtraArgs) == 0 {
			return nil
		}
		containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return fmt.Errorf("reading the containers: %w", err)
		}
		if len(containers) == 0 {
			return errors.New("no containers")
		}
		c := containers[0].(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(c, "args")
		if err := unstructured.SetNestedStringSlice(c, append(args, o.ExtraArgs...), "args"); err != nil {
			return err
		}
		return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	}
	type file struct {
		c    client.Client
		path string
	}
	files := []file{{e.MgmtClient, "manifests/install/standalone/operator.yaml"}}
	if e.Mode == ModeHyperShift {
		files = []file{
			{e.GuestClient, "manifests/install/hypershift/guest.yaml"},
			{e.MgmtClient, "manifests/install/hypershift/management.yaml"},
		}
	}
	if e.Mode == ModeHyperShift {
		// What the HyperShift install manifest asks of the platform: the reviews of the
		// operator's own metrics endpoint (a namespaced Role cannot grant them).
		if err := BindAuthDelegator(ctx, e.MgmtClient, e.Namespace, OperatorName(e.Mode)); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := install.Apply(ctx, f.c, filepath.Join(root, f.path), replace, installFieldOwner, edit); err != nil {
			return err
		}
	}
	return nil
}

// ImportImages imports image tars into every real node of the environment, the workers added by
// AddWorker too, as a release's images reach every machine.
func (e *Env) ImportImages(ctx context.Context, tars ...string) error {
	if e.Real == nil {
		return errors.New("images are imported into real nodes: the environment has none")
	}
	for _, n := range e.Real.Nodes() {
		if err := n.ImportImages(ctx, tars...); err != nil {
			return fmt.Errorf("importing images into node %s: %w", n.Name(), err)
		}
	}
	return nil
}

// operatorImage builds the operator's image from binary and imports it on the management node;
// it also returns the repository root, where the manifests are.
func (e *Env) operatorImage(ctx context.Context, binary, release string) (imagetars.Built, string, error) {
	img, err := imagetars.BuildOperatorOf(e.options.RealNodes.BinDir, binary, release)
	if err != nil {
		return imagetars.Built{}, "", err
	}
	if err := e.Real.MgmtNode.ImportImages(ctx, img.Tar); err != nil {
		return imagetars.Built{}, "", fmt.Errorf("importing the operator image: %w", err)
	}
	root, err := localcluster.RepoRoot()
	return img, root, err
}

// watchOperator waits until the pod of the operator's Deployment name, selected by podLabels,
// is Ready, and watches it from then on.
func (e *Env) watchOperator(ctx context.Context, img imagetars.Built, name string, podLabels map[string]string) (*OperatorPod, error) {
	cs, err := kubernetes.NewForConfig(e.MgmtConfig())
	if err != nil {
		return nil, err
	}
	p := &OperatorPod{
		Image: img, Node: e.Real.MgmtNode, Namespace: e.Namespace, Name: name, podLabels: podLabels,
		client: e.MgmtClient, clientset: cs,
		failed: make(chan error, 1), done: make(chan struct{}),
	}
	if _, err := p.WaitReady(ctx, ""); err != nil {
		return nil, err
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.watch(watchCtx)
	return p, nil
}

// Stop stops watching the operator's pod. The pod itself runs until its node stops.
func (p *OperatorPod) Stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// PodLabels returns the labels that select the operator's pods: its Deployment's selector, which
// differs between the install manifests and cluster-storage-operator's Deployment on HyperShift.
func (p *OperatorPod) PodLabels() map[string]string { return p.podLabels }

// Failed receives an error when the operator's container ends without Kill or DeletePod having
// asked for it (a crash, a failed probe, an exit at start-up), or cannot start: a caller waiting
// for the driver to become available should say so rather than time out.
func (p *OperatorPod) Failed() <-chan error { return p.failed }

// Pod returns the operator's current pod: the newest one that is not being deleted.
func (p *OperatorPod) Pod(ctx context.Context) (*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := p.client.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels(p.podLabels)); err != nil {
		return nil, err
	}
	var newest *corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		if newest == nil || pod.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = pod
		}
	}
	if newest == nil {
		return nil, fmt.Errorf("no operator pod in %s", p.Namespace)
	}
	return newest, nil
}

// WaitReady waits until an operator pod other than notName is Ready, and returns it.
func (p *OperatorPod) WaitReady(ctx context.Context, notName string) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, podPollInterval, operatorReadyTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := p.Pod(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // Not created yet, or a passing API error: poll again.
		}
		last = pod
		if why := cannotStart(pod); why != "" {
			return false, fmt.Errorf("the operator pod %s cannot start: %s%s", pod.Name, why, p.logTail(pod))
		}
		return pod.Name != notName && podReady(pod), nil
	})
	if err != nil {
		if last != nil {
			return nil, fmt.Errorf("waiting for the operator pod to become Ready (%s): %w%s", podState(last), err, p.logTail(last))
		}
		return nil, fmt.Errorf("waiting for the operator pod to become Ready: %w", err)
	}
	return last, nil
}

// Kill kills the operator's container with SIGKILL, as an out-of-memory kill or a crash ends it,
// and returns the pod and the container's restart count before the kill; the kubelet restarts
// the container in the same pod.
func (p *OperatorPod) Kill(ctx context.Context) (*corev1.Pod, int32, error) {
	pod, err := p.Pod(ctx)
	if err != nil {
		return nil, 0, err
	}
	if len(pod.Status.ContainerStatuses) == 0 {
		return nil, 0, fmt.Errorf("the operator pod %s has no container status", pod.Name)
	}
	st := pod.Status.ContainerStatuses[0]
	p.mu.Lock()
	p.kills++
	p.mu.Unlock()
	if err := p.Node.KillContainer(ctx, st.ContainerID); err != nil {
		return nil, 0, err
	}
	return pod, st.RestartCount, nil
}

// WaitRestarted waits until the operator container of pod has restarted past restarts and is
// Ready again.
func (p *OperatorPod) WaitRestarted(ctx context.Context, pod *corev1.Pod, restarts int32) error {
	return wait.PollUntilContextTimeout(ctx, podPollInterval, operatorReadyTimeout, true, func(ctx context.Context) (bool, error) {
		cur := &corev1.Pod{}
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return false, nil //nolint:nilerr // A passing API error: poll again.
		}
		if len(cur.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		return cur.Status.ContainerStatuses[0].RestartCount > restarts && podReady(cur), nil
	})
}

// DeletePod deletes the operator's pod as a drain or an admin does (with its grace period, so
// the operator shuts down and releases its lease), waits for the Deployment's replacement to be
// Ready, and returns the old and the new pod.
func (p *OperatorPod) DeletePod(ctx context.Context) (old, replacement *corev1.Pod, err error) {
	if old, err = p.Pod(ctx); err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	p.deleting = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.deleting = false
		p.mu.Unlock()
	}()
	if err := p.client.Delete(ctx, old); err != nil {
		return nil, nil, fmt.Errorf("deleting the operator pod %s: %w", old.Name, err)
	}
	if replacement, err = p.WaitReady(ctx, old.Name); err != nil {
		return nil, nil, err
	}
	return old, replacement, nil
}

// watch reports on Failed a container that ends or cannot start unasked.
func (p *OperatorPod) watch(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(2 * podPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pod, err := p.Pod(ctx)
		if err != nil {
			continue
		}
		p.mu.Lock()
		kills, deleting := p.kills, p.deleting
		p.mu.Unlock()
		var why string
		switch {
		case deleting:
		case cannotStart(pod) != "":
			why = cannotStart(pod)
		case len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].RestartCount > kills:
			st := pod.Status.ContainerStatuses[0]
			why = fmt.Sprintf("its container restarted %d times, %d of them asked for", st.RestartCount, kills)
			if t := st.LastTerminationState.Terminated; t != nil {
				why += fmt.Sprintf("; it last ended with exit code %d (%s)", t.ExitCode, t.Reason)
			}
		}
		if why == "" {
			continue
		}
		select {
		case p.failed <- fmt.Errorf("the operator pod %s failed: %s%s", pod.Name, why, p.logTail(pod)):
		default:
		}
		return
	}
}

// Memory returns the operator container's memory as the kubelet reports it in its stats summary
// (what the platform's metrics and eviction decisions see): the working set and the resident set.
func (p *OperatorPod) Memory(ctx context.Context) (workingSet, rss uint64, err error) {
	pod, err := p.Pod(ctx)
	if err != nil {
		return 0, 0, err
	}
	raw, err := p.clientset.CoreV1().RESTClient().Get().
		Resource("nodes").Name(pod.Spec.NodeName).SubResource("proxy").Suffix("stats/summary").DoRaw(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the kubelet's stats summary of node %s: %w", pod.Spec.NodeName, err)
	}
	var summary struct {
		Pods []struct {
			PodRef struct {
				Name, Namespace string
			} `json:"podRef"`
			Containers []struct {
				Name   string `json:"name"`
				Memory *struct {
					WorkingSetBytes *uint64 `json:"workingSetBytes"`
					RSSBytes        *uint64 `json:"rssBytes"`
				} `json:"memory"`
			} `json:"containers"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		return 0, 0, fmt.Errorf("decoding the kubelet's stats summary: %w", err)
	}
	name := pod.Spec.Containers[0].Name
	for _, sp := range summary.Pods {
		if sp.PodRef.Name != pod.Name || sp.PodRef.Namespace != pod.Namespace {
			continue
		}
		for _, c := range sp.Containers {
			if c.Name == name && c.Memory != nil && c.Memory.WorkingSetBytes != nil && c.Memory.RSSBytes != nil {
				return *c.Memory.WorkingSetBytes, *c.Memory.RSSBytes, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("the kubelet's stats summary has no memory figures for %s/%s yet", pod.Name, name)
}

// logTail returns the end of the log of pod's operator container (the previous instance's when
// it restarted), indented under a heading, for an error message.
func (p *OperatorPod) logTail(pod *corev1.Pod) string {
	if len(pod.Spec.Containers) == 0 {
		return ""
	}
	tail := int64(15)
	opts := &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name, TailLines: &tail}
	if len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].LastTerminationState.Terminated != nil {
		opts.Previous = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := p.clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).DoRaw(ctx)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return fmt.Sprintf("\nlast lines of the operator's log (%s):\n  %s", pod.Name, strings.Join(lines, "\n  "))
}

// podReady reports the pod's Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// cannotStart names why the pod's container cannot start, for the waiting reasons that do not
// go away by themselves; "" otherwise.
func cannotStart(pod *corev1.Pod) string {
	if pod.Status.Phase == corev1.PodFailed {
		return "the pod failed: " + pod.Status.Reason + " " + pod.Status.Message
	}
	for _, st := range pod.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			switch w.Reason {
			case "CrashLoopBackOff", "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName":
				return w.Reason + ": " + w.Message
			}
		}
	}
	return ""
}

// podState summarises a pod's phase, conditions and container states for an error message.
func podState(pod *corev1.Pod) string {
	parts := []string{"pod " + pod.Name, "phase " + string(pod.Status.Phase)}
	if pod.Spec.NodeName == "" {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				parts = append(parts, "not scheduled: "+c.Message)
			}
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		switch {
		case st.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting (%s)", st.Name, st.State.Waiting.Reason))
		case st.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated (exit %d)", st.Name, st.State.Terminated.ExitCode))
		case st.State.Running != nil:
			parts = append(parts, fmt.Sprintf("%s running, ready %t, restarts %d", st.Name, st.Ready, st.RestartCount))
		}
	}
	return strings.Join(parts, ", ")
}

// BindAuthDelegator binds the ClusterRole system:auth-delegator (token and access reviews) to a
// ServiceAccount, as a cluster administrator does for a metrics endpoint that reviews its
// callers with the API server of the cluster its pod runs in.
func BindAuthDelegator(ctx context.Context, c client.Client, ns, sa string) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + ns + "-auth-delegator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}
	if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding system:auth-delegator to %s/%s: %w", ns, sa, err)
	}
	return nil
}
