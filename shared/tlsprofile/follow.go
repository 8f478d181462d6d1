package tlsprofile

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Source is where a cluster keeps its TLS security profile: the object whose changes may change
// it, and how to read the profile from a reader that holds that kind.
type Source struct {
	// Kind is an empty object of the kind to watch.
	Kind client.Object
	// Read returns the profile, nil when the cluster sets none.
	Read func(ctx context.Context, r client.Reader) (*configv1.TLSSecurityProfile, error)
	// Describe names the source in logs.
	Describe string
}

// APIServerSource is a standalone OpenShift cluster's profile: the APIServer named cluster (a
// missing one means Intermediate).
func APIServerSource(name string) Source {
	return Source{
		Kind:     &configv1.APIServer{},
		Describe: "APIServer " + name,
		Read: func(ctx context.Context, r client.Reader) (*configv1.TLSSecurityProfile, error) {
			a := &configv1.APIServer{}
			if err := r.Get(ctx, client.ObjectKey{Name: name}, a); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, nil
				}
				return nil, fmt.Errorf("reading APIServer %s: %w", name, err)
			}
			return FromAPIServer(a), nil
		},
	}
}

// HostedControlPlaneSource is a hosted cluster's profile: that of the one HostedControlPlane in
// namespace (none, or more than one, means Intermediate).
func HostedControlPlaneSource(namespace string) Source {
	return Source{
		Kind:     &hyperv1.HostedControlPlane{},
		Describe: "the HostedControlPlane in namespace " + namespace,
		Read: func(ctx context.Context, r client.Reader) (*configv1.TLSSecurityProfile, error) {
			list := &hyperv1.HostedControlPlaneList{}
			if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
				return nil, fmt.Errorf("listing HostedControlPlanes in namespace %s: %w", namespace, err)
			}
			if len(list.Items) != 1 {
				return nil, nil
			}
			return FromHostedControlPlane(&list.Items[0]), nil
		},
	}
}

// Follower keeps Live at the profile Source holds, reading it from Cache whenever an object of
// Source's kind changes there: a watch, never a poll. It runs on every replica (a standby serves
// its metrics too) and shares the informer of the kind with any controller on the same cache.
type Follower struct {
	Cache  cache.Cache
	Source Source
	Live   *Live
	Log    logr.Logger
}

// NeedLeaderElection is false: every replica serves metrics.
func (*Follower) NeedLeaderElection() bool { return false }

// Start follows the profile until ctx ends.
func (f *Follower) Start(ctx context.Context) error {
	inf, err := f.Cache.GetInformer(ctx, f.Source.Kind)
	if err != nil {
		return fmt.Errorf("watching %s for the TLS security profile: %w", f.Source.Describe, err)
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default: // A read is already due; it will see this change too.
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	if err != nil {
		return fmt.Errorf("watching %s for the TLS security profile: %w", f.Source.Describe, err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if !f.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		p, err := f.Source.Read(ctx, f.Cache)
		if err != nil {
			// A read from a synced cache fails only on a programming error; the profile in
			// force stays, and the next change tries again.
			f.Log.Error(err, "Could not read the TLS security profile")
			continue
		}
		s := Resolve(p)
		if !f.Live.Set(s) {
			continue
		}
		f.Log.Info("Serving metrics with the TLS security profile", "profile", s.Profile, "minVersion", s.MinVersionName(),
			"cipherSuites", s.CipherSuites, "source", f.Source.Describe)
		if s.Problem != "" {
			f.Log.Info("The cluster's TLS security profile cannot be served; using Intermediate", "problem", s.Problem)
		}
	}
}
