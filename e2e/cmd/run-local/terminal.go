package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// takeTerminal moves run-local into a process group of its own and makes that group the
// terminal's foreground group, so that Ctrl-C reaches run-local alone and not the make (and go
// run) that started it: make dies of a SIGINT it receives itself, and reports an error, even when
// its child then shuts down cleanly and exits 0. The returned function hands the terminal back
// to the group run-local came from; call it before exiting. Without a terminal on stdin (CI, a
// script) it changes nothing: a signal there is the caller's to deliver.
func takeTerminal() (restore func()) {
	noop := func() {}
	fd := int(os.Stdin.Fd())
	orig, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || orig != unix.Getpgrp() {
		// Not a terminal, or run-local was started in the background: leave it be.
		return noop
	}
	// Between the group change and taking the terminal, this process is in a background group:
	// a terminal write or the tcsetpgrp call itself would stop it with SIGTTOU.
	signal.Ignore(syscall.SIGTTOU)
	if err := unix.Setpgid(0, 0); err != nil {
		return noop
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp()); err != nil {
		_ = unix.Setpgid(0, orig)
		return noop
	}
	return func() { _ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, orig) }
}
