//go:build linux

package loopdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// loFlagsAutoclear is LO_FLAGS_AUTOCLEAR (linux/loop.h), which x/sys does not define: the kernel
// frees the loop device when its last opener closes it.
const loFlagsAutoclear = 4

// Available returns nil when loop devices can be made here (root, a usable /dev/loop-control),
// or an error that says what is missing.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("loop devices need root")
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/loop-control: %w", err)
	}
	_ = ctl.Close()
	return nil
}

// Attach binds a free loop device to path with autoclear and returns it open, with its path.
// The caller's open file keeps the device: when the caller dies, the kernel frees it by itself
// once nothing else (a mount) holds it. LOOP_CTL_GET_FREE and the bind are two steps, so another
// process may take the same device in between: the bind then fails with EBUSY and the next free
// device is tried.
func Attach(path string) (*os.File, string, error) {
	backing, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("opening volume file: %w", err)
	}
	defer func() { _ = backing.Close() }()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("opening /dev/loop-control: %w", err)
	}
	defer func() { _ = ctl.Close() }()

	for range 100 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, "", fmt.Errorf("finding a free loop device: %w", err)
		}
		devPath := "/dev/loop" + strconv.Itoa(n)
		dev, err := os.OpenFile(devPath, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			// devtmpfs creates the node right after the device; this is that moment.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("opening %s: %w", devPath, err)
		}
		err = configure(dev, backing, path)
		if err == nil {
			return dev, devPath, nil
		}
		_ = dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, "", fmt.Errorf("binding %s to %s: %w", devPath, path, err)
		}
	}
	return nil, "", errors.New("no free loop device after 100 tries")
}

// configure binds dev to backing with autoclear, with LOOP_CONFIGURE (Linux 5.8+) or, on older
// kernels, LOOP_SET_FD plus LOOP_SET_STATUS64. The file name is recorded for losetup's listing.
func configure(dev, backing *os.File, path string) error {
	var info unix.LoopInfo64
	info.Flags = loFlagsAutoclear
	copy(info.File_name[:len(info.File_name)-1], path)
	cfg := unix.LoopConfig{Fd: uint32(backing.Fd()), Info: info}
	err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(backing.Fd())); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(int(dev.Fd()), &info); err != nil {
		_ = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}

// SetCapacity makes an open loop device take its backing file's current size, as losetup -c
// does: a volume extended while attached.
func SetCapacity(dev *os.File) error {
	return unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_CAPACITY, 0)
}

// Clear unbinds an open loop device from its file. A device that something else still holds (a
// mount) is freed by the kernel when that ends; one already unbound is fine.
func Clear(dev *os.File) error {
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return err
	}
	return nil
}

// Release flushes dev, detaches it from its backing file and closes it, each step tried even
// when one before failed; path names the device in the errors.
func Release(dev *os.File, path string) error {
	var errs []error
	if err := dev.Sync(); err != nil {
		errs = append(errs, fmt.Errorf("flushing %s: %w", path, err))
	}
	if err := Clear(dev); err != nil {
		errs = append(errs, fmt.Errorf("detaching %s: %w", path, err))
	}
	if err := dev.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Link points link at target, replacing an older link of the same name atomically. The link's
// directory is created when missing (there is no udev on a test host), and the directories it
// created are passed to recordCreated first, so that a cleanup can remove them; another owner
// may remove the directory when it empties, hence the retry.
func Link(link, target string, recordCreated func(created []string) error) error {
	var err error
	for range 5 {
		var created []string
		created, err = MkdirAllRecorded(filepath.Dir(link), 0o755)
		if len(created) > 0 {
			if rerr := recordCreated(created); rerr != nil {
				return rerr
			}
		}
		if err != nil {
			continue
		}
		tmp := filepath.Join(filepath.Dir(link), fmt.Sprintf(".%s.tmp-%d", filepath.Base(link), os.Getpid()))
		_ = os.Remove(tmp)
		if err = os.Symlink(target, tmp); err != nil {
			continue
		}
		if err = os.Rename(tmp, link); err != nil {
			_ = os.Remove(tmp)
			continue
		}
		return nil
	}
	return fmt.Errorf("linking %s to %s: %w", link, target, err)
}

// MkdirAllRecorded is os.MkdirAll that returns the directories it created, shallowest first.
// A directory made concurrently by someone else counts as theirs.
func MkdirAllRecorded(dir string, perm fs.FileMode) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], perm)
		if err == nil {
			created = append(created, missing[i])
		} else if !errors.Is(err, fs.ErrExist) {
			return created, fmt.Errorf("creating %s: %w", missing[i], err)
		}
	}
	return created, nil
}

// FreeBackedBy detaches the loop devices bound to files in realDir (a resolved path), after the
// loop devices bound onto them, and removes the links in byID to them, adding what it freed to
// removed. It is how an owner's cleanup finds what it lost track of, or what a killed owner left.
func FreeBackedBy(realDir, byID string, removed *[]string) error {
	// Loop devices still bound to our files, and any by-id link to them.
	loops, err := BackedBy(realDir)
	errs := []error{err}
	// A loop device bound onto one of ours holds it open: the kubelet binds one onto the device
	// of every raw-block volume it maps, so that the device cannot go away while a pod uses it,
	// and a teardown that was cut short leaves it behind. It goes first.
	for _, dev := range StackedOn(loops) {
		if err := clearStacked(dev); err != nil {
			errs = append(errs, err)
		} else {
			*removed = append(*removed, dev)
		}
	}
	for _, dev := range loops {
		for _, link := range linksTo(byID, dev) {
			if err := os.Remove(link); err == nil {
				*removed = append(*removed, link)
			} else if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if err := clearIn(dev, realDir); err != nil {
			errs = append(errs, err)
		} else {
			*removed = append(*removed, dev)
		}
	}
	return errors.Join(errs...)
}

// BackedBy lists the loop devices whose backing file is in dir (a resolved path), from
// /sys/block/loop*/loop/backing_file; the kernel appends " (deleted)" when the file is gone.
func BackedBy(dir string) ([]string, error) {
	paths, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		if backingDir(p) == dir {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(p))))
		}
	}
	slices.Sort(out)
	return out, nil
}

// backingDir returns the directory of the file behind a loop device, from its sysfs
// backing_file, or "" when it has none.
func backingDir(sysBackingFile string) string {
	data, err := os.ReadFile(sysBackingFile)
	if err != nil {
		return ""
	}
	file := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
	if file == "" {
		return ""
	}
	return filepath.Dir(file)
}

// StackedOn lists the loop devices whose backing file is the device node of one of devs
// (matched by file system and inode, as the kernel records the backing file).
func StackedOn(devs []string) []string {
	nodes := map[[2]uint64]bool{}
	for _, d := range devs {
		var st unix.Stat_t
		if unix.Stat(d, &st) == nil {
			nodes[[2]uint64{st.Dev, st.Ino}] = true
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	paths, _ := filepath.Glob("/sys/block/loop*/loop")
	var out []string
	for _, p := range paths {
		dev := "/dev/" + filepath.Base(filepath.Dir(p))
		if info, ok := Status(dev); ok && nodes[[2]uint64{info.Device, info.Inode}] {
			out = append(out, dev)
		}
	}
	slices.Sort(out)
	return out
}

// Status reads a bound loop device's status; ok is false for an unbound or missing device.
func Status(dev string) (*unix.LoopInfo64, bool) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, false
	}
	defer func() { _ = f.Close() }()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	return info, err == nil
}

// clearStacked detaches a loop device bound onto one of ours.
func clearStacked(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detaching %s, bound onto a loop disk: %w", dev, err)
	}
	return nil
}

// linksTo returns the symlinks in dir that point at dev.
func linksTo(dir, dev string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		link := filepath.Join(dir, e.Name())
		target, err := os.Readlink(link)
		if err != nil {
			continue
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		if filepath.Clean(target) == dev {
			out = append(out, link)
		}
	}
	return out
}

// clearIn frees a loop device after checking, with the device open, that it is still bound to a
// file in dir. A device that something else still holds (a mount) is freed by the kernel when
// that ends; that is reported as an error so the caller knows it is not gone yet.
func clearIn(dev, dir string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	sys := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	if backingDir(sys) != dir {
		_ = f.Close()
		return nil
	}
	err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
	_ = f.Close()
	if err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	// The kernel frees the device on the last close; give a release in progress a moment.
	for range 50 {
		if backingDir(sys) != dir {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s is still in use (mounted?); the kernel frees it when that ends", dev)
}
