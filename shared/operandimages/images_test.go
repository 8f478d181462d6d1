package operandimages

import (
	"testing"

	. "github.com/onsi/gomega"
)

// env returns a Lookup over vars.
func env(vars map[string]string) Lookup {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// allPlain sets every plain (non-control-plane) image variable.
func allPlain() map[string]string {
	return map[string]string{
		EnvDriver: "driver", EnvProvisioner: "provisioner", EnvAttacher: "attacher", EnvResizer: "resizer",
		EnvSnapshotter: "snapshotter", EnvNodeDriverRegistrar: "registrar", EnvLivenessProbe: "probe",
		EnvKubeRBACProxy: "proxy",
	}
}

func TestControllerImages(t *testing.T) {
	t.Parallel()
	plain := Controller{Driver: "driver", Provisioner: "provisioner", Attacher: "attacher", Resizer: "resizer",
		Snapshotter: "snapshotter", LivenessProbe: "probe", KubeRBACProxy: "proxy"}
	tests := []struct {
		name       string
		vars       map[string]string
		hypershift bool
		want       Controller
		wantErr    string
	}{
		{name: "When standalone, it should use the plain images", vars: allPlain(), want: plain},
		{
			name: "When standalone with control-plane images set, it should still use the plain images",
			vars: with(allPlain(), map[string]string{EnvDriverControlPlane: "cp-driver", EnvKubeRBACProxyControlPlane: "cp-proxy"}),
			want: plain,
		},
		{
			name: "When on HyperShift with control-plane images, it should prefer them",
			vars: with(allPlain(), map[string]string{
				EnvDriverControlPlane: "cp-driver", EnvLivenessProbeControlPlane: "cp-probe", EnvKubeRBACProxyControlPlane: "cp-proxy",
			}),
			hypershift: true,
			want: Controller{Driver: "cp-driver", Provisioner: "provisioner", Attacher: "attacher", Resizer: "resizer",
				Snapshotter: "snapshotter", LivenessProbe: "cp-probe", KubeRBACProxy: "cp-proxy"},
		},
		{
			name:       "When on HyperShift with a blank control-plane image, it should fall back to the plain one",
			vars:       with(allPlain(), map[string]string{EnvDriverControlPlane: "  "}),
			hypershift: true,
			want:       plain,
		},
		{
			name: "When values carry spaces, it should trim them",
			vars: with(allPlain(), map[string]string{EnvDriver: " driver\n"}),
			want: plain,
		},
		{
			name:       "When images are missing, it should name every one, sorted, and its fallback on HyperShift",
			vars:       map[string]string{EnvProvisioner: "provisioner", EnvResizer: "", EnvSnapshotter: "snapshotter", EnvKubeRBACProxy: "proxy"},
			hypershift: true,
			wantErr: "missing image environment variables: ATTACHER_IMAGE, " +
				"DRIVER_CONTROL_PLANE_IMAGE (or DRIVER_IMAGE), LIVENESS_PROBE_CONTROL_PLANE_IMAGE (or LIVENESS_PROBE_IMAGE), RESIZER_IMAGE",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := ControllerImages(env(tt.vars), tt.hypershift)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestNodeImages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		vars    map[string]string
		want    Node
		wantErr string
	}{
		{
			name: "When the guest images are set, it should use them and ignore the control-plane ones",
			vars: with(allPlain(), map[string]string{EnvDriverControlPlane: "cp-driver", EnvLivenessProbeControlPlane: "cp-probe"}),
			want: Node{Driver: "driver", NodeDriverRegistrar: "registrar", LivenessProbe: "probe"},
		},
		{
			name:    "When images are missing, it should name them sorted",
			vars:    map[string]string{EnvDriver: "driver"},
			wantErr: "missing image environment variables: LIVENESS_PROBE_IMAGE, NODE_DRIVER_REGISTRAR_IMAGE",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := NodeImages(env(tt.vars))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// with returns base with the entries of extra added or replaced.
func with(base, extra map[string]string) map[string]string {
	for k, v := range extra {
		base[k] = v
	}
	return base
}
