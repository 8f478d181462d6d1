package access_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
)

func TestGate(t *testing.T) {
	t.Parallel()
	open := func(g *access.Gate, starts *int, startErr error) (bool, error) {
		c, _ := reviewer(t, func() error { return nil })
		return g.Open(context.Background(), c, "", "", "nodes", func() error {
			*starts++
			return startErr
		}, "Nodes may not be listed and watched")
	}

	t.Run("When the operator may watch, it should start the watch once, and again after Close", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var gate access.Gate
		starts := 0
		for range 2 {
			may, err := open(&gate, &starts, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(may).To(BeTrue())
		}
		g.Expect(starts).To(Equal(1))
		stops := 0
		g.Expect(gate.Close(func() error { stops++; return nil })).To(Succeed())
		g.Expect(gate.Close(func() error { stops++; return nil })).To(Succeed())
		g.Expect(stops).To(Equal(1), "a stopped watch is not stopped again")
		_, _ = open(&gate, &starts, nil)
		g.Expect(starts).To(Equal(2))
	})

	t.Run("When the start fails, it should return the error and start again on the next call", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var gate access.Gate
		starts := 0
		_, err := open(&gate, &starts, errors.New("no watch"))
		g.Expect(err).To(MatchError("no watch"))
		_, err = open(&gate, &starts, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(starts).To(Equal(2))
	})

	t.Run("When the operator may not watch, it should start nothing and say when to ask again", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, _ := reviewer(t, answers(t, errDenied))
		var gate access.Gate
		may, err := gate.Open(context.Background(), c, "", "", "nodes", func() error {
			t.Error("started a watch the operator may not make")
			return nil
		}, "Nodes may not be listed and watched")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(may).To(BeFalse())
		g.Expect(gate.Access.Recheck()).To(BeNumerically(">", 0))
	})
}
