package clusters

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestProbes(t *testing.T) {
	p, err := startProbes("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("the probes stopped with %v", err)
		}
	})
	get := func(t *testing.T, path string) (int, string) {
		t.Helper()
		resp, err := request(t, p.addr, path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	t.Run("When the manager is still being built, it should be alive and not ready", func(t *testing.T) {
		if code, _ := get(t, "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz answered %d", code)
		}
		if code, body := get(t, "/readyz"); code != http.StatusInternalServerError || !strings.Contains(body, "being built") {
			t.Errorf("/readyz answered %d %q", code, body)
		}
	})

	t.Run("When the manager's check fails, it should not be ready and say why", func(t *testing.T) {
		p.setReady(func(*http.Request) error { return errors.New("the primary cluster's cache has not synced") })
		if code, body := get(t, "/readyz"); code != http.StatusInternalServerError || !strings.Contains(body, "has not synced") {
			t.Errorf("/readyz answered %d %q", code, body)
		}
	})

	t.Run("When the manager's check passes, it should be ready", func(t *testing.T) {
		p.setReady(func(*http.Request) error { return nil })
		if code, body := get(t, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz answered %d %q", code, body)
		}
	})

	t.Run("When the manager stops, it should stop listening", func(t *testing.T) {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("Start returned %v", err)
			}
			stopped <- nil // for the cleanup
		case <-time.After(10 * time.Second):
			t.Fatal("the probes did not stop")
		}
		if resp, err := request(t, p.addr, "/healthz"); err == nil {
			_ = resp.Body.Close()
			t.Error("the probes still answer")
		}
	})
}

// request GETs path from the probes at addr.
func request(t *testing.T, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}
