package sidecar

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
)

// retryInterval is how long DriverName waits between attempts.
const retryInterval = time.Second

// Dial returns a connection to the driver at address (a path or a unix:// URL). gRPC connects
// lazily, so this succeeds while the socket does not exist yet; calls wait for it with
// grpc.WaitForReady.
func Dial(address string) (*grpc.ClientConn, error) {
	target := address
	if filepath.IsAbs(address) {
		target = "unix://" + address
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the CSI driver at %s: %w", address, err)
	}
	return conn, nil
}

// DriverName asks the driver for its name (CSI Identity GetPluginInfo), each attempt within
// timeout, retrying until it answers or ctx ends: the driver container may start after the
// sidecar, and its socket appears only then. Upstream sidecars wait for the connection the
// same way.
func DriverName(ctx context.Context, address string, timeout time.Duration) (string, error) {
	conn, err := Dial(address)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	client := csi.NewIdentityClient(conn)
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := client.GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			return resp.GetName(), nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("asking the CSI driver at %s for its name: %w", address, err)
		}
		if attempt%10 == 1 {
			klog.InfoS("Waiting for the CSI driver", "address", address, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryInterval):
		}
	}
}

// Probe dials the driver afresh, so that a restarted driver (a new socket) is probed rather
// than a dead connection, and calls CSI Identity Probe within timeout. WaitForReady makes the
// call wait for the dial (bounded by the same timeout) instead of failing at once while the
// connection comes up. It reports whether the driver is ready.
func Probe(ctx context.Context, address string, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := Dial(address)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close() }()
	resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return false, fmt.Errorf("probing the CSI driver at %s: %w", address, err)
	}
	// An unset Ready means ready (CSI spec, Probe).
	return resp.GetReady() == nil || resp.GetReady().GetValue(), nil
}
