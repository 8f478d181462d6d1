package main

import (
	"context"
	"crypto/sha256"
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

// writeTestFile replaces path's content atomically, as the kubelet updates a mounted ConfigMap.
func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileWatchObserve(t *testing.T) {
	t.Parallel()
	state := func(content string) fileState {
		if content == "-" {
			return fileState{}
		}
		return fileState{readable: true, sum: sha256.Sum256([]byte(content))}
	}
	tests := []struct {
		name  string
		reads []string // the file's content at the start and at each read; "-" for unreadable
		ends  int      // the read (from 1) that reports the change; 0 for none
	}{
		{
			name:  "When a file is caught empty in the middle of a rewrite with the same content, it should not count",
			reads: []string{"same", "", "same", "same"},
		},
		{
			name:  "When a file's new content is read twice in a row, it should count at the second read",
			reads: []string{"old", "new", "new"},
			ends:  2,
		},
		{
			name:  "When a file is caught twice in the middle of a rewrite, it should count only once the content is stable",
			reads: []string{"old", "", "ne", "new", "new"},
			ends:  4,
		},
		{
			name:  "When a file stays removed, it should count",
			reads: []string{"old", "-", "-"},
			ends:  2,
		},
		{
			name:  "When nothing changes, it should not count",
			reads: []string{"-", "-", "-", "-"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			next := 0
			w := &fileWatch{files: []string{"config.yaml"}, read: func(string) fileState {
				s := state(tt.reads[next])
				next++
				return s
			}}
			w.initial = []fileState{w.read("config.yaml")}
			w.previous = []fileState{w.initial[0]}
			ended := 0
			for i := 1; i < len(tt.reads) && ended == 0; i++ {
				if name, changed := w.observe(); changed {
					g.Expect(name).To(Equal("config.yaml"))
					ended = i
				}
			}
			g.Expect(ended).To(Equal(tt.ends))
		})
	}
}
