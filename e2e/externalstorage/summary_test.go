package externalstorage

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestPatternOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, spec, want string
	}{
		{name: "When the spec has a pattern and a suite, it should name both",
			spec: "[It] External Storage [Driver: cinder.csi.openstack.org] [Testpattern: Dynamic PV (ext4)] volumes should store data",
			want: "Dynamic PV (ext4) / volumes"},
		{name: "When tags stand between the pattern and the suite, it should skip them",
			spec: "[It] External Storage [Driver: d] [Testpattern: Dynamic PV (xfs)] [Slow] volume-expand should resize volume when PVC is edited while pod is using it",
			want: "Dynamic PV (xfs) / volume-expand"},
		{name: "When the spec has no test pattern, it should be other",
			spec: "[It] External Storage [Driver: d] should do something", want: "other"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(patternOf(tt.spec)).To(Equal(tt.want))
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	dir := t.TempDir()
	const report = `<testsuites><testsuite>
<testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>
<testcase name="[It] External Storage [Driver: d] [Testpattern: Dynamic PV (ext4)] volumes should store data" status="passed"></testcase>
<testcase name="[It] External Storage [Driver: d] [Testpattern: Dynamic PV (ext4)] volumes should allow exec" status="failed"></testcase>
<testcase name="[It] External Storage [Driver: d] [Testpattern: Dynamic PV (ntfs)] volumes should store data" status="skipped"><skipped message="skipped - Driver does not support fs type ntfs"></skipped></testcase>
<testcase name="[It] External Storage [Driver: d] [Testpattern: Inline-volume (ext4)] volumes should store data" status="skipped"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`
	g.Expect(os.WriteFile(filepath.Join(dir, "junit_01.xml"), []byte(report), 0o600)).To(Succeed())

	s, err := Summarize(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Counts).To(Equal(Counts{Passed: 1, Failed: 1, Skipped: 1, Unselected: 1}))
	g.Expect(s.ByPattern).To(HaveKeyWithValue("Dynamic PV (ext4) / volumes", Counts{Passed: 1, Failed: 1}))
	g.Expect(s.String()).To(HavePrefix("1 passed, 1 failed, 1 skipped by the suite, 0 interrupted or timed out (1 specs not selected)"))
	table, err := os.ReadFile(filepath.Join(dir, "summary.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(table)).To(MatchRegexp(`Dynamic PV \(ext4\) / volumes +1 +1 +0 +0\n`))
	g.Expect(string(table)).To(MatchRegexp(`Dynamic PV \(ntfs\) / volumes +0 +0 +1 +0\n`))
	g.Expect(string(table)).NotTo(ContainSubstring("Inline-volume"), "specs not selected are not listed")
}
