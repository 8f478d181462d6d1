package apply

import "k8s.io/apimachinery/pkg/runtime/schema"

// Active reports whether objects of kind gk are written with create and update: for the tests,
// which check when the fallback switches on and off.
func (f *UpdateFallback) Active(gk schema.GroupKind) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, on := f.on[gk]
	return on
}
