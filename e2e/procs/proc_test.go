package procs

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestStatState(t *testing.T) {
	g := NewWithT(t)
	for stat, want := range map[string]byte{
		"42 (kube-apiserver) S 1 42 42 0 -1":  'S',
		"42 (odd (name) here) T 1 42 42 0 -1": 'T',
		"42 (x) R 1":                          'R',
	} {
		got, ok := StatState(stat)
		g.Expect(ok).To(BeTrue(), stat)
		g.Expect(got).To(Equal(want), stat)
	}
	for _, bad := range []string{"", "42 (x)", "42 no parenthesis S"} {
		_, ok := StatState(bad)
		g.Expect(ok).To(BeFalse(), bad)
	}
}

func TestLogLinesNaming(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "kubelet.log")
	g.Expect(os.WriteFile(path, []byte("a pod-1 mounted\nnothing here\nb vol-9 staged\nc pod-1 unmounted\nd pod-1 gone\n"), 0o644)).To(Succeed())
	g.Expect(LogLinesNaming(path, []string{"pod-1", "vol-9"}, 10)).To(Equal([]string{"a pod-1 mounted", "b vol-9 staged", "c pod-1 unmounted", "d pod-1 gone"}))
	g.Expect(LogLinesNaming(path, []string{"pod-1"}, 2)).To(Equal([]string{"c pod-1 unmounted", "d pod-1 gone"}), "the last ones")
	g.Expect(LogLinesNaming(path, []string{"", "absent"}, 10)).To(BeEmpty(), "an empty needle names nothing")
	g.Expect(LogLinesNaming(filepath.Join(t.TempDir(), "missing.log"), []string{"pod-1"}, 10)).To(BeNil())
}
