package imagetars

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// EntryType is the kind of a file system object in an image layer.
type EntryType int

// The kinds of layer entries.
const (
	Dir EntryType = iota
	File
	Symlink
)

// Entry is one file system object of an image's single layer.
type Entry struct {
	// Path is the absolute, clean path inside the image.
	Path string
	// Type says whether Path is a directory, a regular file or a symbolic link.
	Type EntryType
	// Mode holds the permission bits plus fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky.
	Mode fs.FileMode
	// Source is the host file a File copies; when empty, Data is the content.
	Source string
	// Data is a File's content when Source is empty.
	Data []byte
	// Target is a Symlink's target, as stored in the link.
	Target string
}

// Rootfs collects the entries of an image's only layer. Parent directories are added on demand,
// and adding the same path twice keeps the first entry, so image recipes can add overlapping host
// tools (they share libraries) without bookkeeping.
type Rootfs struct {
	entries map[string]Entry
}

// NewRootfs returns an empty root file system.
func NewRootfs() *Rootfs {
	return &Rootfs{entries: map[string]Entry{}}
}

// Entries returns the entries sorted by path, so the layer (and its digest) is reproducible.
func (r *Rootfs) Entries() []Entry {
	out := make([]Entry, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Has reports whether the path already has an entry.
func (r *Rootfs) Has(p string) bool {
	_, ok := r.entries[path.Clean(p)]
	return ok
}

// Dir adds a directory (and its parents).
func (r *Rootfs) Dir(p string, mode fs.FileMode) {
	r.add(Entry{Path: p, Type: Dir, Mode: mode})
}

// File adds a regular file copied from the host file src.
func (r *Rootfs) File(p, src string, mode fs.FileMode) {
	r.add(Entry{Path: p, Type: File, Mode: mode, Source: src})
}

// Data adds a regular file with the given content.
func (r *Rootfs) Data(p string, data []byte, mode fs.FileMode) {
	r.add(Entry{Path: p, Type: File, Mode: mode, Data: data})
}

// Symlink adds a symbolic link to target.
func (r *Rootfs) Symlink(p, target string) {
	r.add(Entry{Path: p, Type: Symlink, Mode: 0o777, Target: target})
}

func (r *Rootfs) add(e Entry) {
	e.Path = path.Clean("/" + e.Path)
	if e.Path == "/" {
		return
	}
	// A parent that is a link in this root file system (/bin -> usr/bin once host tools are in)
	// is followed, so that /bin/x lands in /usr/bin like it would in a running container; the
	// layer must not hold entries beneath a symbolic link.
	e.Path = path.Join(r.resolve(path.Dir(e.Path), 0), path.Base(e.Path))
	if _, ok := r.entries[e.Path]; ok {
		return
	}
	if parent := path.Dir(e.Path); parent != "/" && !r.Has(parent) {
		r.Dir(parent, 0o755)
	}
	r.entries[e.Path] = e
}

// resolve follows the symbolic links this root file system holds along the directory path p.
func (r *Rootfs) resolve(p string, depth int) string {
	if p == "/" || depth > maxLinks {
		return p
	}
	parent := r.resolve(path.Dir(p), depth+1)
	cur := path.Join(parent, path.Base(p))
	e, ok := r.entries[cur]
	if !ok || e.Type != Symlink {
		return cur
	}
	target := e.Target
	if !path.IsAbs(target) {
		target = path.Join(parent, target)
	}
	return r.resolve(target, depth+1)
}

// Host adds host files at the same paths, as the host has them, with everything they need to run:
// every symbolic link on the way is recreated (Debian 12 has /bin -> usr/bin, mkfs.ext4 ->
// mke2fs, lib*.so.N -> lib*.so.N.M), dynamically linked ELF programs bring the libraries and the
// dynamic loader that ldd lists, and scripts bring their #! interpreter. Directories are not
// copied recursively.
func (r *Rootfs) Host(paths ...string) error {
	for _, p := range paths {
		if err := r.host(p, 0); err != nil {
			return err
		}
	}
	return nil
}

// maxLinks bounds symlink resolution, as the kernel's ELOOP does.
const maxLinks = 40

func (r *Rootfs) host(p string, depth int) error {
	if depth > maxLinks {
		return fmt.Errorf("adding host file %s: too many levels of symbolic links", p)
	}
	p = path.Clean(p)
	if !path.IsAbs(p) {
		return fmt.Errorf("adding host file %s: path is not absolute", p)
	}
	// Walk the components so that a symlinked directory (/lib -> usr/lib) is kept as a link and
	// the file lands under the link's target, exactly as on the host.
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("adding host file %s: %w", p, err)
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("adding host file %s: %w", p, err)
			}
			r.Symlink(next, target)
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(cur, target)
			}
			rest := path.Join(append([]string{resolved}, parts[i+1:]...)...)
			return r.host(rest, depth+1)
		case last && fi.IsDir():
			r.Dir(next, fi.Mode().Perm())
		case last && fi.Mode().IsRegular():
			if r.Has(next) {
				return nil
			}
			r.File(next, next, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
			return r.dependencies(next)
		case last:
			return fmt.Errorf("adding host file %s: not a regular file, directory or link", p)
		case !fi.IsDir():
			return fmt.Errorf("adding host file %s: %s is not a directory", p, next)
		default:
			if !r.Has(next) {
				r.Dir(next, fi.Mode().Perm())
			}
		}
		cur = next
	}
	return nil
}

// dependencies adds what the host file p needs at run time: an ELF program's interpreter and
// shared libraries, or a script's interpreter.
func (r *Rootfs) dependencies(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	defer func() { _ = f.Close() }()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := strings.Cut(string(head[2:]), "\n")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return nil
		}
		return r.host(fields[0], 0)
	}
	if !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("reading ELF %s: %w", p, err)
	}
	dynamic := false
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			dynamic = true
		}
	}
	if !dynamic {
		// Static programs (Go with CGO_ENABLED=0, the pause binary) need nothing else.
		return nil
	}
	libs, err := lddPaths(p)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		if err := r.host(lib, 0); err != nil {
			return err
		}
	}
	return nil
}

// lddPaths returns the absolute paths ldd resolves for a dynamically linked program: the
// libraries ("libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)") and the loader
// ("/lib64/ld-linux-x86-64.so.2 (0x...)"). The vDSO has no path and is skipped.
func lddPaths(p string) ([]string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("ldd", p)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", p, err, strings.TrimSpace(stderr.String()))
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: missing library: %s", p, line)
		}
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		fields := strings.Fields(line)
		if len(fields) > 0 && filepath.IsAbs(fields[0]) {
			paths = append(paths, fields[0])
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("ldd " + p + ": no libraries listed for a dynamic program")
	}
	return paths, nil
}
