package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	ID, Parent  string
	MountPoint  string
	FSType      string
	Propagation string // "shared", "slave", "shared+slave", "private" or "unbindable"
}

// readMounts parses /proc/self/mountinfo. kubelet and containerd run in this process's mount
// namespace (nsenter joins only the network namespace), so every mount they make shows here.
func readMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		e := mountEntry{ID: fields[0], Parent: fields[1], MountPoint: unescapeMount(fields[4])}
		var shared, slave, unbindable bool
		for i, opt := range fields[6:] {
			if opt == "-" {
				if 6+i+1 < len(fields) {
					e.FSType = fields[6+i+1]
				}
				break
			}
			switch {
			case strings.HasPrefix(opt, "shared:"):
				shared = true
			case strings.HasPrefix(opt, "master:"):
				slave = true
			case opt == "unbindable":
				unbindable = true
			}
		}
		switch {
		case shared && slave:
			e.Propagation = "shared+slave"
		case shared:
			e.Propagation = "shared"
		case slave:
			e.Propagation = "slave"
		case unbindable:
			e.Propagation = "unbindable"
		default:
			e.Propagation = "private"
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				v = v*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	dir = filepath.Clean(dir)
	path = filepath.Clean(path)
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// mountsUnder returns the mount points at or below any of dirs, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range mounts {
		for _, d := range dirs {
			if d != "" && under(m.MountPoint, d) && !seen[m.MountPoint] {
				seen[m.MountPoint] = true
				out = append(out, m.MountPoint)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out, nil
}

// unmountUnder unmounts everything mounted at or below dirs, deepest first, repeating until
// nothing is left (a path can carry several stacked mounts). A busy mount is detached lazily:
// the kernel frees it once its last user is gone, and it is out of the path at once.
func unmountUnder(dirs ...string) error {
	for range 10 {
		points, err := mountsUnder(dirs...)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		var errs []error
		for _, p := range points {
			err := unix.Unmount(p, 0)
			if errors.Is(err, unix.EBUSY) {
				err = unix.Unmount(p, unix.MNT_DETACH)
			}
			if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	points, _ := mountsUnder(dirs...)
	return fmt.Errorf("mounts left after repeated unmounting: %v", points)
}

// propagationOf returns the propagation of the mount at path (the top one when stacked).
func propagationOf(path string) (string, error) {
	mounts, err := readMounts()
	if err != nil {
		return "", err
	}
	found := ""
	for _, m := range mounts {
		if m.MountPoint == path {
			found = m.Propagation
		}
	}
	if found == "" {
		return "", fmt.Errorf("%s is not a mount point", path)
	}
	return found, nil
}

// makeShared makes the mount at path shared and returns its earlier propagation, so that
// restorePropagation can undo it; "" means nothing was changed.
func makeShared(path string) (string, error) {
	prev, err := propagationOf(path)
	if err != nil {
		return "", err
	}
	if prev == "shared" || prev == "shared+slave" {
		return "", nil
	}
	if err := unix.Mount("", path, "", unix.MS_SHARED, ""); err != nil {
		return "", fmt.Errorf("making %s shared: %w", path, err)
	}
	return prev, nil
}

// restorePropagation sets the propagation makeShared found. A slave mount made shared is
// "shared+slave"; MS_SLAVE turns it back into a plain slave of the same master.
func restorePropagation(path, prev string) error {
	flags := map[string]uintptr{
		"private":    unix.MS_PRIVATE,
		"slave":      unix.MS_SLAVE,
		"unbindable": unix.MS_UNBINDABLE,
	}
	flag, ok := flags[prev]
	if !ok {
		return nil
	}
	if err := unix.Mount("", path, "", flag, ""); err != nil {
		return fmt.Errorf("restoring %s propagation of %s: %w", prev, path, err)
	}
	return nil
}

// bindShared bind-mounts dir on itself and makes the result recursively shared. kubelet's
// Bidirectional mount propagation (the CSI node plugin mounts volumes under the kubelet root
// for other pods to see) needs the kubelet root to be a shared mount, and this host's / is
// private.
func bindShared(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making %s rshared: %w", dir, err)
	}
	return nil
}
