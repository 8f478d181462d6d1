package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/pki"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
)

// A world on the real OpenStack (Options.RealCloud) differs from one on the fake in three places,
// all of them the harness's and none the product's:
//   - where the cloud is reached: its public endpoints are TLS listeners on the host's loopback,
//     which a node's network namespace cannot reach, so the catalog names them at RealCloudIP and
//     the environment relays that address inside the management node (where the operator and the
//     CSI controller run) to the host;
//   - the guest node's server: a real Nova server, booted from a volume in the node's zone, whose
//     UUID and zone Nova's own metadata API tells the node plugin at 169.254.169.254;
//   - the hypervisor: Nova's fake virt driver attaches volumes in the books only, so a follower of
//     the server's attachments gives the node a block device for each (realcloud.Follower).

// RealCloudIP is the address at which a real cloud started by StartRealCloud is reached from
// the management node's network namespace: the catalog's public endpoints and the auth URL
// name it. It is the OpenStack address of a cluster number no environment takes, so worlds on
// the fake and a world on the real cloud run side by side.
func RealCloudIP() net.IP { return realnode.FakeOpenStackIP(realCloudCluster) }

// StartRealCloud starts a real OpenStack that real-node environments can use (Options.RealCloud):
// its public endpoints are named at RealCloudIP, behind a certificate for that address and for
// the host's loopback, from a CA of its own. The caller stops it; one cloud may serve several
// environments one after another.
func StartRealCloud(ctx context.Context, logf func(string, ...any)) (*realcloud.Cloud, error) {
	opts, err := realCloudOptions(logf)
	if err != nil {
		return nil, err
	}
	return realcloud.Start(ctx, opts)
}

// StartRealCloudForTest is StartRealCloud for a test: it skips where the cloud cannot run (a
// failure under CI) and stops the cloud when the test ends.
func StartRealCloudForTest(t testing.TB) *realcloud.Cloud {
	t.Helper()
	opts, err := realCloudOptions(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return realcloud.StartForTest(t, opts)
}

func realCloudOptions(logf func(string, ...any)) (realcloud.Options, error) {
	ip := RealCloudIP()
	ca, err := pki.NewCA("real cloud CA")
	if err != nil {
		return realcloud.Options{}, err
	}
	chain, key, err := ca.ServingPEM(ip.String(), ip.String(), "127.0.0.1", "localhost")
	if err != nil {
		return realcloud.Options{}, fmt.Errorf("making the real cloud's certificate: %w", err)
	}
	return realcloud.Options{CertPEM: chain, KeyPEM: key, CAPEM: ca.PEM, PublicIP: ip, Logf: logf}, nil
}

// realCloudsYAML is the clouds.yaml of a credentials Secret for the real cloud: its member user
// with a password, as OpenShift's installer writes it; the CA travels in the Secret's cacert key.
func realCloudsYAML(c *realcloud.Cloud) ([]byte, error) {
	cloud := c.Member()
	cloud.CACertFile = ""
	out, err := yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{CloudName: cloud}})
	if err != nil {
		return nil, fmt.Errorf("marshalling clouds.yaml: %w", err)
	}
	return out, nil
}

// realCloudNode is what the environment made in the real cloud for its guest node.
type realCloudNode struct {
	cloud     *realcloud.Cloud
	stopRelay func() error
	serverID  string
	follower  *realcloud.Follower
}

// wireRealCloud relays the cloud's public endpoints into the management node, creates the guest
// node's server, follows its attachments and serves Nova's metadata API in the guest node.
func (e *Env) wireRealCloud(ctx context.Context) error {
	r, c := e.Real, e.options.RealCloud
	if !RealCloudIP().Equal(c.PublicIP()) {
		return fmt.Errorf("the real cloud names its endpoints at %s, not at %s where the environment relays them (start it with StartRealCloud)", c.PublicIP(), RealCloudIP())
	}
	stopRelay, err := c.RelayPublic(r.MgmtNode.Listen)
	if err != nil {
		return fmt.Errorf("relaying the real cloud into node %s: %w", r.MgmtNode.Name(), err)
	}
	r.cloudNode = &realCloudNode{cloud: c, stopRelay: stopRelay}
	r.OpenStackURL = c.AuthURL()
	start := time.Now()
	id, err := c.CreateServer(ctx, e.options.HostedCluster+"-"+r.GuestNode.Name(), e.Zone())
	// A server that failed to become ACTIVE still has an ID, and is deleted on Stop.
	r.cloudNode.serverID = id
	if err != nil {
		return fmt.Errorf("creating the server of node %s: %w", r.GuestNode.Name(), err)
	}
	r.GuestServerID = id
	e.options.Logf("Real OpenStack: server %s of node %s ACTIVE in %s", id, r.GuestNode.Name(), time.Since(start).Round(100*time.Millisecond))
	if r.cloudNode.follower, err = c.FollowAttachments(context.Background(), id); err != nil {
		return err
	}
	md, err := r.GuestNode.Listen("tcp", "169.254.169.254:80")
	if err != nil {
		return fmt.Errorf("metadata listener in node %s: %w", r.GuestNode.Name(), err)
	}
	r.listeners = append(r.listeners, md)
	go func() { _ = c.ServeMetadata(md, id) }()
	return nil
}

// Follower is the hypervisor's part for the guest node's server on the real cloud; nil on the
// fake.
func (r *RealNodes) Follower() *realcloud.Follower {
	if r.cloudNode == nil {
		return nil
	}
	return r.cloudNode.follower
}

// stop closes the relays into the management node (its namespace is gone by now), ends the
// follower (its devices go once the node has unmounted them) and deletes the server, whose boot
// volume goes with it; volumes still attached are detached by Nova and stay.
func (n *realCloudNode) stop() error {
	errs := []error{n.stopRelay()}
	if n.follower != nil {
		errs = append(errs, n.follower.Stop())
	}
	if n.serverID == "" {
		return errors.Join(errs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errs = append(errs, n.cloud.DeleteServer(ctx, n.serverID))
	return errors.Join(errs...)
}
