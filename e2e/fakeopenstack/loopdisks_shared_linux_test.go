//go:build linux

package fakeopenstack

import (
	"golang.org/x/sys/unix"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
)

// The loop device helpers moved to package loopdev, which the real cloud's attachment followers
// share; these names keep the tests that use them as they were.

func loopsStackedOn(devs []string) []string { return loopdev.StackedOn(devs) }

func loopStatus(dev string) (*unix.LoopInfo64, bool) { return loopdev.Status(dev) }
