package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
)

// operandImages are the images the HyperShift install manifests name. The controller runs on
// the management cluster, the node plugin on the guest.
var operandImages = install.OperandImages

// probes are how preflight looks at the machine; tests replace them.
type probes struct {
	// LookPath finds a command.
	LookPath func(string) (string, error)
	// DockerUp says whether a Docker engine answers, with its error output when not.
	DockerUp func(ctx context.Context) error
	// HasImage says whether the engine's local image store holds ref.
	HasImage func(ctx context.Context, ref string) bool
	// Getenv reads the environment.
	Getenv func(string) string
}

// realProbes look at this machine.
func realProbes() probes {
	return probes{
		LookPath: exec.LookPath,
		DockerUp: func(ctx context.Context) error {
			out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
			}
			return nil
		},
		HasImage: func(ctx context.Context, ref string) bool {
			return exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", ref).Run() == nil
		},
	}
}

// preflight returns every reason the run cannot start, each a line naming what is missing and
// how to get it; none means go. It only looks: nothing is pulled, built or created, so on a
// machine that cannot run kind it answers within seconds.
func preflight(ctx context.Context, p probes, o options) []string {
	var missing []string
	if _, err := p.LookPath("docker"); err != nil {
		return append(missing, "docker: no docker command on PATH; kind runs its nodes as Docker containers")
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.DockerUp(dctx); err != nil {
		return append(missing, fmt.Sprintf("docker: the engine does not answer (%v)", err))
	}
	image := func(ref, what, how string) {
		if !p.HasImage(ctx, ref) {
			missing = append(missing, fmt.Sprintf("image %s (%s): not in the local image store; %s", ref, what, how))
		}
	}
	image(o.NodeImage, "kind's node image, KIND_NODE_IMAGE", "pull it, or set KIND_NODE_IMAGE to one that is present")
	image(o.OperatorImage, "the operator, IMAGE", "build it with `make image`")
	for _, op := range operandImages {
		ref := p.Getenv(op.Env)
		if ref == "" {
			missing = append(missing, fmt.Sprintf("%s: not set; it names the operand image the operator deploys", op.Env))
			continue
		}
		image(ref, op.Env, "pull it first")
	}
	return missing
}
