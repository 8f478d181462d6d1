package procs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// interruptChildEnv makes the test binary, run again by TestOnInterrupt, act as an interrupted
// test: it registers stops, cancels one, signals itself and waits to be ended.
const interruptChildEnv = "PROCS_INTERRUPT_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(interruptChildEnv); dir != "" {
		interruptChild(dir)
		return
	}
	os.Exit(m.Run())
}

func interruptChild(dir string) {
	mark := func(name string) func() {
		return func() {
			time.Sleep(100 * time.Millisecond) // a stop that takes a while still completes
			_ = os.WriteFile(filepath.Join(dir, name), nil, 0o644)
		}
	}
	OnInterrupt("the first", mark("first"))
	cancel := OnInterrupt("the cancelled", mark("cancelled"))
	OnInterrupt("the last", mark("last"))
	cancel()
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(time.Minute)
	os.Exit(3) // not reached when the handler exits
}

func TestOnInterrupt(t *testing.T) {
	t.Run("When the binary is interrupted, it should run the stops not cancelled and exit as interrupted", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), interruptChildEnv+"="+dir)
		out, err := cmd.CombinedOutput()
		expectInterrupted(t, dir, err, out)
	})
	t.Run("When what reads the binary's output is gone, it should still run the stops", func(t *testing.T) {
		// As when a Ctrl-C ends go test before the test binary: its output is a pipe with no
		// reader, and the stops print.
		dir := t.TempDir()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), interruptChildEnv+"="+dir)
		cmd.Stdout, cmd.Stderr = w, w
		err = cmd.Run()
		_ = w.Close()
		expectInterrupted(t, dir, err, []byte("(its output went to a pipe without a reader)"))
	})
}

// expectInterrupted checks that the child ended as interrupted, with the stops of interruptChild
// run or not as registered.
func expectInterrupted(t *testing.T, dir string, err error, out []byte) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != interruptExitCode {
		t.Fatalf("the interrupted binary ended with %v, want exit code %d; it printed:\n%s", err, interruptExitCode, out)
	}
	for name, want := range map[string]bool{"first": true, "last": true, "cancelled": false} {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != want {
			t.Errorf("stop %q ran: %v, want %v; the binary printed:\n%s", name, got, want, out)
		}
	}
}
