package apply

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Op is what the operator was doing with an object when a request failed. Together with the
// object's kind and namespace it decides what a condition message asks the administrator to do,
// down to the RBAC verbs the request needed.
type Op string

const (
	// OpRead is a get, or a list, served by the informer cache or the API server.
	OpRead Op = "read"
	// OpApply is a server-side apply of an object's metadata and spec.
	OpApply Op = "apply"
	// OpAdopt is the JSON patch that moves the replaced operator's managed fields to the
	// applier's field owner.
	OpAdopt Op = "adopt"
	// OpDelete is a delete.
	OpDelete Op = "delete"
	// OpWriteStatus is a server-side apply through the status subresource.
	OpWriteStatus Op = "write status"
)

// Cluster names the cluster whose API server a request went to. On HyperShift the guest's
// administrator can act on the guest cluster only, so a condition message must say which one
// failed.
type Cluster string

const (
	// ClusterUnnamed is the one cluster of a standalone install, where telling "management"
	// from "guest" would only confuse.
	ClusterUnnamed Cluster = ""
	// ClusterManagement is the HyperShift management cluster (the hosted control plane
	// namespace).
	ClusterManagement Cluster = "management"
	// ClusterGuest is the HyperShift guest (hosted) cluster.
	ClusterGuest Cluster = "guest"
)

// ClusterFor returns c on HyperShift and ClusterUnnamed in a standalone install, where the
// management and guest clients talk to the same cluster.
func ClusterFor(hyperShift bool, c Cluster) Cluster {
	if hyperShift {
		return c
	}
	return ClusterUnnamed
}

// ObjectError is a failed request about one object: what was done (Op), on which cluster, to
// which kind in which namespace. The applier returns it for every failed read, apply, adoption
// and delete, so that the condition that reports the failure can name the kind, namespace and
// cluster with errors.As instead of quoting the API server's text.
type ObjectError struct {
	// Op is what was being done.
	Op Op
	// Cluster is the cluster whose API server was asked.
	Cluster Cluster
	// GVK is the object's kind. A list's kind is that of its items.
	GVK schema.GroupVersionKind
	// Resource is the kind's plural resource name (as RBAC rules name it), or "" when it is
	// not known.
	Resource string
	// Namespace is the object's namespace, "" for cluster-scoped kinds.
	Namespace string
	// Name is the object's name, "" for a list. It is for logs only: a name may be generated.
	Name string
	// Err is the error the client returned.
	Err error
}

// Error returns the failed action, the object and the underlying error, for logs.
func (e *ObjectError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op.gerund())
	b.WriteByte(' ')
	b.WriteString(e.GVK.Kind)
	switch {
	case e.Name == "" && e.Namespace != "":
		b.WriteString(" in namespace " + e.Namespace)
	case e.Name != "" && e.Namespace != "":
		b.WriteString(" " + e.Namespace + "/" + e.Name)
	case e.Name != "":
		b.WriteString(" " + e.Name)
	}
	if e.Cluster != ClusterUnnamed {
		b.WriteString(" on the " + string(e.Cluster) + " cluster")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the client's error, so that apierrors.IsNotFound and friends see through an
// ObjectError.
func (e *ObjectError) Unwrap() error { return e.Err }

// gerund is the op as it starts a log line.
func (o Op) gerund() string {
	switch o {
	case OpRead:
		return "reading"
	case OpApply:
		return "applying"
	case OpAdopt:
		return "taking over"
	case OpDelete:
		return "deleting"
	case OpWriteStatus:
		return "writing the status of"
	}
	return string(o)
}

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

// newObjectError returns an ObjectError about obj, its kind found in c's scheme or, when the Go
// type is not registered there, taken from what obj says about itself.
func newObjectError(c client.Client, op Op, cluster Cluster, obj runtime.Object, err error) *ObjectError {
	gvk, gerr := apiutil.GVKForObject(obj, c.Scheme())
	if gerr != nil {
		gvk = obj.GetObjectKind().GroupVersionKind()
	}
	oe := &ObjectError{Op: op, Cluster: cluster, GVK: gvk, Err: err}
	if o, ok := obj.(client.Object); ok {
		oe.Namespace, oe.Name = o.GetNamespace(), o.GetName()
	}
	oe.Resource = resourceFor(c, gvk)
	return oe
}

// resourceFor returns the plural resource of gvk as c's REST mapper knows it, or "". It runs
// only after a request failed, and a mapper that cannot answer (the kind is not served) is not
// an error of its own: the message then names the kind instead.
func resourceFor(c client.Client, gvk schema.GroupVersionKind) string {
	if c == nil || gvk.Kind == "" {
		return ""
	}
	m := c.RESTMapper()
	if m == nil {
		return ""
	}
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return ""
	}
	return mapping.Resource.Resource
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
