package realcloud

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountExports bind-mounts each backend's export directory on the mount point Cinder's NFS
// driver computes for its share. The driver finds the share mounted and uses it as it would an
// NFS mount: no NFS server or client is involved, and the volume files are plain sparse files
// in the export. Each mount is made private, so that it does not propagate into other mount
// namespaces (real nodes') or back.
func (c *Cloud) mountExports() error {
	for i := range backends {
		export, target := c.exportDir(i), c.mountPoint(i)
		for _, d := range []string{export, target} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := unix.Mount(export, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s on %s: %w", export, target, err)
		}
		c.mounts = append(c.mounts, target)
		if err := unix.Mount("", target, "", unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making %s private: %w", target, err)
		}
	}
	return nil
}

// unmountExports undoes mountExports; a lazy unmount as a last resort, for a file a dying
// process still holds open.
func (c *Cloud) unmountExports() error {
	var errs []error
	for _, m := range c.mounts {
		if err := unix.Unmount(m, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			}
		}
	}
	c.mounts = nil
	return errors.Join(errs...)
}
