// Package loopdev gives a Linux host the block devices a hypervisor would give a guest: a loop
// device over a volume's file, linked at /dev/disk/by-id/virtio-<first 20 characters of the
// volume ID>, the name a KVM guest's udev gives a Cinder volume and the first one
// cinder-csi-plugin's node service looks for. It also finds and frees what a killed owner left:
// loop devices over the files of a directory, the loop devices stacked onto those, and the
// links to them. The fake cloud's LoopDisks and the real cloud's attachment followers share it.
//
// Everything but DefaultByIDDir and ShortID exists on Linux only.
package loopdev

// DefaultByIDDir is where udev puts the stable disk links the driver searches.
const DefaultByIDDir = "/dev/disk/by-id"

// ShortID is the part of a volume ID that fits a virtio serial (20 characters), which is what the
// guest's udev puts in the by-id name.
func ShortID(volumeID string) string {
	if len(volumeID) > 20 {
		return volumeID[:20]
	}
	return volumeID
}

// ByIDName is the by-id link name of a volume's virtio disk.
func ByIDName(volumeID string) string { return "virtio-" + ShortID(volumeID) }
