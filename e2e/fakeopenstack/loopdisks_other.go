//go:build !linux

package fakeopenstack

import (
	"errors"

	"github.com/go-logr/logr"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
)

// DefaultByIDDir is where udev puts the stable disk links the driver searches.
const DefaultByIDDir = loopdev.DefaultByIDDir

// ErrLoopDisksInUse is returned by SweepLoopDisks for a directory whose owner process still runs.
var ErrLoopDisksInUse = errors.New("loop disk directory is in use by a running process")

var errNoLoop = errors.New("loop devices exist only on Linux")

// LoopOptions configures NewLoopDisks; see the Linux implementation.
type LoopOptions struct {
	// Dir holds the backing files.
	Dir string
	// ByIDDir is where the by-id links go.
	ByIDDir string
	// Logger receives device changes.
	Logger logr.Logger
}

// LoopDisks backs volumes with loop devices on Linux; elsewhere it cannot be created.
type LoopDisks struct{ MemoryDisks }

// LoopDisksAvailable reports that loop devices are missing on this OS.
func LoopDisksAvailable() error { return errNoLoop }

// NewLoopDisks fails on this OS.
func NewLoopDisks(LoopOptions) (*LoopDisks, error) { return nil, errNoLoop }

// SweepLoopDisks has nothing to sweep on this OS.
func SweepLoopDisks(string, logr.Logger) ([]string, error) { return nil, nil }

// Close does nothing on this OS.
func (d *LoopDisks) Close() error { return nil }

// Dir is empty on this OS.
func (d *LoopDisks) Dir() string { return "" }

// LinkPath is empty on this OS.
func (d *LoopDisks) LinkPath(string) string { return "" }

// Device is empty on this OS.
func (d *LoopDisks) Device(string) string { return "" }
