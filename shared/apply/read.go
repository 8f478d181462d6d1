package apply

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The reads below are the client's, with a failure returned as an *ObjectError (OpRead) that
// names the kind, namespace and cluster, for the conditions that report it.

// Get reads key into obj through c and, when that fails, returns the error as an *ObjectError
// (OpRead) on cluster. A missing object is an error too, which apierrors.IsNotFound still
// recognises; callers that treat it as absence test for it as they would without this wrapper.
func Get(ctx context.Context, c client.Client, cluster Cluster, key client.ObjectKey, obj client.Object) error {
	err := c.Get(ctx, key, obj)
	if err == nil {
		return nil
	}
	oe := newObjectError(c, OpRead, cluster, obj, err)
	oe.Namespace, oe.Name = key.Namespace, key.Name
	return oe
}

// List lists into list through c and, when that fails, returns the error as an *ObjectError
// (OpRead) on cluster that names the items' kind and the namespace the options select.
func List(ctx context.Context, c client.Client, cluster Cluster, list client.ObjectList, opts ...client.ListOption) error {
	err := c.List(ctx, list, opts...)
	if err == nil {
		return nil
	}
	oe := newObjectError(c, OpRead, cluster, list, err)
	oe.GVK.Kind = strings.TrimSuffix(oe.GVK.Kind, "List")
	oe.Resource = resourceFor(c, oe.GVK)
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	oe.Namespace = lo.Namespace
	return oe
}

// GetOptional reads an object that may not exist: found is false, and the error nil, when it
// does not. Any other failure is an *ObjectError naming the cluster.
func GetOptional(ctx context.Context, c client.Client, cluster Cluster, key client.ObjectKey, obj client.Object) (found bool, err error) {
	if err := Get(ctx, c, cluster, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
