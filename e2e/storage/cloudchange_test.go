//go:build e2e

package storage

import "testing"

// afterCloud has undo run once no world uses the cloud any more: when the lockstep's worlds have
// all ended, or, for a world with the cloud to itself, when the world's test ends. A change made
// in step calls it from inside the change, so that it is registered once.
func (w *world) afterCloud(undo func() error) {
	if w.lockstep == nil {
		w.cleanupAfterWorld(undo)
		return
	}
	// Called from a change: the lockstep's mutex is held by the world that makes it.
	w.lockstep.afterAll = append(w.lockstep.afterAll, undo)
}

// cloudChange makes change, a change of the cloud every world shares, in step with the other
// worlds (see lockstep); a world of its own cloud makes it at once.
func (w *world) cloudChange(t testing.TB, step string, change func() error) {
	t.Helper()
	if w.lockstep == nil {
		if err := change(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return
	}
	w.lockstep.together(t, step, change)
}
