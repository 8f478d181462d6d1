package apply

import (
	"strings"

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
