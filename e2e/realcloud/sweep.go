package realcloud

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runDirPattern names the run directories under the temporary directory.
const runDirPattern = "realcloud-*"

// lockRunDir takes an exclusive lock on <dir>/lock for the life of the cloud. The kernel drops
// it when the process dies however it dies, so a run directory whose lock can be taken belongs
// to a run that was killed (SIGKILL, a test timeout) before it could stop its cloud: sweep
// clears those.
func lockRunDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return f, nil
}

// sweep removes what killed runs left: their attachment followers' loop devices and by-id links,
// their bind mounts and run directories. Their processes are gone already: every service dies
// with the test binary (Pdeathsig), and what they fork (uwsgi's workers, the Erlang VM's
// helpers) ends with them. A run whose devices cannot all be freed yet (one still mounted) is
// kept whole, with its records, for a later sweep.
func sweep() error {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), runDirPattern))
	var errs []error
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
		if err != nil {
			// No lock file: a run between creating its directory and locking it, or one killed
			// in that moment; only an old one is stale.
			if info, statErr := os.Stat(dir); statErr != nil || time.Since(info.ModTime()) < time.Hour {
				continue
			}
		} else {
			busy := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
			if busy {
				_ = f.Close()
				continue
			}
		}
		if err := cleanHypervisor(dir); err != nil {
			errs = append(errs, err)
			if f != nil {
				_ = f.Close()
			}
			continue
		}
		mounts, _ := os.ReadFile("/proc/mounts")
		for _, line := range strings.Split(string(mounts), "\n") {
			if fields := strings.Fields(line); len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
				if err := unix.Unmount(fields[1], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
					errs = append(errs, fmt.Errorf("unmounting %s: %w", fields[1], err))
				}
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
		if f != nil {
			_ = f.Close()
		}
	}
	return errors.Join(errs...)
}
