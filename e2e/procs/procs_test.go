package procs

import (
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// sh starts a shell script as a child in its own process group, logging to a directory of the
// test's.
func sh(t *testing.T, name, script string) *Process {
	t.Helper()
	p, err := Start(Options{Name: name, Path: "/bin/sh", Args: []string{"-c", script}, LogDir: t.TempDir(), Group: true})
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestProcess(t *testing.T) {
	t.Run("When a process exits by itself, its exit error should name it and quote its log", func(t *testing.T) {
		g := NewWithT(t)
		p := sh(t, "failing", "echo the reason it failed; exit 3")
		g.Eventually(p.Done()).WithTimeout(10 * time.Second).Should(BeClosed())
		g.Expect(p.Exited()).To(BeTrue())
		g.Expect(FirstExit(nil, p)).To(MatchError(And(ContainSubstring("failing exited"),
			ContainSubstring("exit status 3"), ContainSubstring("the reason it failed"))))
	})
	t.Run("When a process ignores SIGTERM, Stop should kill it after the grace period", func(t *testing.T) {
		g := NewWithT(t)
		p := sh(t, "stubborn", `trap "" TERM; echo ready; while :; do sleep 1; done`)
		g.Eventually(func() string { return LogTail(p.LogPath(), 1) }).WithTimeout(10 * time.Second).Should(Equal("ready"))
		start := time.Now()
		p.Stop(500 * time.Millisecond)
		g.Expect(p.Exited()).To(BeTrue())
		g.Expect(time.Since(start)).To(BeNumerically(">=", 500*time.Millisecond))
		g.Expect(p.Err()).To(MatchError(ContainSubstring("killed")))
	})
	t.Run("When a stopped process is frozen, Stop should wake it so that SIGTERM ends it", func(t *testing.T) {
		g := NewWithT(t)
		p := sh(t, "frozen", `trap "exit 0" TERM; echo ready; while :; do sleep 1; done`)
		g.Eventually(func() string { return LogTail(p.LogPath(), 1) }).WithTimeout(10 * time.Second).Should(Equal("ready"))
		g.Expect(p.Signal(syscall.SIGSTOP)).To(Succeed())
		p.Stop(time.Minute)
		g.Expect(p.Err()).NotTo(HaveOccurred(), "its TERM trap (exit 0), not the SIGKILL after the grace period, ended it")
	})
	t.Run("When a process is restarted, it should append to the same log", func(t *testing.T) {
		g := NewWithT(t)
		p := sh(t, "twice", "echo run")
		g.Eventually(p.Done()).WithTimeout(10 * time.Second).Should(BeClosed())
		again, err := p.Restart()
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(again.Kill)
		g.Eventually(again.Done()).WithTimeout(10 * time.Second).Should(BeClosed())
		g.Expect(again.LogPath()).To(Equal(p.LogPath()))
		g.Expect(strings.Count(LogTail(p.LogPath(), 10), "run")).To(Equal(2))
	})
}
