// Package env starts the operator's whole local world in one call: a management and a guest
// cluster from upstream binaries (or, in standalone mode, one cluster), a fake OpenStack over
// HTTPS, and the objects HyperShift's control-plane-operator and hosted-cluster-config-operator
// (or, standalone, the installer and cluster-storage-operator) would have written. Integration
// tests, the e2e suite and `make run-local` all use it.
package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/pki"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Modes.
const (
	ModeHyperShift = "hypershift"
	ModeStandalone = "standalone"
)

// Defaults of the seeded hosted cluster.
const (
	DefaultHostedCluster = "example"
	DefaultInfraID       = "example-x7k2p"
	// CloudName is the clouds.yaml entry, as `hypershift create cluster openstack` writes it.
	CloudName = "openstack"
)

// Options configure an environment.
type Options struct {
	// Mode is ModeHyperShift (two clusters) or ModeStandalone (one).
	Mode string
	// Dir keeps the clusters' data, kubeconfigs and logs; empty means a temporary directory
	// removed on Stop.
	Dir string
	// HostedCluster names the hosted cluster; its HCP namespace is clusters-<name>.
	HostedCluster string
	// InfraID is the cluster's infrastructure ID (the HCP's spec.infraID, the Infrastructure's
	// infrastructureName), which the driver tags its volumes with (default DefaultInfraID).
	// Environments that share one real cloud take one each, so that each finds its own volumes.
	InfraID string
	// Masters and Workers are fake node counts of the guest (or the one standalone cluster);
	// the management cluster gets two control-plane nodes.
	Masters, Workers int
	// Zones are the OpenStack compute and volume availability zones (default "nova").
	Zones []string
	// Audit turns on the API servers' audit logs.
	Audit bool
	// HighlyAvailable seeds the HCP's controllerAvailabilityPolicy (or the standalone
	// Infrastructure's controlPlaneTopology) as HighlyAvailable.
	HighlyAvailable bool
	// Logf receives progress lines.
	Logf func(format string, args ...any)
	// RealNodes, when set, runs the operator's pods on real nodes (see RealNodeOptions).
	RealNodes *RealNodeOptions
	// AppCredentials are application credentials the fake OpenStack accepts besides the
	// default user's password, for example one a test rotates to.
	AppCredentials []fakeopenstack.AppCredential
	// RealCloud, when set, is the world's OpenStack instead of the fake: a running real cloud
	// started by StartRealCloud (its endpoints named where the environment relays them). It needs
	// RealNodes, and Zones default to its compute zones. The environment creates its guest node's
	// server there and deletes it on Stop; the cloud itself is the caller's to stop, so that one
	// cloud can serve several environments, at once or in turn.
	RealCloud *realcloud.Cloud
	// WithoutSnapshotClassCRD starts the guest without the VolumeSnapshotClass CRD, as a cluster
	// before its snapshot controller is installed; a test creates it later. Deleting the CRD of
	// a started cluster instead, and creating it again seconds later, is a different scenario:
	// the API server then serves the new CRD while it still tears down the old one's storage.
	WithoutSnapshotClassCRD bool
}

// Env is a running environment.
type Env struct {
	Mode string
	// Mgmt and Guest are the clusters; the same cluster in standalone mode.
	Mgmt, Guest *localcluster.Cluster
	// MgmtClient and GuestClient are admin clients.
	MgmtClient, GuestClient client.Client
	// Namespace is where the controller runs: the HCP namespace, or the guest namespace in
	// standalone mode.
	Namespace string
	// OpenStack is the fake OpenStack; nil when the environment runs on Options.RealCloud.
	OpenStack *fakeopenstack.Server
	// RealCloud is Options.RealCloud.
	RealCloud *realcloud.Cloud
	// Real is set when the environment runs on real nodes.
	Real *RealNodes
	// Dir is the environment's directory.
	Dir     string
	ownDir  bool
	options Options
	// serviceCA signs the serving certificates of the metrics Services, as OpenShift's
	// service-ca does (real nodes only).
	serviceCA *pki.CA
}

// InfraID is the cluster's infrastructure ID (Options.InfraID).
func (e *Env) InfraID() string { return e.options.InfraID }

// ServiceCA is the CA of the metrics Services' serving certificates (PEM), what OpenShift's
// monitoring trusts for them; nil without real nodes.
func (e *Env) ServiceCA() []byte {
	if e.serviceCA == nil {
		return nil
	}
	return e.serviceCA.PEM
}

// Start starts an environment: clusters and fake OpenStack concurrently, then the seed objects.
// On error everything started is stopped again.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	if o.Mode == "" {
		o.Mode = ModeHyperShift
	}
	if o.Mode != ModeHyperShift && o.Mode != ModeStandalone {
		return nil, fmt.Errorf("unknown mode %q", o.Mode)
	}
	if o.HostedCluster == "" {
		o.HostedCluster = DefaultHostedCluster
	}
	if o.InfraID == "" {
		o.InfraID = DefaultInfraID
	}
	if o.Masters == 0 && o.Workers == 0 {
		o.Masters, o.Workers = 1, 2
	}
	if o.RealCloud != nil && o.RealNodes == nil {
		return nil, errors.New("an environment on the real OpenStack needs real nodes: simulated ones could not use its volumes")
	}
	switch {
	case len(o.Zones) > 0:
	case o.RealCloud != nil:
		o.Zones = o.RealCloud.ComputeZones()
	default:
		o.Zones = []string{fakeopenstack.DefaultZone}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	e := &Env{Mode: o.Mode, Dir: o.Dir, RealCloud: o.RealCloud, options: o}
	if e.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "cinder-csi-env-"); err != nil {
			return nil, err
		}
		e.ownDir = true
	}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()

	zones := make([]fakeopenstack.Zone, 0, len(o.Zones))
	for _, z := range o.Zones {
		zones = append(zones, fakeopenstack.Zone{Name: z, Available: true})
	}
	fakeOpts := fakeopenstack.Options{ComputeZones: zones, VolumeZones: zones, AppCredentials: o.AppCredentials}
	if o.RealNodes != nil {
		if err := e.prepareRealNodes(ctx); err != nil {
			return nil, err
		}
		fakeOpts.Disks = e.Real.Disks
	}
	if o.RealCloud == nil {
		if e.OpenStack, err = fakeopenstack.New(fakeOpts); err != nil {
			return nil, fmt.Errorf("starting the fake OpenStack: %w", err)
		}
	}

	if err := e.startClusters(ctx); err != nil {
		return nil, err
	}

	scheme, err := clusters.NewScheme()
	if err != nil {
		return nil, err
	}
	if e.MgmtClient, err = client.New(e.Mgmt.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if e.GuestClient, err = client.New(e.Guest.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	seedCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := e.seed(seedCtx); err != nil {
		return nil, fmt.Errorf("seeding the clusters: %w", err)
	}
	if e.Real != nil {
		if err := e.seedRealNodes(seedCtx); err != nil {
			return nil, fmt.Errorf("seeding the real nodes' platform objects: %w", err)
		}
	}
	return e, nil
}

// startClusters starts the environment's clusters: one in standalone mode, a management and a
// guest cluster otherwise, with kwok nodes or, with RealNodes, real ones.
func (e *Env) startClusters(ctx context.Context) error {
	o := e.options
	guestCRDs, err := localcluster.GuestCRDs()
	if err != nil {
		return err
	}
	if o.WithoutSnapshotClassCRD {
		guestCRDs = slices.DeleteFunc(guestCRDs, localcluster.IsSnapshotClassCRD)
	}
	guestOpts := localcluster.Options{
		Name: "guest", WorkDir: e.Dir, Masters: o.Masters, Workers: o.Workers, Zones: o.Zones,
		CRDs: guestCRDs, Audit: o.Audit, Logf: o.Logf,
	}
	var mgmtCRDs []string
	if o.Mode == ModeStandalone {
		guestOpts.Name = "cluster"
		e.Namespace = GuestNamespace
	} else {
		if mgmtCRDs, err = localcluster.ManagementCRDs(); err != nil {
			return err
		}
		e.Namespace = "clusters-" + o.HostedCluster
	}
	switch {
	case o.RealNodes != nil:
		return e.startRealClusters(ctx, guestOpts, mgmtCRDs)
	case o.Mode == ModeStandalone:
		e.Guest, err = localcluster.Start(ctx, guestOpts)
		e.Mgmt = e.Guest
		return err
	default:
		mgmtOpts := localcluster.Options{
			Name: "management", WorkDir: e.Dir, Masters: 0, Workers: 2,
			NodeLabels: map[string]string{names.ControlPlaneNodeLabel: "true"},
			CRDs:       mgmtCRDs, Audit: o.Audit, Logf: o.Logf,
		}
		e.Mgmt, e.Guest, err = localcluster.StartPair(ctx, mgmtOpts, guestOpts)
		return err
	}
}

// StartForTest starts an environment for a test and stops it when the test ends.
func StartForTest(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	// An environment is up in about a minute, real nodes included; the bound only stops a hang,
	// and is longer than its clusters' own (localcluster's start). Real nodes get more: their
	// image imports are disk- and CPU-bound, and on two cores shared with make test's phases
	// beside them one node took four minutes to become Ready. Both stretch on a slower machine
	// (package machine). A failed test says what the machine was doing.
	machine.ReportOnFailure(t)
	bound := 12 * time.Minute
	if o.RealNodes != nil {
		bound = 16 * time.Minute
	}
	bound = machine.Scale(bound)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	e, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("starting the environment: %v", err)
	}
	// An interrupted test binary runs no cleanup: a real node's mounts and namespaces, and the
	// environment's directory, would stay.
	forget := procs.OnInterrupt(fmt.Sprintf("the %s environment in %s", o.Mode, e.Dir), e.Stop)
	t.Cleanup(func() {
		forget()
		e.Stop()
	})
	t.Logf("Environment (%s) up in %s", o.Mode, time.Since(start).Round(100*time.Millisecond))
	machine.Started("environment ("+o.Mode+")", time.Since(start))
	return e
}

// Stop stops the clusters and the fake OpenStack (a real cloud's guest server goes, the cloud
// stays); it is safe to call more than once.
func (e *Env) Stop() {
	var errs []error
	if e.Real != nil {
		// Nodes first: stopping one unmounts its volumes and deletes its Node object, which
		// needs the API server; the loop devices are free only after the unmounts.
		errs = append(errs, e.Real.stop())
	}
	if e.Guest != nil {
		errs = append(errs, e.Guest.Stop())
	}
	if e.Mgmt != nil && e.Mgmt != e.Guest {
		errs = append(errs, e.Mgmt.Stop())
	}
	if e.OpenStack != nil {
		e.OpenStack.Close()
	}
	if e.ownDir {
		errs = append(errs, os.RemoveAll(e.Dir))
	}
	if err := errors.Join(errs...); err != nil && e.options.Logf != nil {
		e.options.Logf("Stopping the environment: %v", err)
	}
}

// MgmtConfig returns an admin REST configuration of the management cluster.
func (e *Env) MgmtConfig() *rest.Config { return e.Mgmt.RESTConfig() }

// GuestConfig returns an admin REST configuration of the guest cluster.
func (e *Env) GuestConfig() *rest.Config { return e.Guest.RESTConfig() }

// Path returns a path inside the environment's directory.
func (e *Env) Path(elem ...string) string { return filepath.Join(append([]string{e.Dir}, elem...)...) }
