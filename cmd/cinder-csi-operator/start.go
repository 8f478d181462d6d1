package main

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

// start runs m until SIGTERM or SIGINT.
func start(m *clusters.Manager) error {
	return m.Start(ctrl.SetupSignalHandler())
}
