package access

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Gate is a watch started late, behind an access check: the operator starts it on first need,
// once it may list and watch the kind, since a watch it may not make would be retried forever
// and every read of its cache would wait for it. Under RBAC that denies either verb the caller
// does without the watch, and the question is asked again after its interval, so that a grant
// made after start is taken up. The zero value is ready to use.
type Gate struct {
	// Access is the question whether the operator may list and watch the kind; its Recheck
	// says when a reconciler should come back to ask again.
	Access Question

	mu      sync.Mutex
	started bool
}

// Open asks Access whether the operator may list and watch resource (of group, in namespace
// ns; "" for every namespace), and logs denied with keysAndValues once, when the answer turns
// to no. When the operator may, Open calls start unless a call of start succeeded before and no
// Close followed; a failed start is tried again on the next call. start may be nil for a
// caller that starts the watch itself. Open reports whether the operator may watch the kind.
func (g *Gate) Open(ctx context.Context, c client.Client, ns, group, resource string, start func() error,
	denied string, keysAndValues ...any) (bool, error) {
	may, isDenied, err := g.Access.Allowed(ctx, c, ns, group, resource, "list", "watch")
	if err != nil {
		return false, err
	}
	if isDenied {
		logf.FromContext(ctx).Info(denied, keysAndValues...)
	}
	if !may || start == nil {
		return may, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return true, nil
	}
	if err := start(); err != nil {
		return true, err
	}
	g.started = true
	return true, nil
}

// Close calls stop when the watch was started, and counts it stopped once stop succeeded: the
// next Open starts it again.
func (g *Gate) Close(stop func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		return nil
	}
	if err := stop(); err != nil {
		return err
	}
	g.started = false
	return nil
}
