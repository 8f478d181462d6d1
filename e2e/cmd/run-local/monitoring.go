package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/monitoring"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// localPrometheus is where run-local's Prometheus answers on this host: a relay into the
// management node's network namespace, where it runs.
const localPrometheus = "127.0.0.1:19090"

// startPrometheus starts Prometheus (binary) on the management node once the operator has
// created its PrometheusRule, relays it to localPrometheus and prints where to look; the returned
// function stops both. Without a binary, real nodes or the operator's pod (split), it starts
// nothing.
func startPrometheus(ctx context.Context, e *env.Env, binary string, split bool) (stop func(), err error) {
	if binary == "" || e.Real == nil || split {
		return func() {}, nil
	}
	deadline, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rule := &unstructured.Unstructured{}
	rule.SetAPIVersion("monitoring.coreos.com/v1")
	rule.SetKind("PrometheusRule")
	for e.MgmtClient.Get(deadline, client.ObjectKey{Namespace: e.Namespace, Name: names.AlertsRule}, rule) != nil {
		select {
		case <-deadline.Done():
			return nil, fmt.Errorf("waiting for the operator's PrometheusRule %s/%s: %w", e.Namespace, names.AlertsRule, deadline.Err())
		case <-time.After(time.Second):
		}
	}
	p, err := e.StartPrometheus(ctx, binary, 0)
	if err != nil {
		return nil, err
	}
	netns := e.Real.MgmtNode.NetnsPath()
	relay, err := relayInto(localPrometheus, func(ctx context.Context) (net.Conn, error) {
		return realnode.DialIn(ctx, netns, "tcp", monitoring.DefaultListen)
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	fmt.Printf("Prometheus %s (scraping the operator's ServiceMonitors as the platform's monitoring does, its alerts loaded; log %s):\n", "http://"+localPrometheus, p.LogPath())
	fmt.Printf("  alerts:  curl -s http://%s/api/v1/alerts\n", localPrometheus)
	fmt.Printf("  targets: curl -s 'http://%s/api/v1/targets?state=active'\n", localPrometheus)
	fmt.Printf("  a query: curl -s 'http://%s/api/v1/query?query=cinder_csi_operator_condition'\n", localPrometheus)
	fmt.Println("  (its web pages are not built: they need npm; the HTTP API serves everything)")
	return func() { relay(); p.Stop() }, nil
}

// relayInto listens on addr on this host and relays every connection to what dial reaches; the
// returned function stops it and the connections it holds.
func relayInto(addr string, dial func(context.Context) (net.Conn, error)) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relaying Prometheus to this host: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				up, err := dial(ctx)
				if err != nil {
					return
				}
				defer func() { _ = up.Close() }()
				go func() {
					<-ctx.Done()
					_ = c.Close()
					_ = up.Close()
				}()
				done := make(chan struct{})
				go func() { _, _ = io.Copy(up, c); close(done) }()
				_, _ = io.Copy(c, up)
				<-done
			}()
		}
	}()
	return func() { cancel(); _ = l.Close(); wg.Wait() }, nil
}
