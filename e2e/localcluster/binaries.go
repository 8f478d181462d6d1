package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrBinariesMissing is wrapped by Start's error when an upstream binary cannot be found, so that
// callers (StartForTest in particular) can tell "not built on this machine" from a real failure.
var ErrBinariesMissing = errors.New("upstream binaries missing")

// Environment variables naming the directories that hold the upstream binaries. The Makefile
// exports them; without them the newest matching directory under <module root>/bin is used.
const (
	// KubeBinDirEnv names the directory holding kube-apiserver, kube-controller-manager and
	// kube-scheduler.
	KubeBinDirEnv = "KUBE_BIN_DIR"
	// EtcdBinDirEnv names the directory holding etcd.
	EtcdBinDirEnv = "ETCD_BIN_DIR"
	// KwokBinDirEnv names the directory holding kwok and the stages.yaml it needs.
	KwokBinDirEnv = "KWOK_BIN_DIR"
)

// buildHint tells a person how to get the binaries; it is part of every "missing" error.
const buildHint = "build them with `make upstream` (which runs e2e/hack/build-upstream.sh " +
	"kube|etcd|kwok <version> bin/<component>-<version>) or point %s at a directory that has them"

// binaries holds absolute paths of the executables and files a cluster runs.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kwok, kwokStages string
}

// findBinaries locates the binaries a cluster needs. A control-plane-only cluster does not need
// the controller-manager, scheduler or kwok, and one without fake nodes does not need kwok, so
// their absence is not an error then.
func findBinaries(controlPlaneOnly, kwok bool) (binaries, error) {
	var b binaries
	etcdDir, err := binDir(EtcdBinDirEnv, "etcd-v", "etcd")
	if err != nil {
		return b, err
	}
	kubeNames := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	if controlPlaneOnly {
		kubeNames = kubeNames[:1]
	}
	kubeDir, err := binDir(KubeBinDirEnv, "kube-v", kubeNames...)
	if err != nil {
		return b, err
	}
	b.etcd = filepath.Join(etcdDir, "etcd")
	b.apiserver = filepath.Join(kubeDir, "kube-apiserver")
	if controlPlaneOnly {
		return b, nil
	}
	b.controllerManager = filepath.Join(kubeDir, "kube-controller-manager")
	b.scheduler = filepath.Join(kubeDir, "kube-scheduler")
	if !kwok {
		return b, nil
	}
	kwokDir, err := binDir(KwokBinDirEnv, "kwok-v", "kwok", "stages.yaml")
	if err != nil {
		return b, err
	}
	b.kwok = filepath.Join(kwokDir, "kwok")
	b.kwokStages = filepath.Join(kwokDir, "stages.yaml")
	return b, nil
}

// binDir returns the directory named by env, or else the newest <module root>/bin/<prefix>*
// directory, after checking that it holds every one of files.
func binDir(env, prefix string, files ...string) (string, error) {
	dir := os.Getenv(env)
	source := "$" + env
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %s is unset and %w; "+buildHint, ErrBinariesMissing, env, err, env)
		}
		matches, _ := filepath.Glob(filepath.Join(root, "bin", prefix+"*"))
		if len(matches) == 0 {
			return "", fmt.Errorf("%w: %s is unset and there is no %s directory; "+buildHint,
				ErrBinariesMissing, env, filepath.Join(root, "bin", prefix+"<version>"), env)
		}
		// Several versions may be side by side after a version bump; the newest one is the one
		// the Makefile builds now.
		slices.SortFunc(matches, func(a, b string) int {
			return compareVersions(strings.TrimPrefix(filepath.Base(a), prefix),
				strings.TrimPrefix(filepath.Base(b), prefix))
		})
		dir = matches[len(matches)-1]
		source = "the newest " + filepath.Join(root, "bin", prefix+"*")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	for _, f := range files {
		info, err := os.Stat(filepath.Join(abs, f))
		if err != nil || info.IsDir() {
			return "", fmt.Errorf("%w: %s not found in %s (%s); "+buildHint, ErrBinariesMissing, f, abs, source, env)
		}
	}
	return abs, nil
}

// compareVersions orders dotted numeric versions ("1.36.3" after "1.9.0"); non-numeric parts
// compare as strings so that odd directory names still sort deterministically.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		an, aerr := strconv.Atoi(as[i])
		bn, berr := strconv.Atoi(bs[i])
		switch {
		case aerr == nil && berr == nil && an != bn:
			return an - bn
		case (aerr != nil || berr != nil) && as[i] != bs[i]:
			return strings.Compare(as[i], bs[i])
		}
	}
	return len(as) - len(bs)
}

// productModule is the product's module path; the harness is a module of its own inside it.
const productModule = "github.com/cinder-csi-operator/cinder-csi-operator"

// RepoRoot returns the repository's root: the nearest directory at or above the working
// directory whose go.mod declares the product's module (the harness's own go.mod, under e2e/,
// is passed by). Tests run in their package directory and people run the commands from anywhere
// inside the repository, so walking up is what finds bin/, the manifests and testdata in both
// cases.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfileDeclares(b, productModule) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s found at or above the working directory", productModule)
		}
		dir = parent
	}
}

// modfileDeclares reports whether a go.mod's module directive names module.
func modfileDeclares(gomod []byte, module string) bool {
	for line := range strings.Lines(string(gomod)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == module
		}
	}
	return false
}
