// Command csi-node-driver-registrar is a STAND-IN for the kubernetes-csi node-driver-registrar
// sidecar, written for this project's real-node e2e tests; it is not the upstream program.
//
// Why it exists: the upstream module (github.com/kubernetes-csi/node-driver-registrar) tags
// v2.x releases without a /v2 module path, so the Go module proxy refuses every version and the
// sidecar cannot be built here from source; no image registry is reachable either. The operator's
// node DaemonSet needs the container, so the e2e images carry this stand-in under the image name
// csi-node-driver-registrar-standin.
//
// What it does, as upstream does in its default "registration" mode: it asks the CSI driver on
// --csi-address for its name (CSI Identity GetPluginInfo), then serves the kubelet plugin
// registration service (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on
// <--plugin-registration-path>/<driver>-reg.sock. The kubelet's plugin watcher finds the socket,
// calls GetInfo (answered with type CSIPlugin, the driver name, --kubelet-registration-path as the
// endpoint and version 1.0.0) and reports the outcome with NotifyRegistrationStatus; a failed
// registration makes the process exit 1 so that the kubelet restarts the container and the
// registration is retried. /healthz on --http-endpoint answers 200 once the kubelet reported the
// plugin registered and the registration socket still answers GetInfo. SIGTERM removes the
// socket. The "kubelet-registration-probe" mode checks the marker file that GetInfo writes next to
// the driver socket. Flags are upstream's (klog flags included); it serves no pprof profiles even
// with --enable-pprof, which is accepted only so that manifests written for upstream keep working.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/cmd/internal/sidecar"
)

// Modes, as upstream names them.
const (
	modeRegistration             = "registration"
	modeKubeletRegistrationProbe = "kubelet-registration-probe"
)

// version is reported by --version; the stand-in has no upstream release version.
var version = "standin"

// supportedVersions are the plugin registration API versions the kubelet may use with the driver.
var supportedVersions = []string{"1.0.0"}

// options are the command line flags, named as upstream names them.
type options struct {
	csiAddress              string
	pluginRegistrationPath  string
	kubeletRegistrationPath string
	httpEndpoint            string
	healthPort              int
	timeout                 time.Duration
	connectionTimeout       time.Duration
	mode                    string
	enablePprof             bool
	showVersion             bool
}

func main() {
	sidecar.InitFlags()
	var o options
	flag.StringVar(&o.csiAddress, "csi-address", "/run/csi/socket", "Path of the CSI driver socket to ask for the driver name.")
	flag.StringVar(&o.pluginRegistrationPath, "plugin-registration-path", "/registration", "Path of the kubelet plugin registration directory (as mounted in this container).")
	flag.StringVar(&o.kubeletRegistrationPath, "kubelet-registration-path", "", "Path of the CSI driver socket on the host, as the kubelet sees it (required).")
	flag.StringVar(&o.httpEndpoint, "http-endpoint", "", "TCP address of the /healthz server, e.g. 127.0.0.1:10304; empty disables it. Only one of --health-port and --http-endpoint may be set.")
	flag.IntVar(&o.healthPort, "health-port", 0, "(deprecated) TCP port of the /healthz server on all addresses; 0 disables it.")
	flag.DurationVar(&o.timeout, "timeout", time.Second, "Timeout of each call to the CSI driver and of the health check's GetInfo.")
	flag.DurationVar(&o.connectionTimeout, "connection-timeout", 0, "(deprecated, no effect)")
	flag.StringVar(&o.mode, "mode", modeRegistration, `"registration" serves the registration socket; "kubelet-registration-probe" exits 0 when the kubelet has called GetInfo.`)
	flag.BoolVar(&o.enablePprof, "enable-pprof", false, "(accepted for compatibility; the stand-in serves no profiles)")
	flag.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	flag.Parse()

	if o.showVersion {
		fmt.Println(os.Args[0], version)
		return
	}
	sidecar.Main("node-driver-registrar", func(ctx context.Context) error { return run(ctx, o) })
}

// run validates the flags and runs the selected mode until ctx ends.
func run(ctx context.Context, o options) error {
	if o.kubeletRegistrationPath == "" {
		return errors.New("--kubelet-registration-path is required")
	}
	probeFile := registrationProbePath(o.kubeletRegistrationPath)
	switch o.mode {
	case modeKubeletRegistrationProbe:
		if _, err := os.Stat(probeFile); err != nil {
			return fmt.Errorf("kubelet plugin registration has not succeeded yet: %w", err)
		}
		klog.InfoS("Kubelet plugin registration succeeded", "file", probeFile)
		return nil
	case modeRegistration:
	default:
		return fmt.Errorf("unknown --mode %q", o.mode)
	}
	if o.healthPort > 0 && o.httpEndpoint != "" {
		return errors.New("only one of --health-port and --http-endpoint can be set")
	}
	addr := o.httpEndpoint
	if o.healthPort > 0 {
		addr = ":" + strconv.Itoa(o.healthPort)
	}
	if o.connectionTimeout != 0 {
		klog.InfoS("--connection-timeout is deprecated and has no effect")
	}
	if o.enablePprof {
		klog.InfoS("--enable-pprof is accepted but the stand-in serves no profiles")
	}

	name, err := driverName(ctx, o.csiAddress, o.timeout)
	if err != nil {
		return err
	}
	klog.InfoS("CSI driver name", "driver", name)

	r := &registrar{
		driverName: name,
		endpoint:   o.kubeletRegistrationPath,
		probeFile:  probeFile,
		exit:       func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) },
	}
	socket := filepath.Join(o.pluginRegistrationPath, name+"-reg.sock")
	var httpListener net.Listener
	if addr != "" {
		if httpListener, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("listening for /healthz on %s: %w", addr, err)
		}
	}
	return r.serve(ctx, socket, httpListener, o.timeout)
}

// registrationProbePath is the marker file that GetInfo writes for the
// kubelet-registration-probe mode: "registration" next to the driver socket, as upstream.
func registrationProbePath(kubeletRegistrationPath string) string {
	return filepath.Join(filepath.Dir(kubeletRegistrationPath), "registration")
}

// driverName asks the CSI driver for its name, waiting for it (see sidecar.DriverName). An
// empty name is an error: the registration socket is named after the driver.
func driverName(ctx context.Context, address string, timeout time.Duration) (string, error) {
	name, err := sidecar.DriverName(ctx, address, timeout)
	if err == nil && name == "" {
		return "", fmt.Errorf("CSI driver at %s returned an empty name", address)
	}
	return name, err
}

// registrar answers the kubelet's plugin watcher.
type registrar struct {
	registerapi.UnimplementedRegistrationServer

	driverName string
	// endpoint is the driver socket's path on the host, which the kubelet dials for CSI calls.
	endpoint  string
	probeFile string
	// registered is set once the kubelet reports a successful registration.
	registered atomic.Bool
	// exit ends the process; upstream exits 1 when the kubelet reports a failed registration so
	// that the container restarts and the socket is registered afresh.
	exit func(code int)
}

// GetInfo tells the kubelet what plugin this socket registers.
func (r *registrar) GetInfo(_ context.Context, req *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.InfoS("Received GetInfo call", "request", req.String())
	if r.probeFile != "" {
		if err := os.WriteFile(r.probeFile, nil, 0o644); err != nil {
			klog.ErrorS(err, "Failed to create the registration probe file", "path", r.probeFile)
		}
	}
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driverName,
		Endpoint:          r.endpoint,
		SupportedVersions: supportedVersions,
	}, nil
}

// NotifyRegistrationStatus receives the kubelet's verdict.
func (r *registrar) NotifyRegistrationStatus(_ context.Context, status *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	klog.InfoS("Received NotifyRegistrationStatus call", "registered", status.GetPluginRegistered(), "error", status.GetError())
	if !status.GetPluginRegistered() {
		klog.ErrorS(nil, "Registration failed, exiting so that the container restarts", "error", status.GetError())
		r.registered.Store(false)
		r.exit(1)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	r.registered.Store(true)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// serve listens on the registration socket and, when httpListener is set, serves /healthz,
// until ctx ends; then it removes the socket.
func (r *registrar) serve(ctx context.Context, socket string, httpListener net.Listener, timeout time.Duration) error {
	// A socket left by an earlier container would make the listen fail.
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale registration socket %s: %w", socket, err)
	}
	// Only the owner (root, like the kubelet) may connect, as upstream does.
	oldMask := syscall.Umask(0o077)
	lis, err := net.Listen("unix", socket)
	syscall.Umask(oldMask)
	if err != nil {
		return fmt.Errorf("listening on registration socket %s: %w", socket, err)
	}
	klog.InfoS("Registration server started", "socket", socket)
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)

	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(lis) }()
	var hs *http.Server
	if httpListener != nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, req *http.Request) {
			r.healthz(w, req, socket, timeout)
		})
		hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		klog.InfoS("Serving /healthz", "address", httpListener.Addr().String())
		go func() { errs <- hs.Serve(httpListener) }()
	}

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errs:
		err = fmt.Errorf("serving: %w", err)
	}
	srv.Stop()
	if hs != nil {
		_ = hs.Close()
	}
	if rmErr := os.Remove(socket); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		klog.ErrorS(rmErr, "Failed to remove the registration socket", "socket", socket)
	}
	return err
}

// healthz answers 200 once the kubelet reported the plugin registered and the registration
// socket still answers GetInfo with this driver's name.
func (r *registrar) healthz(w http.ResponseWriter, req *http.Request, socket string, timeout time.Duration) {
	fail := func(code int, msg string) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(msg))
		klog.ErrorS(nil, "Health check failed", "reason", msg)
	}
	if !r.registered.Load() {
		fail(http.StatusInternalServerError, "the kubelet has not registered the plugin yet")
		return
	}
	if _, err := os.Stat(socket); err != nil {
		fail(http.StatusNotFound, "registration socket does not exist")
		return
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(http.StatusInternalServerError, err.Error())
		return
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	switch {
	case err != nil:
		fail(http.StatusInternalServerError, "registration socket does not answer: "+err.Error())
	case info.GetName() != r.driverName:
		fail(http.StatusInternalServerError, "registration socket answers for driver "+info.GetName())
	default:
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
		klog.V(5).InfoS("Health check succeeded")
	}
}
