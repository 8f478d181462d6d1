// Command csi-livenessprobe is a STAND-IN for the kubernetes-csi livenessprobe sidecar, written
// for this project's real-node e2e tests; it is not the upstream program.
//
// Why it exists: the upstream module (github.com/kubernetes-csi/livenessprobe) tags v2.x
// releases without a /v2 module path, so the Go module proxy refuses every version and the
// sidecar cannot be built here from source; no image registry is reachable either. The
// operator's controller Deployment and node DaemonSet need the container, so the e2e images carry
// this stand-in under the image name csi-livenessprobe-standin.
//
// What it does, as upstream does: at start it waits (up to five minutes) for the CSI driver on
// --csi-address to tell its name, then serves /healthz on --http-endpoint (or on all addresses at
// --health-port, default 9808). Every /healthz request dials the driver and calls CSI Identity
// Probe within --probe-timeout: 200 "ok" when the driver answers ready (or leaves readiness
// unset, which the CSI spec defines as ready), 500 with the reason otherwise. The kubelet's
// liveness probe of the driver container points at this endpoint. Upstream's metrics flags are
// accepted but no metrics are served.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/cmd/internal/sidecar"
)

// defaultHealthPort is upstream's default --health-port.
const defaultHealthPort = "9808"

// startupWait bounds the wait for the driver at start, as upstream's connection timeout does: a
// crash-looping driver gets time to come back before this container gives up and restarts.
const startupWait = 5 * time.Minute

// options are the command line flags, named as upstream names them.
type options struct {
	csiAddress     string
	probeTimeout   time.Duration
	healthPort     string
	httpEndpoint   string
	metricsAddress string
	metricsPath    string
}

func main() {
	sidecar.InitFlags()
	var o options
	flag.StringVar(&o.csiAddress, "csi-address", "/run/csi/socket", "Address of the CSI driver socket.")
	flag.DurationVar(&o.probeTimeout, "probe-timeout", time.Second, "Timeout of each Probe call (and of dialling the driver).")
	flag.StringVar(&o.healthPort, "health-port", defaultHealthPort, "(deprecated) TCP port of /healthz on all addresses; cannot be set together with --http-endpoint.")
	flag.StringVar(&o.httpEndpoint, "http-endpoint", "", "TCP address of the /healthz server, e.g. 127.0.0.1:10300; overrides --health-port.")
	flag.StringVar(&o.metricsAddress, "metrics-address", "", "(accepted for compatibility; the stand-in serves no metrics)")
	flag.StringVar(&o.metricsPath, "metrics-path", "/metrics", "(accepted for compatibility; the stand-in serves no metrics)")
	flag.Parse()
	sidecar.Main("livenessprobe", func(ctx context.Context) error { return run(ctx, o) })
}

// listenAddress picks the /healthz address from the flags, with upstream's rules.
func listenAddress(o options) (string, error) {
	if o.healthPort != defaultHealthPort && o.httpEndpoint != "" {
		return "", errors.New("only one of --health-port and --http-endpoint can be set")
	}
	if o.metricsAddress != "" && o.httpEndpoint != "" {
		return "", errors.New("only one of --metrics-address and --http-endpoint can be set")
	}
	if o.httpEndpoint != "" {
		return o.httpEndpoint, nil
	}
	return net.JoinHostPort("0.0.0.0", o.healthPort), nil
}

func run(ctx context.Context, o options) error {
	addr, err := listenAddress(o)
	if err != nil {
		return err
	}
	if o.metricsAddress != "" {
		klog.InfoS("--metrics-address is accepted but the stand-in serves no metrics")
	}
	startCtx, cancel := context.WithTimeout(ctx, startupWait)
	name, err := sidecar.DriverName(startCtx, o.csiAddress, o.probeTimeout)
	cancel()
	if err != nil {
		return err
	}
	klog.InfoS("CSI driver name", "driver", name)

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for /healthz on %s: %w", addr, err)
	}
	return serve(ctx, lis, &prober{address: o.csiAddress, timeout: o.probeTimeout, driver: name})
}

// serve serves /healthz on lis until ctx ends.
func serve(ctx context.Context, lis net.Listener, p *prober) error {
	mux := http.NewServeMux()
	mux.Handle("/healthz", p)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	klog.InfoS("Serving /healthz", "address", lis.Addr().String())
	errs := make(chan error, 1)
	go func() { errs <- hs.Serve(lis) }()
	select {
	case <-ctx.Done():
		_ = hs.Close()
		return nil
	case err := <-errs:
		return fmt.Errorf("serving /healthz: %w", err)
	}
}

// prober answers /healthz by probing the driver.
type prober struct {
	address string
	timeout time.Duration
	driver  string
}

// ServeHTTP probes the driver for every request, dialling it afresh as upstream does.
func (p *prober) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ready, err := sidecar.Probe(req.Context(), p.address, p.timeout)
	switch {
	case err != nil:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(err.Error()))
		klog.ErrorS(err, "Health check failed", "driver", p.driver)
	case !ready:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("driver responded but is not ready"))
		klog.ErrorS(nil, "Driver responded but is not ready", "driver", p.driver)
	default:
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
		klog.V(5).InfoS("Health check succeeded", "driver", p.driver)
	}
}
