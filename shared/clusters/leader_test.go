package clusters

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

func TestNewLeaderLock(t *testing.T) {
	t.Parallel()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// Building a lock sends no request, so the address needs no server.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	opts := Options{Name: "guest", LeaderElection: true, LeaderElectionNamespace: "clusters-example", LeaderElectionID: "lock"}

	t.Run("When an identity is given, it should hold the lease under it", func(t *testing.T) {
		g := NewWithT(t)
		o := opts
		o.LeaderElectionIdentity = "clusters-example/cinder-csi-operator-7d9f8-x2k4q"
		lock, _, err := newLeaderLock(cfg, scheme, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lock.Identity()).To(Equal(o.LeaderElectionIdentity))
		g.Expect(lock.Describe()).To(Equal("clusters-example/lock"))
	})

	t.Run("When no identity is given, it should choose a new one at every start", func(t *testing.T) {
		g := NewWithT(t)
		first, _, err := newLeaderLock(cfg, scheme, opts)
		g.Expect(err).NotTo(HaveOccurred())
		second, _, err := newLeaderLock(cfg, scheme, opts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(first.Identity()).To(MatchRegexp(`^.+_[0-9a-f-]{36}$`))
		g.Expect(second.Identity()).NotTo(Equal(first.Identity()))
	})
}
