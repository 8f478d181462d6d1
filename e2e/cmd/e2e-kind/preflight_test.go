package main

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestPreflight(t *testing.T) {
	t.Parallel()
	o := options{NodeImage: "kindest/node:test", OperatorImage: "cinder-csi-operator:test"}
	allEnv := func(key string) string { return "img-" + key }
	local := map[string]bool{o.NodeImage: true, o.OperatorImage: true}
	for _, op := range operandImages {
		local[allEnv(op.Env)] = true
	}
	machine := func() probes {
		return probes{
			LookPath: func(string) (string, error) { return "/usr/bin/docker", nil },
			DockerUp: func(context.Context) error { return nil },
			HasImage: func(_ context.Context, ref string) bool { return local[ref] },
			Getenv:   allEnv,
		}
	}

	t.Run("When everything is on the machine, it should find nothing missing", func(t *testing.T) {
		NewWithT(t).Expect(preflight(context.Background(), machine(), o)).To(BeEmpty())
	})
	t.Run("When there is no docker command, it should say so and look no further", func(t *testing.T) {
		p := machine()
		p.LookPath = func(string) (string, error) { return "", errors.New("not found") }
		missing := preflight(context.Background(), p, o)
		g := NewWithT(t)
		g.Expect(missing).To(HaveLen(1))
		g.Expect(missing[0]).To(HavePrefix("docker: no docker command"))
	})
	t.Run("When the engine does not answer, it should say so with the engine's error", func(t *testing.T) {
		p := machine()
		p.DockerUp = func(context.Context) error { return errors.New("cannot connect to the daemon") }
		missing := preflight(context.Background(), p, o)
		NewWithT(t).Expect(missing).To(ConsistOf(ContainSubstring("cannot connect to the daemon")))
	})
	t.Run("When images cannot be had, it should name each one and each unset variable", func(t *testing.T) {
		p := machine()
		p.HasImage = func(_ context.Context, ref string) bool { return ref == o.OperatorImage }
		p.Getenv = func(key string) string {
			if key == "DRIVER_IMAGE" {
				return ""
			}
			return allEnv(key)
		}
		missing := preflight(context.Background(), p, o)
		g := NewWithT(t)
		g.Expect(missing).To(HaveLen(len(operandImages) + 1))
		g.Expect(missing).To(ContainElement(HavePrefix("image kindest/node:test (kind's node image")))
		g.Expect(missing).To(ContainElement(HavePrefix("DRIVER_IMAGE: not set")))
		g.Expect(missing).To(ContainElement(HavePrefix("image img-NODE_DRIVER_REGISTRAR_IMAGE (NODE_DRIVER_REGISTRAR_IMAGE)")))
		g.Expect(missing).NotTo(ContainElement(ContainSubstring(o.OperatorImage)))
	})
}
