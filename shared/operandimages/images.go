// Package operandimages resolves the operand images from the environment variables that
// control-plane-operator and cluster-storage-operator set. The lookup function is passed in, so
// the package itself never reads the environment and is trivially testable.
package operandimages

import (
	"fmt"
	"slices"
	"strings"
)

// Environment variable names.
const (
	EnvDriver                    = "DRIVER_IMAGE"
	EnvDriverControlPlane        = "DRIVER_CONTROL_PLANE_IMAGE"
	EnvProvisioner               = "PROVISIONER_IMAGE"
	EnvAttacher                  = "ATTACHER_IMAGE"
	EnvResizer                   = "RESIZER_IMAGE"
	EnvSnapshotter               = "SNAPSHOTTER_IMAGE"
	EnvNodeDriverRegistrar       = "NODE_DRIVER_REGISTRAR_IMAGE"
	EnvLivenessProbe             = "LIVENESS_PROBE_IMAGE"
	EnvLivenessProbeControlPlane = "LIVENESS_PROBE_CONTROL_PLANE_IMAGE"
	EnvKubeRBACProxy             = "KUBE_RBAC_PROXY_IMAGE"
	EnvKubeRBACProxyControlPlane = "KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE"
)

// Controller holds the images of the CSI controller Deployment.
type Controller struct {
	Driver, Provisioner, Attacher, Resizer, Snapshotter, LivenessProbe, KubeRBACProxy string
}

// Node holds the images of the node DaemonSet.
type Node struct {
	Driver, NodeDriverRegistrar, LivenessProbe string
}

// Lookup reads one environment variable, like os.LookupEnv.
type Lookup func(string) (string, bool)

// ControllerImages returns the controller images. On HyperShift the controller runs in the
// management cluster, so the *_CONTROL_PLANE_IMAGE variables (images from the control-plane
// release payload) are preferred and the plain ones are the fallback; cluster-storage-operator
// does not set every control-plane variant for Cinder. Every missing image is named in the error.
func ControllerImages(lookup Lookup, hypershift bool) (Controller, error) {
	r := resolver{lookup: lookup}
	c := Controller{
		Driver:        r.get(hypershift, EnvDriverControlPlane, EnvDriver),
		Provisioner:   r.get(false, "", EnvProvisioner),
		Attacher:      r.get(false, "", EnvAttacher),
		Resizer:       r.get(false, "", EnvResizer),
		Snapshotter:   r.get(false, "", EnvSnapshotter),
		LivenessProbe: r.get(hypershift, EnvLivenessProbeControlPlane, EnvLivenessProbe),
		KubeRBACProxy: r.get(hypershift, EnvKubeRBACProxyControlPlane, EnvKubeRBACProxy),
	}
	return c, r.err()
}

// NodeImages returns the node DaemonSet images (from the guest's release payload).
func NodeImages(lookup Lookup) (Node, error) {
	r := resolver{lookup: lookup}
	n := Node{
		Driver:              r.get(false, "", EnvDriver),
		NodeDriverRegistrar: r.get(false, "", EnvNodeDriverRegistrar),
		LivenessProbe:       r.get(false, "", EnvLivenessProbe),
	}
	return n, r.err()
}

type resolver struct {
	lookup  Lookup
	missing []string
}

func (r *resolver) get(preferFirst bool, first, fallback string) string {
	if preferFirst {
		if v, ok := r.lookup(first); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	if v, ok := r.lookup(fallback); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	if preferFirst {
		r.missing = append(r.missing, first+" (or "+fallback+")")
	} else {
		r.missing = append(r.missing, fallback)
	}
	return ""
}

func (r *resolver) err() error {
	if len(r.missing) == 0 {
		return nil
	}
	slices.Sort(r.missing)
	return fmt.Errorf("missing image environment variables: %s", strings.Join(r.missing, ", "))
}
