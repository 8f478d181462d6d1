// Package imagetars packs the operator's operand images (cinder-csi-plugin, the kubernetes-csi
// sidecars, kube-rbac-proxy, the registrar and liveness-probe stand-ins), the pod sandbox's pause
// image and a toolbox image for test pods into single-layer OCI image-layout tars, from binaries
// built locally and tools copied from the host. No registry or container builder is involved:
// real-node e2e runs import the tars with `ctr -n k8s.io images import`.
//
// The binaries come from `make operand-binaries` (e2e/hack/build-operands.sh), in version-keyed
// directories of the bin dir; the stand-ins are built from this module on every Build.
package imagetars

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// Prefix is the repository prefix of every image built here. It names no registry: the images
// exist only in the local containerd they are imported into.
const Prefix = "localhost/cinder-csi-e2e/"

// Image names (the last path element of the references).
const (
	Driver              = "cinder-csi-plugin"
	Provisioner         = "csi-provisioner"
	Attacher            = "csi-attacher"
	Resizer             = "csi-resizer"
	Snapshotter         = "csi-snapshotter"
	SnapshotController  = "snapshot-controller"
	KubeRBACProxy       = "kube-rbac-proxy"
	NodeDriverRegistrar = "csi-node-driver-registrar-standin"
	LivenessProbe       = "csi-livenessprobe-standin"
	Pause               = "pause"
	Toolbox             = "toolbox"
)

// StandinVersion tags the stand-in images; they are built from this module, not from a release.
const StandinVersion = "v0.1.0"

// ToolboxVersion tags the toolbox image; its content is the host's Debian tools.
const ToolboxVersion = "v1"

// Versions are the upstream versions the binaries are built from. The Makefile's variables of
// the same meaning must match DefaultVersions (a test checks it).
type Versions struct {
	// Kube is the k8s.io/kubernetes version of kubelet, kubectl and the pause source.
	Kube            string
	CinderCSIPlugin string
	Provisioner     string
	Attacher        string
	Resizer         string
	// Snapshotter is the external-snapshotter version of csi-snapshotter and snapshot-controller.
	Snapshotter   string
	KubeRBACProxy string
	// KubeRouter is the kube-router version whose network-policy controller enforces
	// NetworkPolicy on real nodes. It is a host process there, not an image: see KubeRouterPath.
	KubeRouter string
}

// DefaultVersions returns the pinned versions (see realnode.md for why these: they are the ones
// the Go module proxy serves and that build here).
func DefaultVersions() Versions {
	return Versions{
		Kube:            "v1.36.3",
		CinderCSIPlugin: "v1.36.0",
		Provisioner:     "v6.4.0",
		Attacher:        "v4.13.0",
		Resizer:         "v2.3.0",
		Snapshotter:     "v8.7.0",
		KubeRBACProxy:   "v0.19.1",
		KubeRouter:      "v2.1.0",
	}
}

// BinaryPath returns where build-operands.sh puts a binary: <binDir>/<name>-<version>/<name>.
func BinaryPath(binDir, name, version string) string {
	return filepath.Join(binDir, name+"-"+version, name)
}

// KubeletPath returns the kubelet that build-operands.sh builds next to the kube-apiserver of the
// same version.
func KubeletPath(binDir string, v Versions) string {
	return filepath.Join(binDir, "kube-"+v.Kube, "kubelet")
}

// KubeRouterName is kube-router's binary name under the bin dir.
const KubeRouterName = "kube-router"

// KubeRouterPath returns where build-operands.sh puts kube-router, which real nodes run to
// enforce NetworkPolicy (realnode.NetworkPolicyOptions).
func KubeRouterPath(binDir string, v Versions) string {
	return BinaryPath(binDir, KubeRouterName, v.KubeRouter)
}

// Built is one image tar and the reference it imports as.
type Built struct {
	Ref string
	Tar string
}

// Set holds built images by name.
type Set map[string]Built

// Tars returns the set's tar files, sorted.
func (s Set) Tars() []string {
	out := make([]string, 0, len(s))
	for _, b := range s {
		out = append(out, b.Tar)
	}
	sort.Strings(out)
	return out
}

// envImages maps each operator image environment variable to the image serving it. The driver
// image serves both the controller and the node (cinder-csi-plugin is one binary with both
// services); control-plane variants get the same images as the guest ones.
var envImages = map[string]string{
	operandimages.EnvDriver:                    Driver,
	operandimages.EnvDriverControlPlane:        Driver,
	operandimages.EnvProvisioner:               Provisioner,
	operandimages.EnvAttacher:                  Attacher,
	operandimages.EnvResizer:                   Resizer,
	operandimages.EnvSnapshotter:               Snapshotter,
	operandimages.EnvNodeDriverRegistrar:       NodeDriverRegistrar,
	operandimages.EnvLivenessProbe:             LivenessProbe,
	operandimages.EnvLivenessProbeControlPlane: LivenessProbe,
	operandimages.EnvKubeRBACProxy:             KubeRBACProxy,
	operandimages.EnvKubeRBACProxyControlPlane: KubeRBACProxy,
}

// Env returns the operator's image environment variables (DRIVER_IMAGE, ...) set to the refs of
// the set's images. Variables whose image is not in the set are left out.
func (s Set) Env() map[string]string {
	out := map[string]string{}
	for env, name := range envImages {
		if b, ok := s[name]; ok {
			out[env] = b.Ref
		}
	}
	return out
}

// Names returns every image name Build knows, sorted.
func Names() []string {
	out := make([]string, 0, len(recipes))
	for n := range recipes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuildAll builds every image at the default versions from the binaries under binDir; see Build.
func BuildAll(ctx context.Context, binDir string) (Set, error) {
	return Build(ctx, binDir, DefaultVersions())
}

// Build writes the named images (all when none are named) as OCI layout tars under
// <binDir>/images/<name>/ and returns them. A tar is named after a hash of everything that goes
// into it (file contents, modes, links, run configuration), so it is rewritten only when an input
// changed; older tars of the same image are removed. The upstream binaries must exist (`make
// operand-binaries`); the stand-ins are compiled from this module's source first, which needs the
// go command.
func Build(ctx context.Context, binDir string, v Versions, names ...string) (Set, error) {
	if len(names) == 0 {
		names = Names()
	}
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return nil, fmt.Errorf("resolving bin dir: %w", err)
	}
	for _, n := range names {
		if _, ok := recipes[n]; !ok {
			return nil, fmt.Errorf("unknown image %q", n)
		}
	}
	if slices.Contains(names, NodeDriverRegistrar) || slices.Contains(names, LivenessProbe) {
		if err := buildStandins(ctx, binDir); err != nil {
			return nil, err
		}
	}
	var missing []string
	for _, n := range names {
		for _, p := range recipes[n].binaries(binDir, v) {
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, p)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing binaries (run `make operand-binaries`): %s", strings.Join(missing, ", "))
	}
	set := Set{}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := buildOne(binDir, n, v)
		if err != nil {
			return nil, err
		}
		set[n] = b
	}
	return set, nil
}

func buildOne(binDir, name string, v Versions) (Built, error) {
	r := recipes[name]
	ref := Prefix + name + ":" + r.tag(v)
	img, err := r.image(binDir, v)
	if err != nil {
		return Built{}, fmt.Errorf("assembling image %s: %w", ref, err)
	}
	img.Ref = ref
	key, err := inputHash(img)
	if err != nil {
		return Built{}, fmt.Errorf("hashing inputs of %s: %w", ref, err)
	}
	file := filepath.Join(binDir, "images", name, r.tag(v)+"-"+key[:16]+".tar")
	if err := writeOnce(file, img); err != nil {
		return Built{}, err
	}
	return Built{Ref: ref, Tar: file}, nil
}

// writeOnce writes img as the layout tar file unless it exists, and removes the other tars of
// file's directory: each image has a directory of its own, and a tar of earlier inputs is of no
// further use once a newer one exists (nothing refers to it).
func writeOnce(file string, img Image) error {
	if _, err := os.Stat(file); err != nil {
		if _, err := WriteLayout(file, img); err != nil {
			return err
		}
	}
	old, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "*.tar"))
	for _, o := range old {
		if o != file {
			_ = os.Remove(o)
		}
	}
	return nil
}

// inputHash hashes everything that decides the tar's content.
func inputHash(img Image) (string, error) {
	h := sha256.New()
	cfg, err := json.Marshal(struct {
		Ref    string
		Config Config
	}{img.Ref, img.Config})
	if err != nil {
		return "", err
	}
	h.Write(cfg)
	for _, e := range img.Rootfs.Entries() {
		fmt.Fprintf(h, "\x00%s\x00%d\x00%o\x00%s\x00", e.Path, e.Type, tarMode(e.Mode), e.Target)
		switch {
		case e.Type != File:
		case e.Source == "":
			h.Write(e.Data)
		default:
			if err := hashFile(h, e.Source); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(w io.Writer, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	fs := sha256.New()
	if _, err := io.Copy(fs, f); err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	_, err = w.Write(fs.Sum(nil))
	return err
}

// standinDir is where Build puts the stand-in binaries it compiles from this module.
func standinDir(binDir string) string { return filepath.Join(binDir, "standins") }

// standinPackages are the stand-ins' import paths, by image name.
var standinPackages = map[string]string{
	NodeDriverRegistrar: "github.com/cinder-csi-operator/cinder-csi-operator/e2e/cmd/csi-node-driver-registrar",
	LivenessProbe:       "github.com/cinder-csi-operator/cinder-csi-operator/e2e/cmd/csi-livenessprobe",
}

// buildStandins compiles the stand-ins (static, like the upstream images' binaries). The Go
// build cache makes this a no-op-like second or two when nothing changed.
func buildStandins(ctx context.Context, binDir string) error {
	dir := standinDir(binDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("building stand-ins: %w", err)
	}
	module, err := harnessModule()
	if err != nil {
		return fmt.Errorf("building stand-ins: %w", err)
	}
	for name, pkg := range standinPackages {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, name), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Dir = module
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building stand-in %s: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// harnessModule returns the harness module's directory (e2e/ of the repository found above the
// working directory), where the stand-ins' packages build. Not from this source file's path:
// the harness's commands are built with -trimpath, which drops it.
func harnessModule() (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "e2e"), nil
}

// recipe says how one image is made.
type recipe struct {
	tag func(Versions) string
	// binaries lists the built files the image needs, so that Build can say at once which are
	// missing.
	binaries func(binDir string, v Versions) []string
	image    func(binDir string, v Versions) (Image, error)
}

// defaultPath is the PATH of images with host tools, Debian's default.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// toolDirs are where host tools are looked up, in order.
var toolDirs = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// driverTools are the host programs the node service runs (k8s.io/mount-utils' format-and-mount,
// resize and device checks; cinder-csi-plugin's findmnt, blkid and blockdev calls) plus a shell
// for fsck.xfs, which is a script. udevadm is optional upstream too: cinder-csi-plugin only logs
// its absence.
var (
	driverTools = []string{
		"sh", "mount", "umount", "blkid", "blockdev", "findmnt",
		"mke2fs", "mkfs.ext4", "e2fsck", "resize2fs", "dumpe2fs",
		"mkfs.xfs", "xfs_growfs", "xfs_repair", "xfs_io", "fsck",
	}
	driverOptionalTools = []string{"mkfs.ext3", "mkfs.ext2", "fsck.ext4", "fsck.ext3", "fsck.xfs", "udevadm"}
	driverFiles         = []string{"/etc/mke2fs.conf"}

	toolboxTools = []string{
		"sh", "cat", "echo", "sleep", "dd", "sync", "md5sum", "sha256sum", "ls", "stat", "df",
		"mkdir", "rm", "touch", "true", "false", "test", "head", "tail", "wc", "cp", "mv",
	}
)

// caBundle is Debian's CA bundle; upstream images carry one too.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// lookTool finds a host tool by name in toolDirs.
func lookTool(name string) (string, error) {
	for _, d := range toolDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("host tool %s not found in %s (install it: e2e/hack/host-packages.sh)", name, strings.Join(toolDirs, ":"))
}

// mergedUsrLinks are the top-level directories that Debian 12 (merged /usr) has as links into
// /usr. Tools are looked up under /usr, so these links would not be copied on the way; they are
// mirrored first so that /bin/sh and /sbin/mkfs.xfs resolve in the image as on the host.
var mergedUsrLinks = []string{"/bin", "/sbin", "/lib", "/lib64"}

// addTools copies host tools with their libraries; optional ones are skipped when missing.
func addTools(r *Rootfs, required, optional []string) error {
	for _, l := range mergedUsrLinks {
		if fi, err := os.Lstat(l); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(l)
			if err != nil {
				return fmt.Errorf("reading host link %s: %w", l, err)
			}
			r.Symlink(l, target)
		}
	}
	for _, t := range required {
		p, err := lookTool(t)
		if err != nil {
			return err
		}
		if err := r.Host(p); err != nil {
			return err
		}
	}
	for _, t := range optional {
		p, err := lookTool(t)
		if err != nil {
			continue
		}
		if err := r.Host(p); err != nil {
			return err
		}
	}
	return nil
}

// baseDirs adds what a container expects of its root file system besides the runtime's mounts:
// a world-writable /tmp (cinder-csi-plugin mounts the config drive under os.TempDir()) and the
// CA bundle when the host has one.
func baseDirs(r *Rootfs) error {
	r.Dir("/tmp", 0o777|fs.ModeSticky)
	r.Dir("/etc", 0o755)
	if _, err := os.Stat(caBundle); err == nil {
		if err := r.Host(caBundle); err != nil {
			return err
		}
	}
	return nil
}

// staticImage is the shape of the upstream kubernetes-csi images: one static binary at the root
// (or at path), run as the entrypoint, on an otherwise almost empty file system.
func staticImage(path, bin string, extra func(*Rootfs) error) (Image, error) {
	r := NewRootfs()
	if extra != nil {
		if err := extra(r); err != nil {
			return Image{}, err
		}
	}
	if err := baseDirs(r); err != nil {
		return Image{}, err
	}
	r.File(path, bin, 0o755)
	return Image{Rootfs: r, Config: Config{Entrypoint: []string{path}, Env: []string{defaultPath}}}, nil
}

// sidecar is a recipe for a kubernetes-csi sidecar binary named name, built at version ver.
func sidecar(name string, ver func(Versions) string) recipe {
	return recipe{
		tag:      ver,
		binaries: func(b string, v Versions) []string { return []string{BinaryPath(b, name, ver(v))} },
		image: func(b string, v Versions) (Image, error) {
			return staticImage("/"+name, BinaryPath(b, name, ver(v)), nil)
		},
	}
}

var recipes = map[string]recipe{
	// The driver image follows upstream's: Debian tools and their libraries, the plugin at
	// /bin/cinder-csi-plugin, and no entrypoint (the operator's manifests name the binary as the
	// first argument).
	Driver: {
		tag: func(v Versions) string { return v.CinderCSIPlugin },
		binaries: func(b string, v Versions) []string {
			return []string{BinaryPath(b, Driver, v.CinderCSIPlugin)}
		},
		image: func(b string, v Versions) (Image, error) {
			r := NewRootfs()
			// Host tools first: they bring the host's /bin -> usr/bin style links, which the
			// plugin's own path then follows.
			if err := addTools(r, driverTools, driverOptionalTools); err != nil {
				return Image{}, err
			}
			if err := r.Host(driverFiles...); err != nil {
				return Image{}, err
			}
			if err := baseDirs(r); err != nil {
				return Image{}, err
			}
			// As on Debian: e2fsck (run by fsck -a before mounting) looks at /etc/mtab to tell
			// whether the device is mounted and complains without it.
			r.Symlink("/etc/mtab", "../proc/self/mounts")
			r.File("/bin/cinder-csi-plugin", BinaryPath(b, Driver, v.CinderCSIPlugin), 0o755)
			return Image{Rootfs: r, Config: Config{Cmd: []string{"/bin/cinder-csi-plugin"}, Env: []string{defaultPath}}}, nil
		},
	},
	Provisioner:        sidecar(Provisioner, func(v Versions) string { return v.Provisioner }),
	Attacher:           sidecar(Attacher, func(v Versions) string { return v.Attacher }),
	Resizer:            sidecar(Resizer, func(v Versions) string { return v.Resizer }),
	Snapshotter:        sidecar(Snapshotter, func(v Versions) string { return v.Snapshotter }),
	SnapshotController: sidecar(SnapshotController, func(v Versions) string { return v.Snapshotter }),
	KubeRBACProxy: {
		tag: func(v Versions) string { return v.KubeRBACProxy },
		binaries: func(b string, v Versions) []string {
			return []string{BinaryPath(b, KubeRBACProxy, v.KubeRBACProxy)}
		},
		image: func(b string, v Versions) (Image, error) {
			return staticImage("/usr/local/bin/kube-rbac-proxy", BinaryPath(b, KubeRBACProxy, v.KubeRBACProxy), nil)
		},
	},
	// The registrar stand-in also carries sh and rm: the operator's DaemonSet runs a preStop hook
	// `/bin/sh -c rm -rf <registration socket> <csi socket>` in this container.
	NodeDriverRegistrar: {
		tag: func(Versions) string { return StandinVersion },
		binaries: func(b string, _ Versions) []string {
			return []string{filepath.Join(standinDir(b), NodeDriverRegistrar)}
		},
		image: func(b string, _ Versions) (Image, error) {
			return staticImage("/csi-node-driver-registrar", filepath.Join(standinDir(b), NodeDriverRegistrar), func(r *Rootfs) error {
				return addTools(r, []string{"sh", "rm"}, nil)
			})
		},
	},
	LivenessProbe: {
		tag:      func(Versions) string { return StandinVersion },
		binaries: func(b string, _ Versions) []string { return []string{filepath.Join(standinDir(b), LivenessProbe)} },
		image: func(b string, _ Versions) (Image, error) {
			return staticImage("/livenessprobe", filepath.Join(standinDir(b), LivenessProbe), nil)
		},
	},
	// pause runs as upstream's does: /pause as the entrypoint, as nobody's uid 65535.
	Pause: {
		tag:      func(v Versions) string { return v.Kube },
		binaries: func(b string, v Versions) []string { return []string{BinaryPath(b, Pause, v.Kube)} },
		image: func(b string, v Versions) (Image, error) {
			r := NewRootfs()
			r.File("/pause", BinaryPath(b, Pause, v.Kube), 0o755)
			return Image{Rootfs: r, Config: Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{defaultPath}}}, nil
		},
	},
	// The toolbox is the test pods' image: a shell and coreutils to write, sync and checksum data
	// on mounted volumes.
	Toolbox: {
		tag:      func(Versions) string { return ToolboxVersion },
		binaries: func(string, Versions) []string { return nil },
		image: func(string, Versions) (Image, error) {
			r := NewRootfs()
			if err := addTools(r, toolboxTools, nil); err != nil {
				return Image{}, err
			}
			if err := baseDirs(r); err != nil {
				return Image{}, err
			}
			return Image{Rootfs: r, Config: Config{Cmd: []string{"/bin/sh"}, Env: []string{defaultPath}}}, nil
		},
	},
}

// Retagged returns the set's images under new references, each its tag with suffix appended,
// as a new release names the same or rebuilt images anew: a pod template that names them differs
// from one that names the set's, so its workload rolls out. The content is the same; each tar is
// written once, beside its image's, under <binDir>/images/<name>/<suffix>/.
func (s Set) Retagged(binDir, suffix string) (Set, error) {
	if suffix == "" || strings.ContainsAny(suffix, "/:") {
		return nil, fmt.Errorf("tag suffix %q: want a non-empty suffix with neither a slash nor a colon", suffix)
	}
	out := Set{}
	for name, b := range s {
		ref := b.Ref + suffix
		file := filepath.Join(binDir, "images", name, suffix, filepath.Base(b.Tar))
		if _, err := os.Stat(file); err != nil {
			if err := retagLayout(b.Tar, file, ref); err != nil {
				return nil, fmt.Errorf("retagging %s as %s: %w", b.Ref, ref, err)
			}
		}
		// Tars of earlier contents go, as writeOnce removes them beside the image's own.
		old, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "*.tar"))
		for _, o := range old {
			if o != file {
				_ = os.Remove(o)
			}
		}
		out[name] = Built{Ref: ref, Tar: file}
	}
	return out, nil
}
