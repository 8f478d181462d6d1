package install_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/tlscheck"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// cso is cluster-storage-operator's testdata directory, seen from this package's directory.
var cso = filepath.Join("..", "..", "cmd", "cinder-csi-operator", "testdata", "cso")

// TestCSORBAC runs the operator as a cluster that replaced csi-operator by an image swap runs it:
// the command line of cluster-storage-operator's Deployment (`start`, its configuration file, and
// on HyperShift the guest's admin kubeconfig), authenticated with a token of csi-operator's
// ServiceAccount, which only cluster-storage-operator's RBAC (the fixtures *-rbac.yaml) binds.
// The driver must reach Available with every object applied. The API server's audit log must show
// no denied request but the one patch per kind that switches CSIDriver, StorageClass and
// VolumeSnapshotClass to create and update. The modes run one after the other: start's probe
// address is fixed.
func TestCSORBAC(t *testing.T) {
	t.Parallel()
	binary := env.BuildOperatorForTest(t)
	for _, mode := range []string{env.ModeStandalone, env.ModeHyperShift} {
		t.Run("When started by cluster-storage-operator's Deployment in "+mode+" mode under its RBAC, it should install the driver to Available", func(t *testing.T) {
			runUnderCSORBAC(t, binary, mode)
		})
	}
}

func runUnderCSORBAC(t *testing.T, binary, mode string) {
	e := env.StartForTest(t, env.Options{Mode: mode, Audit: true})
	ctx := context.Background()
	g := NewWithT(t)
	fixture, deployment := "standalone-rbac.yaml", install.CSOStandaloneDeployment
	if mode == env.ModeHyperShift {
		fixture, deployment = "hypershift-rbac.yaml", install.CSOHyperShiftDeployment
	}
	docs := readDocs(t, filepath.Join(cso, fixture), strings.NewReplacer(install.PlaceholderNamespace, e.Namespace))
	id := serviceAccount(e.Namespace, names.OperatorName)
	createAll(t, e.MgmtClient, docs)
	waitRulesInEffect(t, e.MgmtClient, docs, id)

	cs, err := kubernetes.NewForConfig(e.MgmtConfig())
	g.Expect(err).NotTo(HaveOccurred())
	token, err := tlscheck.ServiceAccountToken(ctx, cs, e.Namespace, names.OperatorName, false)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := tokenKubeconfig(t, e.Mgmt.KubeconfigPath(), token)

	dep, err := install.ReadDeployment(filepath.Join("..", "..", filepath.FromSlash(deployment)))
	g.Expect(err).NotTo(HaveOccurred())
	c := dep.Spec.Template.Spec.Containers[0]
	config, err := filepath.Abs(filepath.Join(cso, "operator-config.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	// The Deployment's arguments, with its mounts' paths replaced by local files; then what a
	// pod has without flags (in-cluster config, the ServiceAccount's namespace) as flags, and a
	// free metrics port.
	var args []string
	for _, a := range c.Args {
		a = strings.NewReplacer("/var/run/configmaps/config/config.yaml", config,
			"/etc/guest-kubeconfig/kubeconfig", e.Guest.KubeconfigPath()).Replace(a)
		args = append(args, a)
	}
	listen, err := env.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	args = append(args, "--kubeconfig="+kubeconfig, "--namespace="+e.Namespace, "--listen="+listen)
	environ := []string{"PATH=" + os.Getenv("PATH"), "POD_NAME=operator-cso-rbac"}
	for _, ev := range c.Env {
		if img, ok := env.LocalImages[ev.Name]; ok {
			environ = append(environ, ev.Name+"="+img)
		} else if strings.HasSuffix(ev.Name, "_CONTROL_PLANE_IMAGE") {
			environ = append(environ, ev.Name+"="+env.LocalImages[strings.Replace(ev.Name, "_CONTROL_PLANE", "", 1)])
		} else if ev.Value != "" {
			environ = append(environ, ev.Name+"="+ev.Value)
		}
	}
	logPath := filepath.Join(t.TempDir(), "operator.log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := procs.Start(procs.Options{Name: "start", Path: binary, Args: args, Env: environ, Output: logFile})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("The operator's log ended with:\n%s", procs.LogTail(logPath, 200))
		}
	})

	waitAvailable(t, e)
	if mode == env.ModeHyperShift {
		expectExist(t, e.MgmtClient, hyperShiftControllerObjects(e.Namespace))
		expectExist(t, e.GuestClient, append(guestObjects(t, true), snapshotClass()))
	} else {
		expectExist(t, e.MgmtClient, append(standaloneControllerObjects(), guestObjects(t, false)...))
		expectExist(t, e.GuestClient, []client.Object{snapshotClass()})
	}
	user := id.UserName
	// On HyperShift the guest is reached with its admin kubeconfig, as cluster-storage-operator
	// mounts it: only the management cluster's requests are the ServiceAccount's.
	for _, c := range []*localcluster.Cluster{e.Mgmt} {
		events, err := localcluster.ReadAuditLog(c.AuditLogPath())
		g.Expect(err).NotTo(HaveOccurred())
		var denied []string
		fallbacks := map[string]int{}
		requests := 0
		for _, ev := range events {
			if ev.User.Username != user {
				continue
			}
			requests++
			if ev.ResponseStatus.Code != 403 {
				continue
			}
			if ev.Verb == "patch" && (ev.ObjectRef.Resource == "csidrivers" || ev.ObjectRef.Resource == "storageclasses" || ev.ObjectRef.Resource == "volumesnapshotclasses") {
				fallbacks[ev.ObjectRef.Resource]++
				continue
			}
			denied = append(denied, ev.String())
		}
		g.Expect(requests).To(BeNumerically(">", 0), "requests of the operator on %s", c.Name())
		g.Expect(denied).To(BeEmpty(), "requests of the operator that cluster-storage-operator's RBAC denied on %s", c.Name())
		// Standalone, the three kinds are applied to this cluster under the RBAC without patch:
		// each is refused once, then written with create and update. On HyperShift they go to the
		// guest, with its admin kubeconfig.
		want := map[string]int{}
		if mode == env.ModeStandalone {
			want = map[string]int{"csidrivers": 1, "storageclasses": 1, "volumesnapshotclasses": 1}
		}
		g.Expect(fallbacks).To(Equal(want), "forbidden patches per kind: the fallback is taken once per kind")
	}
}

// readDocs reads a YAML file of objects like readManifest, from any path.
func readDocs(t *testing.T, path string, replace *strings.Replacer) []doc {
	t.Helper()
	rel, err := filepath.Rel(installDir, path)
	if err != nil {
		t.Fatal(err)
	}
	return readManifest(t, filepath.ToSlash(rel), replace)
}

// tokenKubeconfig writes a kubeconfig for the cluster of the admin kubeconfig at path that
// authenticates with token only.
func tokenKubeconfig(t *testing.T, path, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"sa": {Token: token}}
	for _, ctx := range cfg.Contexts {
		ctx.AuthInfo = "sa"
	}
	out := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}
