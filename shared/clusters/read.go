package clusters

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GetOptional reads an object that may not exist: found is false, and the error nil, when it
// does not.
func GetOptional(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object) (found bool, err error) {
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s: %w", key, err)
	}
	return true, nil
}

// LateWatch starts a watch once, when its kind is first found served: watching a kind the API
// server does not serve fails, and a CRD (the VolumeSnapshotClass's, the ServiceMonitor's) may
// appear at any time. A failed start (the kind's REST mapping not yet discovered, say) is tried
// again on the next call. The zero value is ready to use.
type LateWatch struct {
	mu      sync.Mutex
	started bool
}

// Start calls start unless an earlier call succeeded.
func (w *LateWatch) Start(start func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	if err := start(); err != nil {
		return err
	}
	w.started = true
	return nil
}
