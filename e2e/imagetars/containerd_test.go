package imagetars

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// TestContainerdImport imports a pause image tar into a throwaway containerd, the way real-node
// runs do, and lists it. It needs root and Debian's containerd and ctr; the containerd is private
// (own root, state, socket and opt dirs in the test's temporary directory, no CRI plugin) and is
// stopped, and its directories removed, when the test ends.
func TestContainerdImport(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	ctr, err1 := exec.LookPath("ctr")
	containerd, err2 := exec.LookPath("containerd")
	if err1 != nil || err2 != nil {
		t.Skip("containerd or ctr not installed")
	}

	// A real pause binary when one was built, otherwise any content: import does not run it.
	bin := t.TempDir()
	v := DefaultVersions()
	pause := BinaryPath(bin, Pause, v.Kube)
	content := []byte("not a real pause binary")
	if built, err := os.ReadFile(BinaryPath("../../bin", Pause, v.Kube)); err == nil {
		content = built
	}
	if err := os.MkdirAll(filepath.Dir(pause), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pause, content, 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := Build(context.Background(), bin, v, Pause)
	if err != nil {
		t.Fatal(err)
	}

	// The socket path must stay short (unix sockets allow ~108 bytes), so it lives in its own
	// short temporary directory rather than deep under t.TempDir().
	dir, err := os.MkdirTemp("", "ccsi-ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "c.sock")
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc", filepath.Join(dir, "opt"))), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its own process group, so that nothing it might spawn outlives the test.
	p, err := procs.Start(procs.Options{Name: "containerd", Path: containerd, Args: []string{"--config", config}, LogDir: dir, Group: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			if log, err := os.ReadFile(p.LogPath()); err == nil {
				t.Logf("containerd log:\n%s", log)
			}
		}
		// Unpacking may leave snapshot mounts only while containerd runs; unmount anything
		// still under the dir before removing it.
		if mounts, err := os.ReadFile("/proc/self/mounts"); err == nil {
			for _, line := range strings.Split(string(mounts), "\n") {
				if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
					_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
				}
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})

	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, ctr, append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := run("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("containerd did not start within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	if out, err := run("images", "import", set[Pause].Tar); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	out, err := run("images", "ls", "-q")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, out)
	}
	if !strings.Contains(out, set[Pause].Ref) {
		t.Errorf("imported image %s not listed:\n%s", set[Pause].Ref, out)
	}
	if out, err := run("images", "check"); err != nil || !strings.Contains(out, "complete") {
		t.Errorf("ctr images check: %v\n%s", err, out)
	}
}
