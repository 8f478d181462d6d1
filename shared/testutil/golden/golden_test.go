package golden

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recordingTB is a testing.TB whose failures are recorded instead of failing the test, so the
// failure paths of CompareWithFixture can be checked.
type recordingTB struct {
	testing.TB
	name   string
	errors []string
	fatal  bool
}

func (r *recordingTB) Helper()      {}
func (r *recordingTB) Name() string { return r.name }
func (r *recordingTB) Logf(string, ...any) {
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
	r.fatal = true
	runtime.Goexit()
}

// run calls CompareWithFixture on a goroutine, as the testing package runs a test, so that
// Fatalf can end it with runtime.Goexit.
func (r *recordingTB) run(objs ...any) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		CompareWithFixture(r, objs...)
	}()
	<-done
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Data:       data,
	}
}

func TestCompareWithFixture(t *testing.T) {
	t.Parallel()

	t.Run("When the objects match the fixture, it should pass", func(t *testing.T) {
		t.Parallel()
		CompareWithFixture(t, configMap("a", map[string]string{"k": "v"}), configMap("b", nil))
	})

	t.Run("When the objects differ from the fixture, it should fail with a diff naming the line", func(t *testing.T) {
		t.Parallel()
		if update() {
			t.Skip("Skipping: the fixture of this case is hand-written and must not be rewritten")
		}
		g := NewWithT(t)
		r := &recordingTB{TB: t, name: "TestCompareWithFixture/mismatch"}
		r.run(configMap("a", map[string]string{"k": "changed"}))
		g.Expect(r.fatal).To(BeFalse())
		g.Expect(r.errors).To(HaveLen(1))
		g.Expect(r.errors[0]).To(And(
			ContainSubstring("zz_fixture_TestCompareWithFixture_mismatch.yaml"),
			ContainSubstring("first difference at line 3"),
			ContainSubstring("-    3     k: v"),
			ContainSubstring("+    3     k: changed"),
			ContainSubstring("UPDATE=1"),
		))
	})

	t.Run("When the fixture does not exist, it should stop the test and say how to create it", func(t *testing.T) {
		t.Parallel()
		if update() {
			t.Skip("Skipping: with UPDATE set the fixture would be created")
		}
		g := NewWithT(t)
		r := &recordingTB{TB: t, name: "TestCompareWithFixture/does not exist"}
		r.run(configMap("a", nil))
		g.Expect(r.fatal).To(BeTrue())
		g.Expect(r.errors).To(ConsistOf(ContainSubstring("run with UPDATE=1 to create it")))
	})
}

func TestFixturePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, testName, want string
	}{
		{
			name:     "When the test has subtests, it should join the levels with underscores",
			testName: "TestDesired/When_HA,_it_should_render_two_replicas",
			want:     "testdata/zz_fixture_TestDesired_When_HA__it_should_render_two_replicas.yaml",
		},
		{
			name:     "When the name is plain, it should keep it",
			testName: "TestNode-1.2",
			want:     "testdata/zz_fixture_TestNode-1.2.yaml",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(FixturePath(tt.testName)).To(Equal(tt.want))
		})
	}
}

func TestMarshal(t *testing.T) {
	t.Parallel()

	t.Run("When given several objects, it should write one document each, in order", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		out, err := Marshal(configMap("b", nil), configMap("a", nil))
		g.Expect(err).NotTo(HaveOccurred())
		docs := strings.Split(string(out), "---\n")
		g.Expect(docs).To(HaveLen(2))
		g.Expect(docs[0]).To(ContainSubstring("name: b"))
		g.Expect(docs[1]).To(ContainSubstring("name: a"))
	})

	t.Run("When a typed object has unset structs, it should drop the nulls and the status", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		out, err := Marshal(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(out)).NotTo(ContainSubstring("null"))
		g.Expect(string(out)).NotTo(ContainSubstring("status"))
		g.Expect(string(out)).To(Equal("metadata:\n  name: s\nspec: {}\n"))
	})

	t.Run("When a map has many keys, it should sort them so the output is stable", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		data := map[string]string{}
		for i := range 50 {
			data[fmt.Sprintf("key-%02d", 49-i)] = "v"
		}
		first, err := Marshal(configMap("a", data))
		g.Expect(err).NotTo(HaveOccurred())
		for range 10 {
			again, err := Marshal(configMap("a", data))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(first))
		}
		g.Expect(strings.Index(string(first), "key-00")).To(BeNumerically("<", strings.Index(string(first), "key-49")))
	})

	t.Run("When an object cannot be serialised, it should return an error naming it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		_, err := Marshal(configMap("a", nil), make(chan int))
		g.Expect(err).To(MatchError(ContainSubstring("object 2 (chan int)")))
	})
}

func TestDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		want, got string
		contains  []string
		empty     bool
	}{
		{
			name: "When both are equal, it should report nothing",
			want: "a\nb\n", got: "a\nb\n",
			empty: true,
		},
		{
			name: "When a line changes, it should show the context and both sides from that line",
			want: "a\nb\nc\nd\ne\n", got: "a\nb\nc\nX\ne\n",
			contains: []string{
				"first difference at line 4 (fixture has 6 lines, rendered 6)",
				"     1   a\n", "     3   c\n",
				"-    4   d\n", "+    4   X\n",
			},
		},
		{
			name: "When the rendered output is longer, it should show the extra lines",
			want: "a\n", got: "a\nb\n",
			contains: []string{"first difference at line 2", "+    2   b\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			d := Diff(tt.want, tt.got)
			if tt.empty {
				g.Expect(d).To(BeEmpty())
				return
			}
			for _, s := range tt.contains {
				g.Expect(d).To(ContainSubstring(s))
			}
		})
	}
}
