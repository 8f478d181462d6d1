//go:build e2e

package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// explainPod logs, when t has failed, what a pod that would not start, end or go was waiting on:
// its status and events, the guest node's kubelet log lines about it and its volumes, and the
// end of the node plugin's log on that node, each under "WHY:", which make test's failure
// summary copies. A CI run keeps only the test's output, and the environment (with every log in
// it) goes with the test, so the output must say it.
//
// Call it deferred, before the wait that may fail: a failed Gomega assertion ends the test's
// goroutine, and only deferred calls still run.
func (w *world) explainPod(t testing.TB, ns, name string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := &corev1.Pod{}
	if err := w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Logf("WHY: pod %s/%s: %v", ns, name, err)
		return
	}
	deleting := ""
	if p.DeletionTimestamp != nil {
		deleting = fmt.Sprintf(", deleted %s ago", time.Since(p.DeletionTimestamp.Time).Round(time.Second))
	}
	var events []string
	list := &corev1.EventList{}
	if err := w.Guest.List(ctx, list, client.InNamespace(ns)); err == nil {
		for _, e := range list.Items {
			if e.InvolvedObject.UID == p.UID {
				events = append(events, fmt.Sprintf("event %s %s (%dx, last at %s): %s", e.Type, e.Reason, e.Count, e.LastTimestamp.Format(time.TimeOnly), e.Message))
			}
		}
	}
	t.Logf("WHY: pod %s/%s (uid %s, node %s%s): %s\n%s", ns, name, p.UID, p.Spec.NodeName, deleting, podSummary(p), strings.Join(events, "\n"))

	// The kubelet names a pod by its UID and a CSI volume by its handle.
	needles := []string{string(p.UID)}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName}, pvc); err != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv := &corev1.PersistentVolume{}
		if err := w.Guest.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err == nil && pv.Spec.CSI != nil {
			needles = append(needles, pv.Spec.CSI.VolumeHandle)
		}
	}
	if w.Env.Real != nil && w.Env.Real.GuestNode != nil {
		path := w.Env.Real.GuestNode.LogPath("kubelet")
		lines := procs.LogLinesNaming(path, needles, 40)
		if len(lines) == 0 {
			lines = []string{"(none)"}
		}
		t.Logf("WHY: kubelet log lines of node %s about %s:\n%s", p.Spec.NodeName, strings.Join(needles, ", "), strings.Join(lines, "\n"))
	}
	w.logNodePluginTail(ctx, t, p.Spec.NodeName)
}

// logNodePluginTail logs the end of the driver container's log of the node plugin pod on node.
func (w *world) logNodePluginTail(ctx context.Context, t testing.TB, node string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := w.Guest.List(ctx, pods, client.InNamespace(names.GuestNamespace)); err != nil {
		t.Logf("Listing the node plugin's pods: %v", err)
		return
	}
	cs, err := kubernetes.NewForConfig(w.Env.GuestConfig())
	if err != nil {
		t.Logf("Node plugin log: %v", err)
		return
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node || !strings.HasPrefix(p.Name, names.NodeDaemonSet+"-") {
			continue
		}
		b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: driverContainer, TailLines: ptr.To[int64](25)}).DoRaw(ctx)
		if err != nil {
			t.Logf("Node plugin pod %s: %v", p.Name, err)
			continue
		}
		t.Logf("WHY: node plugin pod %s (%s), the end of its %s log:\n%s", p.Name, podSummary(&p), driverContainer, strings.TrimRight(string(b), "\n"))
	}
}
