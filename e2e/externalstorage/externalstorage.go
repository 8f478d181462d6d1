// Package externalstorage runs the upstream Kubernetes external-storage suite (the e2e.test
// binary of k8s.io/kubernetes, built by `make external-storage-suite`) against the
// operator-installed Cinder CSI driver in a real-node environment (package env) and summarises
// its JUnit report: the suite's driver definitions (testdriver.yaml on the fake OpenStack,
// testdriver-realcloud.yaml on the real one), its image registries redirected to the local image
// prefix, and the images its pods run, built here and imported into the nodes, since nothing is
// ever pulled.
//
// The suite's test pods run three images. busybox is Debian's busybox-static, a real busybox,
// tagged with the suite's busybox reference (the suite's tag names a slightly newer busybox
// release; its pods use only the common applets). agnhost is upstream's agnhost program compiled
// from the same k8s.io/kubernetes release as e2e.test (test/images/agnhost, whose VERSION is the
// suite's agnhost tag), with busybox's applets beside it as the upstream image has a shell.
// glibc-dns-testing is, as upstream's, a Debian system with dnsutils: the host's Debian bash,
// coreutils, grep, sed, findutils, util-linux and bind9-dnsutils with their glibc libraries (the
// multiVolume tests run their concurrent-access pods on it, and ask blockdev for a block volume's
// sector size). Upstream's image also carries a coredns binary, which no
// storage test runs; it is left out.
package externalstorage

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
)

// TestDriver is the suite's driver definition for the operator-installed driver on the fake
// OpenStack (the -storage.testdriver file).
//
//go:embed testdriver.yaml
var TestDriver []byte

// RealCloudTestDriver is the driver definition for the same driver on the real OpenStack
// (package realcloud): the capabilities its Cinder NFS backend and Nova's fake virt driver
// really have, fewer than the fake's.
//
//go:embed testdriver-realcloud.yaml
var RealCloudTestDriver []byte

// Registry replaces every image registry of the suite: its images exist only in the nodes'
// containerd, under the local prefix.
const Registry = "localhost/cinder-csi-e2e"

// HostBusybox is Debian's statically linked busybox (package busybox-static), the content of
// the busybox and agnhost images.
const HostBusybox = "/bin/busybox"

// HostPackages are the Debian packages the images are made from.
var HostPackages = []string{"busybox-static", "bind9-dnsutils"}

// glibcPackages are the Debian packages whose programs make up glibc-dns-testing.
var glibcPackages = []string{"bash", "dash", "coreutils", "grep", "sed", "findutils", "util-linux", "bind9-dnsutils"}

// Image names in the suite's references (the last path element).
const (
	BusyBox         = "busybox"
	Agnhost         = "agnhost"
	GlibcDNSTesting = "glibc-dns-testing"
)

// registryKeys are the fields of the suite's registry list (test/utils/image RegistryList).
var registryKeys = []string{
	"promoterE2eRegistry", "buildImageRegistry", "invalidRegistry", "gcEtcdRegistry", "gcRegistry",
	"sigStorageRegistry", "privateRegistry", "dockerLibraryRegistry", "cloudProviderGcpRegistry",
}

// WriteRepoList writes the suite's registry list (its -kube-test-repo-list file) with every
// registry replaced by Registry, so that each image the suite names is a local reference.
func WriteRepoList(file string) error {
	var b strings.Builder
	for _, k := range registryKeys {
		fmt.Fprintf(&b, "%s: %s\n", k, Registry)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the suite's registry list: %w", err)
	}
	return nil
}

// SuiteImages asks e2e.test for the images it uses under the registry list repoList
// (-list-images) and returns the references of the images built here, by name. The references
// (and so the tags) come from the suite itself, not from this package. The suite also names
// older agnhost releases; the reference kept is the one tagged with the version the agnhost
// binary reports (`agnhost --version`), the one built with e2e.test.
func SuiteImages(ctx context.Context, e2eTest, repoList, agnhostBinary string) (map[string]string, error) {
	version, err := exec.CommandContext(ctx, agnhostBinary, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", agnhostBinary, err)
	}
	agnhostTag := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(version)), "app version"))
	cmd := exec.CommandContext(ctx, e2eTest, "-list-images", "-kube-test-repo-list="+repoList)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -list-images: %w: %s", e2eTest, err, stderr.String())
	}
	refs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		ref := strings.TrimSpace(sc.Text())
		repo, tag, ok := strings.Cut(strings.TrimPrefix(ref, Registry+"/"), ":")
		if !ok || !strings.HasPrefix(ref, Registry+"/") {
			continue
		}
		switch {
		case repo == BusyBox, repo == GlibcDNSTesting, repo == Agnhost && tag == agnhostTag:
			refs[repo] = ref
		}
	}
	for _, n := range []string{BusyBox, Agnhost, GlibcDNSTesting} {
		if refs[n] == "" {
			return nil, fmt.Errorf("%s -list-images names no %s image under %s (agnhost %s)", e2eTest, n, Registry, agnhostTag)
		}
	}
	return refs, nil
}

// BuildImages writes the busybox, agnhost and glibc-dns-testing images under the references refs (from
// SuiteImages) as OCI layout tars into dir and returns their paths. agnhostBinary is the agnhost
// program built with e2e.test.
func BuildImages(dir string, refs map[string]string, agnhostBinary string) ([]string, error) {
	applets, err := busyboxApplets()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	busybox := baseRootfs(applets)
	agnhost := baseRootfs(applets)
	agnhost.File("/agnhost", agnhostBinary, 0o755)
	glibc, err := glibcRootfs()
	if err != nil {
		return nil, err
	}
	specs := []struct {
		name string
		fs   *imagetars.Rootfs
		cfg  imagetars.Config
	}{
		// As upstream's images: busybox runs sh, agnhost its pause command unless told otherwise.
		{BusyBox, busybox, imagetars.Config{Cmd: []string{"sh"}, Env: []string{pathEnv}}},
		{Agnhost, agnhost, imagetars.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{pathEnv}}},
		// Upstream's is a Debian image with no command of its own: bash, as Debian's base.
		{GlibcDNSTesting, glibc, imagetars.Config{Cmd: []string{"bash"}, Env: []string{pathEnv}}},
	}
	var tars []string
	for _, s := range specs {
		ref := refs[s.name]
		if ref == "" {
			return nil, fmt.Errorf("no reference for image %s", s.name)
		}
		tar := filepath.Join(dir, s.name+".tar")
		if _, err := imagetars.WriteLayout(tar, imagetars.Image{Ref: ref, Config: s.cfg, Rootfs: s.fs}); err != nil {
			return nil, fmt.Errorf("writing image %s: %w", ref, err)
		}
		tars = append(tars, tar)
	}
	return tars, nil
}

const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// baseRootfs is busybox in /bin with a link per applet, and the few files the suite's commands
// expect of an image (users for id and ls, a world-writable /tmp).
func baseRootfs(applets []string) *imagetars.Rootfs {
	r := imagetars.NewRootfs()
	r.File("/bin/busybox", HostBusybox, 0o755)
	for _, a := range applets {
		if a == "bin/busybox" {
			continue
		}
		r.Symlink("/"+a, "/bin/busybox")
	}
	r.Data("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"), 0o644)
	r.Data("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	r.Dir("/tmp", 0o777|os.ModeSticky)
	r.Dir("/root", 0o700)
	for _, d := range []string{"/proc", "/sys", "/dev", "/etc", "/var"} {
		r.Dir(d, 0o755)
	}
	return r
}

// glibcRootfs is the programs of glibcPackages as the host's Debian installed them, each with the
// libraries and loader it links, and sh as Debian's dash.
func glibcRootfs() (*imagetars.Rootfs, error) {
	out, err := exec.Command("dpkg", append([]string{"-L"}, glibcPackages...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("listing the files of %s: %w (install them: make test-external-storage does)", strings.Join(glibcPackages, " "), err)
	}
	var programs []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.Contains(p, "/bin/") && !strings.Contains(p, "/sbin/") {
			continue
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			programs = append(programs, p)
		}
	}
	r := imagetars.NewRootfs()
	if err := r.Host(programs...); err != nil {
		return nil, fmt.Errorf("copying %s: %w", strings.Join(glibcPackages, " "), err)
	}
	r.Symlink("/bin/sh", "/bin/dash")
	r.Data("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"), 0o644)
	r.Data("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	r.Dir("/tmp", 0o777|os.ModeSticky)
	r.Dir("/root", 0o700)
	for _, d := range []string{"/proc", "/sys", "/dev", "/var"} {
		r.Dir(d, 0o755)
	}
	return r, nil
}

// busyboxApplets lists the host busybox's applets with their install paths (bin/sh, usr/bin/md5sum,
// ...).
func busyboxApplets() ([]string, error) {
	out, err := exec.Command(HostBusybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w (install Debian's %s)", HostBusybox, err, strings.Join(HostPackages, " "))
	}
	return strings.Fields(string(out)), nil
}
