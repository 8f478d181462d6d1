package env

import (
	"context"
	"reflect"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Edit reads obj (named by its name and namespace), lets mutate change it and writes it back
// with an Update as fieldManager, the way a user's `kubectl edit` does. It retries on conflicts:
// kube-controller-manager writes the status of workloads at any time, which changes their
// resourceVersion between the read and the write.
func Edit[T client.Object](ctx context.Context, c client.Client, obj T, fieldManager string, mutate func(T)) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		// Decode into an empty object: decoding into a used one keeps fields the server no
		// longer has.
		reflect.ValueOf(obj).Elem().SetZero()
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj, client.FieldOwner(fieldManager))
	})
}
