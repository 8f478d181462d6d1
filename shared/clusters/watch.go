package clusters

import (
	"sync"
)

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
