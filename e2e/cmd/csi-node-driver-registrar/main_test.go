package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// fakeIdentity is a CSI Identity service that tells its name.
type fakeIdentity struct {
	csi.UnimplementedIdentityServer
	name string
}

func (f *fakeIdentity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: f.name, VendorVersion: "test"}, nil
}

// shortTempDir returns a temporary directory with a short path: unix socket paths are limited to
// about 108 bytes, which t.TempDir() under long subtest names can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "reg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// startFakeCSI serves a fake CSI Identity service on a unix socket in dir.
func startFakeCSI(t *testing.T, dir, name string) string {
	t.Helper()
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, &fakeIdentity{name: name})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sock
}

func registrationClient(t *testing.T, socket string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

func healthz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRegistrar(t *testing.T) {
	const driver = "cinder.csi.openstack.org"
	dir := shortTempDir(t)
	csiSock := startFakeCSI(t, dir, driver)
	regDir := filepath.Join(dir, "registry")
	pluginDir := filepath.Join(dir, "plugins", driver)
	for _, d := range []string{regDir, pluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kubeletPath := filepath.Join(pluginDir, "csi.sock")

	name, err := driverName(context.Background(), csiSock, time.Second)
	if err != nil || name != driver {
		t.Fatalf("driverName = %q, %v", name, err)
	}

	var exitCode atomic.Int32
	exitCode.Store(-1)
	r := &registrar{
		driverName: name,
		endpoint:   kubeletPath,
		probeFile:  registrationProbePath(kubeletPath),
		exit:       func(code int) { exitCode.Store(int32(code)) },
	}
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	regSock := filepath.Join(regDir, driver+"-reg.sock")
	// A stale socket from an earlier container must not stop the start.
	if err := os.WriteFile(regSock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.serve(ctx, regSock, httpLis, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	waitFor(t, "the registration socket", func() bool {
		fi, err := os.Stat(regSock)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	})
	client := registrationClient(t, regSock)
	addr := httpLis.Addr().String()

	t.Run("When the kubelet has not registered the plugin, it should be unhealthy", func(t *testing.T) {
		if code, body := healthz(t, addr); code != http.StatusInternalServerError {
			t.Errorf("healthz = %d %q", code, body)
		}
	})

	t.Run("When the kubelet calls GetInfo, it should describe the CSI plugin", func(t *testing.T) {
		info, err := client.GetInfo(context.Background(), &registerapi.InfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Type != registerapi.CSIPlugin || info.Name != driver || info.Endpoint != kubeletPath ||
			len(info.SupportedVersions) != 1 || info.SupportedVersions[0] != "1.0.0" {
			t.Errorf("GetInfo = %+v", info)
		}
		if _, err := os.Stat(filepath.Join(pluginDir, "registration")); err != nil {
			t.Errorf("registration probe file: %v", err)
		}
		o := options{kubeletRegistrationPath: kubeletPath, mode: modeKubeletRegistrationProbe}
		if err := run(context.Background(), o); err != nil {
			t.Errorf("kubelet-registration-probe mode: %v", err)
		}
	})

	t.Run("When the kubelet reports success, it should be healthy", func(t *testing.T) {
		if _, err := client.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
			t.Fatal(err)
		}
		if code, body := healthz(t, addr); code != http.StatusOK || body != "ok" {
			t.Errorf("healthz = %d %q", code, body)
		}
		if exitCode.Load() != -1 {
			t.Errorf("exited with %d", exitCode.Load())
		}
	})

	t.Run("When the kubelet reports a failure, it should exit non-zero", func(t *testing.T) {
		if _, err := client.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: false, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		if exitCode.Load() != 1 {
			t.Errorf("exit code = %d, want 1", exitCode.Load())
		}
	})

	t.Run("When it stops, it should remove the registration socket", func(t *testing.T) {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		done <- nil // for the cleanup
		if _, err := os.Stat(regSock); !os.IsNotExist(err) {
			t.Errorf("socket still there: %v", err)
		}
	})
}

func TestRunFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
	}{
		{"When --kubelet-registration-path is missing, it should fail", options{mode: modeRegistration}},
		{"When both --health-port and --http-endpoint are set, it should fail", options{mode: modeRegistration, kubeletRegistrationPath: "/x/csi.sock", healthPort: 1, httpEndpoint: ":2"}},
		{"When the mode is unknown, it should fail", options{mode: "other", kubeletRegistrationPath: "/x/csi.sock"}},
		{"When the probe mode finds no registration file, it should fail", options{mode: modeKubeletRegistrationProbe, kubeletRegistrationPath: "/nonexistent/csi.sock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := run(context.Background(), tc.o); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestDriverNameWaitsForTheDriver(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "csi.sock")
	got := make(chan string, 1)
	go func() {
		name, _ := driverName(context.Background(), sock, 200*time.Millisecond)
		got <- name
	}()
	// The driver comes up after the registrar started asking.
	time.Sleep(300 * time.Millisecond)
	startFakeCSI(t, dir, "late.driver")
	select {
	case name := <-got:
		if name != "late.driver" {
			t.Errorf("name = %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("driverName did not return after the driver came up")
	}
}
