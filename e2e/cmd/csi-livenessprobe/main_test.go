package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/cmd/internal/sidecar"
)

// fakeIdentity is a CSI Identity service whose Probe answer the test chooses.
type fakeIdentity struct {
	csi.UnimplementedIdentityServer
	ready *wrapperspb.BoolValue
	err   error
	delay time.Duration
}

func (f *fakeIdentity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "fake.csi.driver"}, nil
}

func (f *fakeIdentity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return &csi.ProbeResponse{Ready: f.ready}, nil
}

// startFakeCSI serves f on a unix socket in a short temporary directory (unix socket paths are
// limited to about 108 bytes) and returns the socket path.
func startFakeCSI(t *testing.T, f *fakeIdentity) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "probe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sock
}

// startProbe serves /healthz for the driver at address and returns the HTTP address.
func startProbe(t *testing.T, address string, timeout time.Duration) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = serve(ctx, lis, &prober{address: address, timeout: timeout, driver: "fake.csi.driver"})
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return lis.Addr().String()
}

func get(t *testing.T, addr string) (int, string, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), time.Since(start)
}

func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fake     *fakeIdentity
		noDriver bool
		want     int
	}{
		{name: "When the driver answers ready, it should answer 200", fake: &fakeIdentity{ready: wrapperspb.Bool(true)}, want: http.StatusOK},
		{name: "When the driver leaves readiness unset, it should answer 200", fake: &fakeIdentity{}, want: http.StatusOK},
		{name: "When the driver answers not ready, it should answer 500", fake: &fakeIdentity{ready: wrapperspb.Bool(false)}, want: http.StatusInternalServerError},
		{name: "When Probe fails, it should answer 500", fake: &fakeIdentity{err: status.Error(codes.FailedPrecondition, "broken")}, want: http.StatusInternalServerError},
		{name: "When Probe takes longer than the timeout, it should answer 500 in time", fake: &fakeIdentity{delay: 5 * time.Second}, want: http.StatusInternalServerError},
		{name: "When no driver listens, it should answer 500 in time", noDriver: true, want: http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			address := filepath.Join(t.TempDir(), "absent.sock")
			if !tc.noDriver {
				address = startFakeCSI(t, tc.fake)
			}
			const timeout = 300 * time.Millisecond
			addr := startProbe(t, address, timeout)
			code, body, took := get(t, addr)
			if code != tc.want {
				t.Errorf("healthz = %d %q, want %d", code, body, tc.want)
			}
			if took > timeout+2*time.Second {
				t.Errorf("healthz took %v with a %v probe timeout", took, timeout)
			}
		})
	}
}

func TestListenAddress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       options
		want    string
		wantErr bool
	}{
		{name: "When only --http-endpoint is set, it should listen there", o: options{healthPort: defaultHealthPort, httpEndpoint: "127.0.0.1:10300"}, want: "127.0.0.1:10300"},
		{name: "When only --health-port is set, it should listen on all addresses", o: options{healthPort: "10301"}, want: "0.0.0.0:10301"},
		{name: "When neither is set, it should use port 9808", o: options{healthPort: defaultHealthPort}, want: "0.0.0.0:9808"},
		{name: "When both are set, it should fail", o: options{healthPort: "1", httpEndpoint: ":2"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listenAddress(tc.o)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("listenAddress = %q, %v", got, err)
			}
		})
	}
}

func TestDriverNameGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := sidecar.DriverName(ctx, filepath.Join(t.TempDir(), "absent.sock"), 100*time.Millisecond)
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}
