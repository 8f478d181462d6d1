package imagetars

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// layout is an image-layout tar read back and checked: every blob's digest and size match its
// descriptor.
type layout struct {
	index    Index
	manifest Manifest
	config   ImageConfig
	// files maps layer paths (no leading slash) to their tar headers.
	files map[string]*tar.Header
	// contents holds the layer's regular file contents.
	contents map[string][]byte
}

// readLayout parses an OCI layout tar: index -> manifest -> config -> layer, verifying digests
// and sizes on the way as an importer would.
func readLayout(t *testing.T, file string) layout {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[hdr.Name] = data
	}
	if got := string(entries["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", got)
	}
	blob := func(d Descriptor) []byte {
		t.Helper()
		data, ok := entries[blobPath(d.Digest)]
		if !ok {
			t.Fatalf("blob %s missing", d.Digest)
		}
		sum := sha256.Sum256(data)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest {
			t.Fatalf("blob %s has digest %s", d.Digest, got)
		}
		if int64(len(data)) != d.Size {
			t.Fatalf("blob %s has size %d, descriptor says %d", d.Digest, len(data), d.Size)
		}
		return data
	}
	var l layout
	if err := json.Unmarshal(entries["index.json"], &l.index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if l.index.SchemaVersion != 2 || len(l.index.Manifests) != 1 {
		t.Fatalf("index = %+v", l.index)
	}
	md := l.index.Manifests[0]
	if md.MediaType != MediaTypeManifest {
		t.Fatalf("manifest media type %s", md.MediaType)
	}
	if err := json.Unmarshal(blob(md), &l.manifest); err != nil {
		t.Fatal(err)
	}
	if l.manifest.Config.MediaType != MediaTypeConfig || len(l.manifest.Layers) != 1 || l.manifest.Layers[0].MediaType != MediaTypeLayer {
		t.Fatalf("manifest = %+v", l.manifest)
	}
	if err := json.Unmarshal(blob(l.manifest.Config), &l.config); err != nil {
		t.Fatal(err)
	}
	if len(l.config.RootFS.DiffIDs) != 1 || l.config.RootFS.DiffIDs[0] != l.manifest.Layers[0].Digest {
		t.Fatalf("diff IDs %v do not name the uncompressed layer %s", l.config.RootFS.DiffIDs, l.manifest.Layers[0].Digest)
	}
	l.files = map[string]*tar.Header{}
	l.contents = map[string][]byte{}
	lr := tar.NewReader(bytes.NewReader(blob(l.manifest.Layers[0])))
	for {
		hdr, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading layer: %v", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if _, dup := l.files[name]; dup {
			t.Fatalf("layer has %s twice", name)
		}
		l.files[name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			l.contents[name] = data
		}
	}
	return l
}

func TestWriteLayout(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	newImage := func() Image {
		r := NewRootfs()
		r.Symlink("/bin", "usr/bin")
		r.File("/bin/tool", src, 0o755|fs.ModeSetuid)
		r.Data("/etc/conf", []byte("x=1\n"), 0o644)
		r.Dir("/tmp", 0o777)
		return Image{
			Ref:    Prefix + "test:v1.2.3",
			Rootfs: r,
			Config: Config{Entrypoint: []string{"/bin/tool"}, Cmd: []string{"--flag"}, User: "0"},
		}
	}

	t.Run("When an image is written, it should read back as a valid OCI layout", func(t *testing.T) {
		file := filepath.Join(dir, "a.tar")
		desc, err := WriteLayout(file, newImage())
		if err != nil {
			t.Fatal(err)
		}
		l := readLayout(t, file)
		if l.index.Manifests[0].Digest != desc.Digest {
			t.Errorf("index names %s, WriteLayout returned %s", l.index.Manifests[0].Digest, desc.Digest)
		}
		if got := l.index.Manifests[0].Annotations[AnnotationImageName]; got != Prefix+"test:v1.2.3" {
			t.Errorf("image name annotation = %q", got)
		}
		if got := l.index.Manifests[0].Annotations[AnnotationRefName]; got != "v1.2.3" {
			t.Errorf("ref name annotation = %q", got)
		}
		if l.config.OS != "linux" || l.config.Config.Entrypoint[0] != "/bin/tool" || l.config.Config.Cmd[0] != "--flag" {
			t.Errorf("config = %+v", l.config)
		}
		// The file added under the /bin link lands where the link points.
		tool, ok := l.files["usr/bin/tool"]
		if !ok {
			t.Fatalf("usr/bin/tool missing; layer has %v", keys(l.files))
		}
		if tool.Mode != 0o4755 || string(l.contents["usr/bin/tool"]) != "binary" {
			t.Errorf("usr/bin/tool: mode %o, content %q", tool.Mode, l.contents["usr/bin/tool"])
		}
		if _, ok := l.files["bin/tool"]; ok {
			t.Error("the layer holds an entry beneath the /bin link")
		}
		if h := l.files["bin"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin" {
			t.Errorf("bin = %+v", h)
		}
		if h := l.files["usr"]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("parent directory usr = %+v", h)
		}
		if string(l.contents["etc/conf"]) != "x=1\n" {
			t.Errorf("etc/conf = %q", l.contents["etc/conf"])
		}
		for name, h := range l.files {
			if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("%s: owner %d:%d, time %v", name, h.Uid, h.Gid, h.ModTime)
			}
		}
	})

	t.Run("When the same image is written twice, it should give byte-equal tars", func(t *testing.T) {
		a, b := filepath.Join(dir, "1.tar"), filepath.Join(dir, "2.tar")
		if _, err := WriteLayout(a, newImage()); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteLayout(b, newImage()); err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		if !bytes.Equal(da, db) {
			t.Error("tars differ")
		}
	})

	t.Run("When the reference has no tag, it should fail", func(t *testing.T) {
		img := newImage()
		img.Ref = "localhost:5000/x"
		if _, err := WriteLayout(filepath.Join(dir, "x.tar"), img); err == nil {
			t.Error("no error")
		}
	})
}

func TestRootfsHost(t *testing.T) {
	sh, err := lookTool("sh")
	if err != nil {
		t.Skip(err)
	}
	t.Run("When a dynamic host program is added, it should bring its links, libraries and loader", func(t *testing.T) {
		r := NewRootfs()
		if err := r.Host(sh); err != nil {
			t.Fatal(err)
		}
		libs, err := lddPaths(sh)
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range append(libs, sh) {
			// Every path resolves inside the image to a regular file, following the image's links.
			p := r.resolve(lib, 0)
			e, ok := r.entries[p]
			if !ok || e.Type != File {
				t.Errorf("%s (resolved %s) is not a file in the image: %+v", lib, p, e)
			}
		}
	})
	t.Run("When a script is added, it should bring its interpreter", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "script")
		if err := os.WriteFile(script, []byte("#!"+sh+" -e\necho hi\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := NewRootfs()
		if err := r.Host(script); err != nil {
			t.Fatal(err)
		}
		if e, ok := r.entries[r.resolve(sh, 0)]; !ok || e.Type != File {
			t.Errorf("interpreter %s missing", sh)
		}
	})
}

func TestBuildCaches(t *testing.T) {
	bin := t.TempDir()
	v := DefaultVersions()
	pause := BinaryPath(bin, Pause, v.Kube)
	if err := os.MkdirAll(filepath.Dir(pause), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pause, []byte("pause v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	first, err := Build(ctx, bin, v, Pause)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := first[Pause].Ref, "localhost/cinder-csi-e2e/pause:"+v.Kube; got != want {
		t.Errorf("ref = %s, want %s", got, want)
	}
	l := readLayout(t, first[Pause].Tar)
	if l.config.Config.Entrypoint[0] != "/pause" || string(l.contents["pause"]) != "pause v1" {
		t.Errorf("pause image: config %+v, /pause %q", l.config.Config, l.contents["pause"])
	}
	st1, _ := os.Stat(first[Pause].Tar)

	t.Run("When nothing changed, it should reuse the tar", func(t *testing.T) {
		again, err := Build(ctx, bin, v, Pause)
		if err != nil {
			t.Fatal(err)
		}
		st2, _ := os.Stat(again[Pause].Tar)
		if again[Pause].Tar != first[Pause].Tar || !st2.ModTime().Equal(st1.ModTime()) {
			t.Errorf("tar rewritten: %s -> %s", first[Pause].Tar, again[Pause].Tar)
		}
	})
	t.Run("When an input changed, it should write a new tar and drop the old one", func(t *testing.T) {
		if err := os.WriteFile(pause, []byte("pause v2"), 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := Build(ctx, bin, v, Pause)
		if err != nil {
			t.Fatal(err)
		}
		if next[Pause].Tar == first[Pause].Tar {
			t.Fatal("same tar for changed input")
		}
		if _, err := os.Stat(first[Pause].Tar); !os.IsNotExist(err) {
			t.Errorf("old tar still there: %v", err)
		}
	})
	t.Run("When a binary is missing, it should name it and the make target", func(t *testing.T) {
		_, err := Build(ctx, bin, v, Provisioner)
		if err == nil || !strings.Contains(err.Error(), "make operand-binaries") || !strings.Contains(err.Error(), "csi-provisioner-"+v.Provisioner) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestSetEnv(t *testing.T) {
	set := Set{}
	for _, n := range Names() {
		set[n] = Built{Ref: Prefix + n + ":x"}
	}
	env := set.Env()
	if len(env) != len(envImages) {
		t.Errorf("env has %d variables, want %d", len(env), len(envImages))
	}
	if env["DRIVER_IMAGE"] != env["DRIVER_CONTROL_PLANE_IMAGE"] || env["DRIVER_IMAGE"] != Prefix+Driver+":x" {
		t.Errorf("driver images: %v", env)
	}
	if env["NODE_DRIVER_REGISTRAR_IMAGE"] != Prefix+NodeDriverRegistrar+":x" {
		t.Errorf("registrar image: %v", env)
	}
}

// TestMakefileVersions keeps the Makefile's pinned versions and DefaultVersions in step: the
// Makefile builds the binaries, BuildAll looks for them by these versions.
func TestMakefileVersions(t *testing.T) {
	data, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Skip(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, value, ok := strings.Cut(line, "?="); ok {
			vars[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	v := DefaultVersions()
	for name, want := range map[string]string{
		"KUBE_VERSION":              v.Kube,
		"CINDER_CSI_PLUGIN_VERSION": v.CinderCSIPlugin,
		"CSI_PROVISIONER_VERSION":   v.Provisioner,
		"CSI_ATTACHER_VERSION":      v.Attacher,
		"CSI_RESIZER_VERSION":       v.Resizer,
		"CSI_SNAPSHOTTER_VERSION":   v.Snapshotter,
		"KUBE_RBAC_PROXY_VERSION":   v.KubeRBACProxy,
		"KUBE_ROUTER_VERSION":       v.KubeRouter,
	} {
		if vars[name] != want {
			t.Errorf("Makefile %s = %q, DefaultVersions has %q", name, vars[name], want)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRetagged(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := NewRootfs()
	r.File("/bin/tool", src, 0o755)
	original := filepath.Join(dir, "images", "test", "v1.2.3-abc.tar")
	desc, err := WriteLayout(original, Image{Ref: Prefix + "test:v1.2.3", Rootfs: r, Config: Config{Entrypoint: []string{"/bin/tool"}}})
	if err != nil {
		t.Fatal(err)
	}
	set := Set{"test": {Ref: Prefix + "test:v1.2.3", Tar: original}}

	t.Run("When a set is retagged, each image should import under its new reference with the same manifest, and the original should stay", func(t *testing.T) {
		next, err := set.Retagged(dir, "-next")
		if err != nil {
			t.Fatal(err)
		}
		b := next["test"]
		if b.Ref != Prefix+"test:v1.2.3-next" {
			t.Errorf("ref = %q", b.Ref)
		}
		l := readLayout(t, b.Tar)
		m := l.index.Manifests[0]
		if m.Digest != desc.Digest {
			t.Errorf("manifest %s, the original's is %s", m.Digest, desc.Digest)
		}
		if m.Annotations[AnnotationImageName] != b.Ref || m.Annotations[AnnotationRefName] != "v1.2.3-next" {
			t.Errorf("annotations = %v", m.Annotations)
		}
		if got := readLayout(t, original).index.Manifests[0].Annotations[AnnotationImageName]; got != Prefix+"test:v1.2.3" {
			t.Errorf("the original now names %q", got)
		}
	})

	t.Run("When the suffix has a slash or a colon, it should be refused", func(t *testing.T) {
		for _, bad := range []string{"", "/x", ":x"} {
			if _, err := set.Retagged(dir, bad); err == nil {
				t.Errorf("suffix %q accepted", bad)
			}
		}
	})
}
