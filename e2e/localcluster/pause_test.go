package localcluster

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A process sent SIGSTOP is seen stopped in every thread, and running again after SIGCONT: what
// Pause waits for.
func TestThreadStatesFollowStopAndContinue(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("sleep", "60")
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	allStopped := func() bool {
		states, err := threadStates(cmd.Process.Pid)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(states).NotTo(BeEmpty())
		for _, s := range states {
			if !stoppedState(s) {
				return false
			}
		}
		return true
	}
	g.Expect(allStopped()).To(BeFalse(), "a sleeping process is not stopped")
	g.Expect(cmd.Process.Signal(syscall.SIGSTOP)).To(Succeed())
	g.Eventually(allStopped).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())
	g.Expect(cmd.Process.Signal(syscall.SIGCONT)).To(Succeed())
	g.Eventually(allStopped).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeFalse())
}
