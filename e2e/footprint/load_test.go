//go:build e2e

package footprint

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

const (
	// loadWorkers is how many namespaces are filled at once: enough to keep the API server
	// busy, few enough not to starve it on a small machine.
	loadWorkers = 16
	// loadLabel marks what busyManagement creates.
	loadLabel = "footprint.example.com/load"
	// payloadSize is the size of each ConfigMap's and Secret's data.
	payloadSize = 1024
	// deploymentsTimeout bounds the wait for the Deployment controller to catch up.
	deploymentsTimeout = 10 * time.Minute
)

// busyManagement fills the management cluster with what other tenants would have there:
// namespaces unrelated namespaces of objects objects each, a third each ConfigMaps and Secrets
// of about 1 KiB of data and Deployments of zero replicas (so no pod appears, but the
// Deployment controller creates a ReplicaSet for each). It then waits until the Deployment
// controller has caught up, so that the operator starts on a management cluster at rest. It
// returns lines for the summary.
func busyManagement(b *testing.B, e *env.Env, namespaces, objects int) []string {
	cfg := e.MgmtConfig()
	// The load is the point here: no client-side rate limit, the API server sets the pace.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "footprint-load"
	scheme, err := clusters.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	begin := time.Now()
	var (
		mu     sync.Mutex
		counts = map[string]int{}
		errs   []error
		wg     sync.WaitGroup
		next   = make(chan int)
	)
	for range loadWorkers {
		wg.Go(func() {
			for i := range next {
				created, err := fillNamespace(ctx, c, i, objects)
				mu.Lock()
				for k, n := range created {
					counts[k] += n
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range namespaces {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("filling the management cluster: %d namespaces failed, the first: %v", len(errs), errs[0])
	}
	created := time.Since(begin)
	total := counts["configmaps"] + counts["secrets"] + counts["deployments"]
	b.Logf("Created %d namespaces with %d objects on the management cluster in %s", namespaces, total, created.Round(100*time.Millisecond))

	// Each Deployment gets a ReplicaSet and a status from the Deployment controller, which
	// works through them at its own client's pace.
	caughtUp := time.Now()
	NewWithT(b).Eventually(func(g Gomega) {
		l := &appsv1.DeploymentList{}
		g.Expect(c.List(ctx, l, client.HasLabels{loadLabel})).To(Succeed())
		g.Expect(l.Items).To(HaveLen(counts["deployments"]))
		behind := 0
		for _, d := range l.Items {
			if d.Status.ObservedGeneration < d.Generation {
				behind++
			}
		}
		g.Expect(behind).To(BeZero(), "Deployments the Deployment controller has not observed yet")
	}).WithTimeout(deploymentsTimeout).WithPolling(5 * time.Second).Should(Succeed())
	b.Logf("Deployment controller caught up %s later", time.Since(caughtUp).Round(time.Second))
	return []string{
		fmt.Sprintf("management load: %d namespaces, %d objects (%d ConfigMaps and %d Secrets of %d bytes of data, %d Deployments of 0 replicas), created by %d workers in %s",
			namespaces, total, counts["configmaps"], counts["secrets"], payloadSize, counts["deployments"], loadWorkers, created.Round(100*time.Millisecond)),
		fmt.Sprintf("management load: the Deployment controller had observed every Deployment %s after that", time.Since(caughtUp).Round(time.Second)),
	}
}

// fillNamespace creates the namespace of index i and its objects, and returns how many of each
// resource it created.
func fillNamespace(ctx context.Context, c client.Client, i, objects int) (map[string]int, error) {
	created := map[string]int{}
	ns := fmt.Sprintf("tenant-%04d", i)
	labels := map[string]string{loadLabel: "true"}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
		return created, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	for j := range objects {
		meta := metav1.ObjectMeta{Namespace: ns, Labels: labels}
		var obj client.Object
		var resource string
		switch j % 3 {
		case 0:
			meta.Name = fmt.Sprintf("config-%d", j)
			obj, resource = &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config.yaml": payload(ns, j)}}, "configmaps"
		case 1:
			meta.Name = fmt.Sprintf("secret-%d", j)
			obj, resource = &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"token": []byte(payload(ns, j))}}, "secrets"
		default:
			meta.Name = fmt.Sprintf("app-%d", j)
			obj, resource = deployment(meta), "deployments"
		}
		if err := c.Create(ctx, obj); err != nil {
			return created, fmt.Errorf("creating %s %s/%s: %w", resource, ns, meta.Name, err)
		}
		created[resource]++
	}
	return created, nil
}

// payload returns payloadSize bytes of text that differ between objects, as real data does.
func payload(ns string, j int) string {
	line := fmt.Sprintf("%s/%d: key-%d = value-%d\n", ns, j, j, j)
	return strings.Repeat(line, payloadSize/len(line)+1)[:payloadSize]
}

// deployment returns a Deployment of zero replicas: its ReplicaSet exists, no pod does.
func deployment(meta metav1.ObjectMeta) *appsv1.Deployment {
	selector := map[string]string{"app": meta.Name}
	podLabels := map[string]string{"app": meta.Name, loadLabel: "true"}
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.example.com/tenant/app:1.0",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}
}
