package imagetars

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Operator is the name of the operator's own image.
const Operator = "cinder-csi-operator"

// OperatorUser is the operator image's user, the Dockerfile's: numeric, so that the pod's
// runAsNonRoot can verify it.
const OperatorUser = "65532:65532"

// BuildOperator packs a cinder-csi-operator binary into an image of the Dockerfile's shape (the
// binary at /usr/bin/cinder-csi-operator as the entrypoint, the system CA roots, a non-root
// user) as an OCI layout tar under <binDir>/images/cinder-csi-operator/, without a builder or
// base image. The tag is a hash of the image's inputs, so every build of a changed binary is a
// new reference: a pod with imagePullPolicy IfNotPresent never runs an older build that a node
// still holds under the same name.
func BuildOperator(binDir, binary string) (Built, error) {
	return BuildOperatorOf(binDir, binary, "")
}

// BuildOperatorOf is BuildOperator for the binary of a release other than this tree's (release
// names it; "" is this tree's): its tars are kept in a directory of their own, so that building
// one release's image never removes the other's while a node is about to import it.
func BuildOperatorOf(binDir, binary, release string) (Built, error) {
	if _, err := os.Stat(binary); err != nil {
		return Built{}, fmt.Errorf("operator binary: %w (run `make build`)", err)
	}
	r := NewRootfs()
	r.Dir("/tmp", 0o777|fs.ModeSticky)
	r.Dir("/etc", 0o755)
	if _, err := os.Stat(caBundle); err == nil {
		if err := r.Host(caBundle); err != nil {
			return Built{}, err
		}
	}
	r.File("/usr/bin/cinder-csi-operator", binary, 0o755)
	img := Image{
		Ref:    Prefix + Operator,
		Rootfs: r,
		Config: Config{Entrypoint: []string{"/usr/bin/cinder-csi-operator"}, User: OperatorUser, Env: []string{defaultPath}},
	}
	key, err := inputHash(img)
	if err != nil {
		return Built{}, fmt.Errorf("hashing the operator image's inputs: %w", err)
	}
	tag := "dev-" + key[:12]
	img.Ref += ":" + tag
	file := filepath.Join(binDir, "images", Operator, release, tag+".tar")
	if err := writeOnce(file, img); err != nil {
		return Built{}, err
	}
	return Built{Ref: img.Ref, Tar: file}, nil
}
