package residency

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

func TestInitAdvisedTheExecutable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(advised.err).NotTo(HaveOccurred())
	g.Expect(advised.regions).NotTo(BeEmpty(), "the test binary's code and read-only data")
}

// TestTrim unmaps the test binary's read-only pages and checks that the program runs on: the
// code after the call is mapped again as it executes.
func TestTrim(t *testing.T) {
	g := NewWithT(t)
	before, after, err := Trim()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before).To(BeNumerically(">", 0))
	g.Expect(after).To(BeNumerically("<", before), "file-backed resident memory after the trim")
	t.Logf("RssFile %d KiB before the trim, %d KiB after", before>>10, after>>10)
	// Code and read-only data that had run before the trim still work.
	g.Expect(filepath.Join("a", "b")).To(Equal("a/b"))
}

// TestCleanRegionsSkipsPrivateCopies maps a file privately, writes to one of two mappings (the
// kernel gives the writer a private anonymous copy, as the dynamic loader does to a RELRO
// segment), makes both read-only, and expects only the untouched one to be trimmable.
func TestCleanRegionsSkipsPrivateCopies(t *testing.T) {
	g := NewWithT(t)
	page := os.Getpagesize()
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(f.Close()).To(Succeed()) }()
	g.Expect(f.Truncate(int64(page))).To(Succeed())

	mapPrivate := func(write bool) region {
		b, err := unix.Mmap(int(f.Fd()), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = unix.Munmap(b) })
		if write {
			b[0] = 1
		} else {
			_ = b[0]
		}
		g.Expect(unix.Mprotect(b, unix.PROT_READ)).To(Succeed())
		start := regionOf(t, b)
		return region{start: start, end: start + uintptr(page)}
	}
	copied, clean := mapPrivate(true), mapPrivate(false)

	got, err := cleanRegions([]region{copied, clean})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]region{clean}))
}

func TestParseMapping(t *testing.T) {
	for line, want := range map[string]*region{
		"00400000-0155a000 r-xp 00000000 fe:00 9981504   /usr/bin/cinder-csi-operator\n": {start: 0x400000, end: 0x155a000},
		"7ffd1000-7ffd3000 r-xp 00000000 00:00 0                  [vdso]\n":              {start: 0x7ffd1000, end: 0x7ffd3000},
		"Rss:                 848 kB\n":                                                  nil,
		"VmFlags: rd ex mr mw me rr\n":                                                   nil,
		"0155a000-00400000 r--p 0115a000 fe:00 9981504 x\n":                              nil,
	} {
		got, ok := parseMapping([]byte(line))
		if want == nil {
			if ok {
				t.Errorf("parseMapping(%q) = %v, want no mapping", line, got)
			}
			continue
		}
		if !ok || got != *want {
			t.Errorf("parseMapping(%q) = %v, %v; want %v", line, got, ok, *want)
		}
	}
}

// regionOf finds the start address of the mapping b lies in, from /proc/self/maps, without
// converting b's pointer: the test learns where the kernel put it as Trim does.
func regionOf(t *testing.T, b []byte) uintptr {
	t.Helper()
	want := fmt.Sprintf("%p", &b[0])
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(maps) {
		r, ok := parseMapping(line)
		if ok && fmt.Sprintf("%#x", r.start) == want {
			return r.start
		}
	}
	t.Fatalf("no mapping starts at %s", want)
	return 0
}
