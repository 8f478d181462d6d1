package csioperator

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Field managers of what the platform writes beside csi-operator.
const (
	// NetworkOperatorManager fills the trusted CA bundle ConfigMap csi-operator creates.
	NetworkOperatorManager = "cluster-network-operator"
	// HostedConfigOperatorManager copies the credentials into the guest (HyperShift).
	HostedConfigOperatorManager = "hosted-cluster-config-operator"
)

// Install creates csi-operator's objects as csi-operator did, under its field manager, plus what
// the platform writes beside it: the guest's credentials Secret that hosted-cluster-config-operator
// copies (HyperShift), and the trusted CA bundle the network operator injects (when
// o.TrustedCA is set). mgmt and guest are the same cluster in standalone mode.
func Install(ctx context.Context, mgmt, guest client.Client, o Options, objs Objects) error {
	if o.HyperShift {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.CredentialsSecret},
			Data:       o.guestCredentials(),
		}
		if err := guest.Create(ctx, s, client.FieldOwner(HostedConfigOperatorManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the guest's credentials Secret: %w", err)
		}
	}
	for _, list := range []struct {
		c    client.Client
		objs []client.Object
	}{{mgmt, objs.Management}, {guest, objs.Guest}} {
		for _, obj := range list.objs {
			if err := list.c.Create(ctx, obj.DeepCopyObject().(client.Object), client.FieldOwner(FieldManager)); err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
			}
		}
	}
	if o.TrustedCA == "" {
		return nil
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: o.Namespace, Name: names.TrustedCABundleConfigMap}
	if err := mgmt.Get(ctx, key, cm); err != nil {
		return err
	}
	cm.Data = map[string]string{names.KeyTrustedCA: o.TrustedCA}
	if err := mgmt.Update(ctx, cm, client.FieldOwner(NetworkOperatorManager)); err != nil {
		return fmt.Errorf("injecting the trusted CA bundle: %w", err)
	}
	return nil
}

// RecordStableGeneration writes what csi-operator's node service controller (library-go's)
// writes once its DaemonSet is fully rolled out: the DaemonSet's generation in
// names.StableGenerationAnnotation, an update under csi-operator's field manager. Call it once the
// rollout is complete, as csi-operator's next sync would.
func RecordStableGeneration(ctx context.Context, guest client.Client) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := &appsv1.DaemonSet{}
		if err := guest.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, ds); err != nil {
			return err
		}
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[names.StableGenerationAnnotation] = strconv.FormatInt(ds.Generation, 10)
		return guest.Update(ctx, ds, client.FieldOwner(FieldManager))
	})
}

// Restore writes csi-operator's objects again as its next reconcile would after it replaced this
// operator: library-go's resourceapply updates each existing object (creating a missing one) under
// csi-operator's field manager, with the required spec and data, the existing labels and
// annotations merged under the required ones, and the trusted CA bundle's injected key kept.
// Update, unlike apply, takes whatever fields it changes from whoever owned them, so the
// template of each workload becomes csi-operator's again in one change.
func Restore(ctx context.Context, mgmt, guest client.Client, objs Objects) error {
	for _, list := range []struct {
		c    client.Client
		objs []client.Object
	}{{mgmt, objs.Management}, {guest, objs.Guest}} {
		for _, obj := range list.objs {
			if err := restore(ctx, list.c, obj); err != nil {
				return fmt.Errorf("updating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
			}
		}
	}
	return nil
}

func restore(ctx context.Context, c client.Client, required client.Object) error {
	want := required.DeepCopyObject().(client.Object)
	live := EmptyLike(want)
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), live); apierrors.IsNotFound(err) {
		return c.Create(ctx, want, client.FieldOwner(FieldManager))
	} else if err != nil {
		return err
	}
	want.SetResourceVersion(live.GetResourceVersion())
	want.SetLabels(merged(live.GetLabels(), want.GetLabels()))
	want.SetAnnotations(merged(live.GetAnnotations(), want.GetAnnotations()))
	switch w := want.(type) {
	case *corev1.ConfigMap:
		// library-go never overwrites what the network operator injected.
		if w.Labels[names.InjectTrustedCABundleLabel] == "true" {
			if ca, ok := live.(*corev1.ConfigMap).Data[names.KeyTrustedCA]; ok {
				if w.Data == nil {
					w.Data = map[string]string{}
				}
				w.Data[names.KeyTrustedCA] = ca
			}
		}
	case *corev1.Service:
		// The allocated address stays, as in any update of a Service.
		l := live.(*corev1.Service)
		w.Spec.ClusterIP, w.Spec.ClusterIPs = l.Spec.ClusterIP, l.Spec.ClusterIPs
		w.Spec.IPFamilies, w.Spec.IPFamilyPolicy = l.Spec.IPFamilies, l.Spec.IPFamilyPolicy
	}
	return c.Update(ctx, want, client.FieldOwner(FieldManager))
}

// EmptyLike returns an empty object of o's type (for unstructured ones, of its kind), to read o
// anew into: decoding into a used object would keep fields the server no longer has.
func EmptyLike(o client.Object) client.Object {
	if u, ok := o.(*unstructured.Unstructured); ok {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(u.GroupVersionKind())
		return fresh
	}
	return reflect.New(reflect.TypeOf(o).Elem()).Interface().(client.Object)
}

// merged returns base with over's entries on top.
func merged(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}
