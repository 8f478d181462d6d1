//go:build e2e

package storage

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
)

// BenchmarkStorage measures, in each mode on real nodes, what a user waits for: from the
// operator's install manifests applied (its image imported, its pod started) to the driver
// Available, to the first claim Bound and to a pod Running with that volume mounted. The claim
// and the pod are created the moment the operator's pod is Ready, as a user who applies them
// right away would. It also reports the operator container's memory at rest as the kubelet
// reports it (working set and resident set), and how long the environment took to start
// (clusters, real nodes and image imports, from warm builds). Run it once per mode
// (-benchtime=1x, `make bench-storage`): one iteration is a whole environment.
func BenchmarkStorage(b *testing.B) {
	// restSettle is how long after its deployment began the operator is taken to be at rest.
	const restSettle = 90 * time.Second
	for _, mode := range []string{env.ModeHyperShift, env.ModeStandalone} {
		b.Run(mode, func(b *testing.B) {
			if b.N > 1 {
				b.Skip("one iteration is a whole environment: run with -benchtime=1x")
			}
			w := startWorld(b, mode, worldOptions{})
			ctx := context.Background()
			ns := w.namespace(b, "bench")
			if err := w.Guest.Create(ctx, claim(ns, "data", "", "1Gi")); err != nil {
				b.Fatal(err)
			}
			p := w.pod(ns, "user", "data", "echo mounted > /data/file && sleep 3600", corev1.RestartPolicyNever)
			if err := w.Guest.Create(ctx, p); err != nil {
				b.Fatal(err)
			}
			var available, bound, running time.Duration
			deadline := time.Now().Add(podTimeout)
			for (available == 0 || bound == 0 || running == 0) && time.Now().Before(deadline) {
				since := time.Since(w.OperatorStarted)
				if available == 0 && w.available(ctx) {
					available = since
				}
				pvc := &corev1.PersistentVolumeClaim{}
				if bound == 0 && w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc) == nil && pvc.Status.Phase == corev1.ClaimBound {
					bound = since
				}
				got := &corev1.Pod{}
				if running == 0 && w.Guest.Get(ctx, client.ObjectKeyFromObject(p), got) == nil && ready(got) {
					running = since
				}
				time.Sleep(100 * time.Millisecond)
			}
			if available == 0 || bound == 0 || running == 0 {
				b.Fatalf("not done within %s: available %s, bound %s, running %s", podTimeout, available, bound, running)
			}
			// The operator container's memory at rest, as the kubelet reports it: 90 s after its
			// deployment began, well past the install, averaged over ten readings.
			time.Sleep(time.Until(w.OperatorStarted.Add(restSettle)))
			var ws, rss uint64
			const readings = 10
			for range readings {
				s, r, err := w.Operator.Memory(ctx)
				if err != nil {
					b.Fatal(err)
				}
				ws, rss = ws+s, rss+r
				time.Sleep(time.Second)
			}
			b.ReportMetric(float64(ws)/readings/(1<<20), "operator-workingset-MiB")
			b.ReportMetric(float64(rss)/readings/(1<<20), "operator-rss-MiB")
			b.ReportMetric(w.EnvUp.Seconds(), "env-up-s")
			b.ReportMetric(available.Seconds(), "available-s")
			b.ReportMetric(bound.Seconds(), "pvc-bound-s")
			b.ReportMetric(running.Seconds(), "pod-running-s")
		})
	}
}
