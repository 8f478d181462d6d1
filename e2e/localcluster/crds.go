package localcluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Modules and in-module paths of the CRDs the operator's clusters need. The YAML comes from the
// same module versions the operator compiles against, so schema and Go types cannot drift apart.
const (
	openshiftAPIModule    = "github.com/openshift/api"
	hypershiftAPIModule   = "github.com/openshift/hypershift/api"
	snapshotClientModule  = "github.com/kubernetes-csi/external-snapshotter/client/v8"
	clusterCSIDriverCRD   = "operator/v1/zz_generated.crd-manifests/0000_50_csi-driver_01_clustercsidrivers-Default.crd.yaml"
	infrastructureCRD     = "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml"
	proxyCRD              = "config/v1/zz_generated.crd-manifests/0000_03_config-operator_01_proxies.crd.yaml"
	apiServerCRD          = "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_apiservers-Default.crd.yaml"
	volumeSnapshotClassCR = "config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml"
	volumeSnapshotCRD     = "config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml"
	volumeSnapshotContCRD = "config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml"
	// hostedControlPlaneCRD is the OpenStack feature-gated variant: only it has
	// spec.platform.openstack, which the operator reads.
	hostedControlPlaneCRD = "hypershift/v1beta1/zz_generated.featuregated-crd-manifests/hostedcontrolplanes.hypershift.openshift.io/OpenStack.yaml"
	// The monitoring stack's CRDs are relative to the module root; see the files for why they
	// are hand-written.
	serviceMonitorCRD = "e2e/localcluster/testdata/servicemonitor-crd.yaml"
	prometheusRuleCRD = "e2e/localcluster/testdata/prometheusrule-crd.yaml"
)

// ManagementCRDs returns the CRD files a HyperShift management cluster needs for the operator:
// HostedControlPlane, ServiceMonitor and PrometheusRule.
func ManagementCRDs() ([]string, error) {
	return crdPaths([][2]string{
		{hypershiftAPIModule, hostedControlPlaneCRD},
		{"", serviceMonitorCRD},
		{"", prometheusRuleCRD},
	})
}

// GuestCRDs returns the CRD files a guest (or standalone OpenShift) cluster needs for the
// operator: ClusterCSIDriver, Infrastructure, Proxy, APIServer (the TLS security profile),
// VolumeSnapshotClass, ServiceMonitor and PrometheusRule.
func GuestCRDs() ([]string, error) {
	return crdPaths([][2]string{
		{openshiftAPIModule, clusterCSIDriverCRD},
		{openshiftAPIModule, infrastructureCRD},
		{openshiftAPIModule, proxyCRD},
		{openshiftAPIModule, apiServerCRD},
		{snapshotClientModule, volumeSnapshotClassCR},
		{"", serviceMonitorCRD},
		{"", prometheusRuleCRD},
	})
}

// IsSnapshotClassCRD reports whether path, one of GuestCRDs, is the VolumeSnapshotClass CRD.
func IsSnapshotClassCRD(path string) bool {
	return filepath.Base(path) == filepath.Base(volumeSnapshotClassCR)
}

// SnapshotCRDs returns the CRD files of VolumeSnapshot and VolumeSnapshotContent, which an
// OpenShift cluster always serves (its snapshot controller needs them) and which a cluster that
// takes real snapshots needs besides GuestCRDs.
func SnapshotCRDs() ([]string, error) {
	return crdPaths([][2]string{
		{snapshotClientModule, volumeSnapshotCRD},
		{snapshotClientModule, volumeSnapshotContCRD},
	})
}

// crdPaths resolves {module, path} pairs to files, checking each exists. An empty module means
// the repository.
func crdPaths(refs [][2]string) ([]string, error) {
	var paths []string
	for _, ref := range refs {
		dir, err := moduleDir(ref[0])
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, filepath.FromSlash(ref[1]))
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("CRD file of %s: %w", ref[0], err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// moduleDirs caches module directories; `go list` takes a noticeable fraction of a second.
var (
	moduleDirsMu sync.Mutex
	moduleDirs   = map[string]string{}
)

// moduleDir returns the directory of a module in the module cache. Asking the go command, rather
// than guessing a cache path, yields exactly the version go.mod selects and honours GOMODCACHE
// and replace directives. An empty module is the repository's root; the others are resolved in the
// product's module, whose versions the operator compiles against.
func moduleDir(module string) (string, error) {
	if module == "" {
		return RepoRoot()
	}
	moduleDirsMu.Lock()
	defer moduleDirsMu.Unlock()
	if dir, ok := moduleDirs[module]; ok {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := goCommand(root, "list", "-m", "-f", "{{.Dir}}", module)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if dir == "" {
		// go list leaves Dir empty for a module that is required but not downloaded yet.
		out, err := goCommand(root, "mod", "download", "-json", module)
		if err != nil {
			return "", err
		}
		var info struct{ Dir string }
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			return "", fmt.Errorf("decoding go mod download output for %s: %w", module, err)
		}
		dir = info.Dir
	}
	if dir == "" {
		return "", fmt.Errorf("go command reports no directory for module %s", module)
	}
	moduleDirs[module] = dir
	return dir, nil
}

// goCommand runs the go command in dir and returns its standard output.
func goCommand(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
