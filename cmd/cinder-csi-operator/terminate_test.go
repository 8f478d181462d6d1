package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

func TestExitOnChange(t *testing.T) {
	t.Parallel()
	const interval = 5 * time.Millisecond
	// quiet is how long a context must stay alive to count as not ended: many intervals.
	const quiet = 50 * interval
	tests := []struct {
		name   string
		setup  func(t *testing.T, path string)
		change func(t *testing.T, path string)
		ends   bool
	}{
		{
			name:  "When a watched file's content changes, it should end",
			setup: func(t *testing.T, p string) { writeTestFile(t, p, "kind: GenericOperatorConfig\n") },
			change: func(t *testing.T, p string) {
				writeTestFile(t, p, "kind: GenericOperatorConfig\nleaderElection:\n  disable: true\n")
			},
			ends: true,
		},
		{
			name:   "When a watched file is rewritten with the same content, it should keep running",
			setup:  func(t *testing.T, p string) { writeTestFile(t, p, "same\n") },
			change: func(t *testing.T, p string) { writeTestFile(t, p, "same\n") },
		},
		{
			name:   "When a watched file that was missing appears, it should end",
			setup:  func(*testing.T, string) {},
			change: func(t *testing.T, p string) { writeTestFile(t, p, "new\n") },
			ends:   true,
		},
		{
			name:  "When a watched file is removed, it should end",
			setup: func(t *testing.T, p string) { writeTestFile(t, p, "old\n") },
			change: func(t *testing.T, p string) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			},
			ends: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "config.yaml")
			tt.setup(t, path)
			ctx := exitOnChange(t.Context(), []string{filepath.Join(t.TempDir(), "other"), path}, interval, logr.Discard())
			g.Consistently(ctx.Done()).WithTimeout(quiet).ShouldNot(BeClosed(), "nothing changed yet")
			tt.change(t, path)
			if tt.ends {
				g.Eventually(ctx.Done()).WithTimeout(time.Minute).Should(BeClosed())
			} else {
				g.Consistently(ctx.Done()).WithTimeout(quiet).ShouldNot(BeClosed())
			}
		})
	}

	t.Run("When no file is named, it should return the parent", func(t *testing.T) {
		t.Parallel()
		parent := context.Background()
		NewWithT(t).Expect(exitOnChange(parent, nil, interval, logr.Discard())).To(BeIdenticalTo(parent))
	})
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
