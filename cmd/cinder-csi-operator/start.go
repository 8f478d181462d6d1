package main

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/residency"
)

// trimDelay is how long after its caches have synced a manager unmaps the executable pages its
// start-up touched: long enough for the first reconciles of an install to be over.
const trimDelay = 30 * time.Second

// start runs m until SIGTERM or SIGINT. Beside it, on every replica (a standby holds its caches
// too), trimmer unmaps the start-up pages once start-up is over (see package residency).
func start(m *clusters.Manager) error {
	if err := m.Add(trimmer{m: m}); err != nil {
		return err
	}
	return m.Start(ctrl.SetupSignalHandler())
}

// trimmer is the runnable that calls residency.Trim once, trimDelay after the primary cache has
// synced.
type trimmer struct{ m *clusters.Manager }

// NeedLeaderElection is false: a standby replica trims too.
func (trimmer) NeedLeaderElection() bool { return false }

func (t trimmer) Start(ctx context.Context) error {
	if !t.m.GetCache().WaitForCacheSync(ctx) {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(trimDelay):
	}
	log := t.m.GetLogger().WithName("residency")
	before, after, err := residency.Trim()
	if err != nil {
		// Only memory is at stake: the operator works the same untrimmed.
		log.Info("Could not unmap the executable's start-up pages", "error", err.Error())
		return nil
	}
	log.V(1).Info("Unmapped the executable's start-up pages", "rssFileBeforeKiB", before>>10, "rssFileAfterKiB", after>>10)
	return nil
}
