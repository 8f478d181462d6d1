package imagetars

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// OCI media types and annotations of the image layout (image-spec v1.1).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	// MediaTypeLayer is an uncompressed layer: the images only ever travel from this machine's
	// disk into a local containerd, where compressing would cost time and save nothing, and the
	// layer digest then doubles as the diff ID.
	MediaTypeLayer = "application/vnd.oci.image.layer.v1.tar"

	// AnnotationImageName is the annotation `ctr images import` names the image by.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the OCI tag annotation, for tools that read only that one.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// epoch is every entry's modification time: fixed, so the same inputs give the same digests.
var epoch = time.Unix(0, 0).UTC()

// Config is the part of an image configuration that decides how a container runs.
type Config struct {
	// Entrypoint and Cmd follow the Dockerfile semantics: a pod's command replaces Entrypoint,
	// its args replace Cmd.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	Labels     map[string]string
}

// Image is an image to write: its reference, run configuration and only layer.
type Image struct {
	// Ref is the full reference containerd lists the image under, e.g.
	// localhost/cinder-csi-e2e/pause:v1.36.3.
	Ref    string
	Config Config
	Rootfs *Rootfs
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is the OS and architecture an image runs on.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Index is an OCI image index (index.json of the layout).
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// ImageConfig is an OCI image configuration blob.
type ImageConfig struct {
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Config       RunConfig     `json:"config"`
	RootFS       RootFSConfig  `json:"rootfs"`
	History      []HistoryItem `json:"history,omitempty"`
}

// RunConfig is the "config" object of an image configuration.
type RunConfig struct {
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	User       string            `json:"User,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// RootFSConfig lists the uncompressed layer digests of an image configuration.
type RootFSConfig struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// HistoryItem records how a layer was made.
type HistoryItem struct {
	CreatedBy string `json:"created_by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// WriteLayout writes img as an OCI image-layout tar to file, atomically (a temporary file in the
// same directory is renamed into place), and returns the manifest's descriptor. The result is
// what `ctr -n k8s.io images import` takes; equal inputs give byte-equal tars.
func WriteLayout(file string, img Image) (Descriptor, error) {
	if img.Rootfs == nil {
		return Descriptor{}, fmt.Errorf("writing image %s: no root file system", img.Ref)
	}
	tag, err := tagOf(img.Ref)
	if err != nil {
		return Descriptor{}, err
	}
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}

	// The outer tar needs each blob's size in its header before the content, so the layer goes
	// to a temporary file first, hashed on the way.
	layerFile, err := os.CreateTemp(dir, ".layer-*")
	if err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	// The layer file is scratch: it is read back through the same descriptor and then removed, so
	// neither its Close nor its Remove can lose anything the image needs.
	defer func() {
		_ = layerFile.Close()
		_ = os.Remove(layerFile.Name())
	}()
	h := sha256.New()
	if err := writeLayer(io.MultiWriter(layerFile, h), img.Rootfs); err != nil {
		return Descriptor{}, fmt.Errorf("writing layer of %s: %w", img.Ref, err)
	}
	layerSize, err := layerFile.Seek(0, io.SeekCurrent)
	if err != nil {
		return Descriptor{}, fmt.Errorf("writing layer of %s: %w", img.Ref, err)
	}
	layer := Descriptor{MediaType: MediaTypeLayer, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: layerSize}

	platform := Platform{Architecture: runtime.GOARCH, OS: "linux"}
	configJSON, err := json.Marshal(ImageConfig{
		Architecture: platform.Architecture,
		OS:           platform.OS,
		Config: RunConfig{
			Entrypoint: img.Config.Entrypoint,
			Cmd:        img.Config.Cmd,
			Env:        img.Config.Env,
			WorkingDir: img.Config.WorkingDir,
			User:       img.Config.User,
			Labels:     img.Config.Labels,
		},
		RootFS:  RootFSConfig{Type: "layers", DiffIDs: []string{layer.Digest}},
		History: []HistoryItem{{CreatedBy: "cinder-csi-operator e2e/imagetars", Comment: "single layer packed from local files"}},
	})
	if err != nil {
		return Descriptor{}, fmt.Errorf("encoding config of %s: %w", img.Ref, err)
	}
	config := blobDescriptor(MediaTypeConfig, configJSON)
	manifestJSON, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        config,
		Layers:        []Descriptor{layer},
	})
	if err != nil {
		return Descriptor{}, fmt.Errorf("encoding manifest of %s: %w", img.Ref, err)
	}
	manifest := blobDescriptor(MediaTypeManifest, manifestJSON)
	manifest.Platform = &platform
	manifest.Annotations = map[string]string{AnnotationImageName: img.Ref, AnnotationRefName: tag}
	indexJSON, err := json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{manifest}})
	if err != nil {
		return Descriptor{}, fmt.Errorf("encoding index of %s: %w", img.Ref, err)
	}

	out, err := os.CreateTemp(dir, ".image-*")
	if err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	// For the error paths only: on success out has been closed (that error is checked below) and
	// renamed into place, so both calls fail harmlessly.
	defer func() {
		_ = out.Close()
		_ = os.Remove(out.Name())
	}()
	tw := tar.NewWriter(out)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
		}
	}
	if _, err := layerFile.Seek(0, io.SeekStart); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	if err := writeTarFile(tw, blobPath(layer.Digest), layer.Size, layerFile); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{blobPath(config.Digest), configJSON},
		{blobPath(manifest.Digest), manifestJSON},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
	} {
		if err := writeTarFile(tw, f.name, int64(len(f.data)), strings.NewReader(string(f.data))); err != nil {
			return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	if err := out.Close(); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	if err := os.Chmod(out.Name(), 0o644); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	if err := os.Rename(out.Name(), file); err != nil {
		return Descriptor{}, fmt.Errorf("writing image %s: %w", img.Ref, err)
	}
	return manifest, nil
}

// tagOf returns the tag of a name:tag reference; digests are not supported because the tag is
// what pods name.
func tagOf(ref string) (string, error) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || i == len(ref)-1 {
		return "", fmt.Errorf("image reference %q has no tag", ref)
	}
	return ref[i+1:], nil
}

func blobDescriptor(mediaType string, data []byte) Descriptor {
	sum := sha256.Sum256(data)
	return Descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

func blobPath(digest string) string {
	return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:")
}

func writeTarFile(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.Copy(tw, r)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%s: wrote %d bytes, want %d", name, n, size)
	}
	return nil
}

// writeLayer writes the root file system as a layer tar: paths relative to the root, owned by
// root, with fixed times.
func writeLayer(w io.Writer, r *Rootfs) error {
	tw := tar.NewWriter(w)
	for _, e := range r.Entries() {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(e.Path, "/"),
			Mode:    tarMode(e.Mode),
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		switch e.Type {
		case Dir:
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case Symlink:
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = e.Target
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case File:
			if err := writeLayerFile(tw, hdr, e); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unknown entry type %d", e.Path, e.Type)
		}
	}
	return tw.Close()
}

func writeLayerFile(tw *tar.Writer, hdr *tar.Header, e Entry) error {
	hdr.Typeflag = tar.TypeReg
	if e.Source == "" {
		hdr.Size = int64(len(e.Data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(e.Data)
		return err
	}
	f, err := os.Open(e.Source)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: source %s is not a regular file", e.Path, e.Source)
	}
	hdr.Size = fi.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if n != hdr.Size {
		return fmt.Errorf("%s: source %s changed while being copied", e.Path, e.Source)
	}
	return nil
}

// tarMode converts Go's file mode bits to the tar (and stat) ones: setuid mount and umount keep
// their bit.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// retagLayout copies the layout tar src to dst with its one manifest named ref: the blobs are
// the same, only index.json's annotations change.
func retagLayout(src, dst, ref string) error {
	tag, err := tagOf(ref)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.CreateTemp(filepath.Dir(dst), ".image-*")
	if err != nil {
		return err
	}
	// For the error paths only, as in WriteLayout.
	defer func() {
		_ = out.Close()
		_ = os.Remove(out.Name())
	}()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	renamed := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
		if hdr.Name != "index.json" {
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
			continue
		}
		var index Index
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return fmt.Errorf("reading %s's index: %w", src, err)
		}
		if len(index.Manifests) != 1 {
			return fmt.Errorf("%s has %d manifests, want one", src, len(index.Manifests))
		}
		index.Manifests[0].Annotations = map[string]string{AnnotationImageName: ref, AnnotationRefName: tag}
		data, err := json.Marshal(index)
		if err != nil {
			return err
		}
		if err := writeTarFile(tw, hdr.Name, int64(len(data)), bytes.NewReader(data)); err != nil {
			return err
		}
		renamed = true
	}
	if !renamed {
		return fmt.Errorf("%s has no index.json", src)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(out.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(out.Name(), dst)
}
