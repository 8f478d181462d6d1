// Package golden compares rendered objects with reviewed YAML fixtures, the way HyperShift's
// testutil.CompareWithFixture does: the fixture is the review surface for every change to what
// the operator applies, and `UPDATE=1 go test ./...` rewrites it.
//
// It is a plain package (not a _test package) so that the controlplane and guest tests can both
// use it without importing each other.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// UpdateEnv is the environment variable that, set to "1" (or "true"), makes CompareWithFixture
// write the fixture instead of comparing with it.
const UpdateEnv = "UPDATE"

// contextLines is how many equal lines are shown before the first difference.
const contextLines = 3

// diffLines bounds how many lines of each side a mismatch report shows.
const diffLines = 12

// CompareWithFixture serialises objs to YAML, one document each in the given order, and compares
// the stream with testdata/zz_fixture_<test name>.yaml in the test's working directory (the
// package directory under go test). Subtest separators and characters unsafe in file names
// become "_". With UPDATE=1 in the environment the fixture is written instead.
//
// Null values are dropped (typed objects serialise unset structs such as creationTimestamp as
// null, which server-side apply never sends), and so is the top-level status, which shared/apply
// never sends with an object either: fixtures show what is applied, not serialisation noise.
func CompareWithFixture(t testing.TB, objs ...any) {
	t.Helper()
	got, err := Marshal(objs...)
	if err != nil {
		t.Fatalf("Serialising objects for the fixture: %v", err)
	}
	CompareTextWithFixture(t, got)
}

// CompareTextWithFixture compares got, as it is, with the test's fixture (see CompareWithFixture),
// or writes it there with UPDATE=1.
func CompareTextWithFixture(t testing.TB, got []byte) {
	t.Helper()
	path := FixturePath(t.Name())
	if update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("Creating the fixture directory: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("Writing fixture %s: %v", path, err)
		}
		t.Logf("Wrote fixture %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Reading fixture %s (run with %s=1 to create it): %v", path, UpdateEnv, err)
	}
	if d := Diff(string(want), string(got)); d != "" {
		t.Errorf("Output differs from fixture %s (run with %s=1 to accept the change, then review the diff):\n%s",
			path, UpdateEnv, d)
	}
}

// FixturePath returns the fixture file of a test name, relative to the working directory.
func FixturePath(testName string) string {
	return filepath.Join("testdata", "zz_fixture_"+sanitize(testName)+".yaml")
}

// sanitize maps a test name to a file name: "/" and anything but ASCII letters, digits, "-", "_"
// and "." become "_" (go test already turns spaces into "_").
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		default:
			return '_'
		}
	}, name)
}

func update() bool {
	switch os.Getenv(UpdateEnv) {
	case "1", "true", "TRUE", "True":
		return true
	}
	return false
}

// Marshal serialises objs as a multi-document YAML stream: each object goes through JSON (so
// json tags and custom marshalers apply), loses its null values and its top-level status, and
// is written by sigs.k8s.io/yaml with sorted keys. The output depends only on the objects.
func Marshal(objs ...any) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("object %d (%T): %w", i+1, o, err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("object %d (%T): %w", i+1, o, err)
		}
		apply.PruneNulls(v)
		if m, ok := v.(map[string]any); ok {
			delete(m, "status")
		}
		out, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("object %d (%T): %w", i+1, o, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(out)
	}
	return buf.Bytes(), nil
}

// Diff returns "" when want and got are equal, else a line-based report: the line number of the
// first difference, a few equal lines before it, then the following lines of each side ("-"
// fixture, "+" rendered).
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	w := strings.Split(want, "\n")
	g := strings.Split(got, "\n")
	first := 0
	for first < len(w) && first < len(g) && w[first] == g[first] {
		first++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (fixture has %d lines, rendered %d):\n", first+1, len(w), len(g))
	for i := max(0, first-contextLines); i < first; i++ {
		fmt.Fprintf(&b, "  %4d   %s\n", i+1, w[i])
	}
	for i := first; i < len(w) && i < first+diffLines; i++ {
		fmt.Fprintf(&b, "- %4d   %s\n", i+1, w[i])
	}
	for i := first; i < len(g) && i < first+diffLines; i++ {
		fmt.Fprintf(&b, "+ %4d   %s\n", i+1, g[i])
	}
	return b.String()
}
