//go:build e2e

package footprint

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	// keptZone is the volume zone of the per-zone class the kept-zone-class scenario keeps: no
	// zone of the fake OpenStack, so the operator no longer asks for its class.
	keptZone = "retired"
	// keptEvery makes every keptEvery-th claim one of the kept class; the others are
	// standard-csi's.
	keptEvery = 10
	// claimsPerNamespace is how many claims each namespace of the scenario holds.
	claimsPerNamespace = 100
	// bindTimeout bounds the wait for the PersistentVolume controller to bind every claim.
	bindTimeout = 15 * time.Minute
)

// keptClass is the name of the kept per-zone class.
var keptClass = "standard-csi-" + keptZone

// keptZoneClass prepares a guest of n claims, each bound to a PersistentVolume of its own, and a
// per-zone class the operator made when its zone was still asked for (its labels, standard-csi's
// shape) that one in keptEvery of them uses: the operator keeps that class for them, a state
// that lasts until an administrator acts. The claims are bound, as a real guest's mostly are,
// and because the PersistentVolume controller re-examines a pending claim every 15 s and
// records an Event each time, which would load the API servers the window measures. It
// returns lines for the summary.
func keptZoneClass(b *testing.B, e *env.Env, n int) []string {
	cfg := e.GuestConfig()
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
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: keptClass, Labels: map[string]string{
			names.ManagedByLabel: names.ManagedByValue, names.ZoneClassLabel: keptZone,
		}},
		Provisioner:       names.DriverName,
		Parameters:        map[string]string{"availability": keptZone},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if err := c.Create(ctx, class); err != nil {
		b.Fatalf("creating StorageClass %s: %v", keptClass, err)
	}

	begin := time.Now()
	namespaces := (n + claimsPerNamespace - 1) / claimsPerNamespace
	var (
		mu   sync.Mutex
		errs []error
		kept int
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range loadWorkers {
		wg.Go(func() {
			for i := range next {
				k, err := fillClaims(ctx, c, i, min(claimsPerNamespace, n-i*claimsPerNamespace))
				mu.Lock()
				kept += k
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
		b.Fatalf("creating the claims: %d namespaces failed, the first: %v", len(errs), errs[0])
	}
	created := time.Since(begin)
	b.Logf("Created %d claims and their PersistentVolumes in %d namespaces of the guest in %s", n, namespaces, created.Round(100*time.Millisecond))

	bound := time.Now()
	NewWithT(b).Eventually(func(g Gomega) {
		l := &corev1.PersistentVolumeClaimList{}
		g.Expect(c.List(ctx, l, client.HasLabels{loadLabel})).To(Succeed())
		g.Expect(l.Items).To(HaveLen(n))
		pending := 0
		for _, pvc := range l.Items {
			if pvc.Status.Phase != corev1.ClaimBound {
				pending++
			}
		}
		g.Expect(pending).To(BeZero(), "claims the PersistentVolume controller has not bound yet")
	}).WithTimeout(bindTimeout).WithPolling(5 * time.Second).Should(Succeed())
	b.Logf("PersistentVolume controller bound every claim %s later", time.Since(bound).Round(time.Second))
	return []string{
		fmt.Sprintf("guest load: %d claims in %d namespaces, each bound to a PersistentVolume of its own; %d of them of StorageClass %s, which carries the operator's labels and whose zone %q is none of the cloud's",
			n, namespaces, kept, keptClass, keptZone),
		fmt.Sprintf("guest load: created by %d workers in %s; every claim Bound %s after that", loadWorkers, created.Round(100*time.Millisecond), time.Since(bound).Round(time.Second)),
	}
}

// fillClaims creates namespace i of the scenario with its count claims, each with a
// PersistentVolume bound to it beforehand (claimRef and volumeName), and returns how many of them
// are of the kept class.
func fillClaims(ctx context.Context, c client.Client, i, count int) (int, error) {
	ns := fmt.Sprintf("claims-%03d", i)
	labels := map[string]string{loadLabel: "true"}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
		return 0, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	size := resource.MustParse("1Gi")
	kept := 0
	for j := range count {
		class := names.StorageClass
		if (i*claimsPerNamespace+j)%keptEvery == 0 {
			class = keptClass
			kept++
		}
		claim := fmt.Sprintf("data-%03d", j)
		pv := fmt.Sprintf("pv-%s-%s", ns, claim)
		if err := c.Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pv, Labels: labels},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              class,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: names.DriverName, VolumeHandle: fmt.Sprintf("footprint-%s-%s", ns, claim),
				}},
			},
		}); err != nil {
			return kept, fmt.Errorf("creating PersistentVolume %s: %w", pv, err)
		}
		if err := c.Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				StorageClassName: ptr.To(class),
				VolumeName:       pv,
			},
		}); err != nil {
			return kept, fmt.Errorf("creating claim %s/%s: %w", ns, claim, err)
		}
	}
	return kept, nil
}

// keptZoneWarning expects the zone warning to name the kept class and its claims: the operator
// has read the claims and kept the class, the state the window measures.
func keptZoneWarning(kept int) func(g Gomega, d *operatorv1.ClusterCSIDriver) {
	return func(g Gomega, d *operatorv1.ClusterCSIDriver) {
		w := conditions.Find(d.Status.Conditions, names.ConditionZoneWarning)
		g.Expect(w).NotTo(BeNil(), "no %s", names.ConditionZoneWarning)
		g.Expect(w.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", w.Reason, w.Message)
		g.Expect(w.Reason).To(Equal(names.ReasonZoneClassInUse), w.Message)
		g.Expect(w.Message).To(HavePrefix(fmt.Sprintf("StorageClass %s is kept because %d claims use it", keptClass, kept)))
	}
}
