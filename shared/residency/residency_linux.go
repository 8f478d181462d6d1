package residency

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// advised remembers whether init could advise the executable's mappings, for Trim's report.
var advised struct {
	sync.Mutex
	regions []region
	err     error
}

func init() {
	advised.regions, advised.err = readOnlyExecutableRegions()
	if advised.err != nil {
		return
	}
	for _, r := range advised.regions {
		// MADV_RANDOM sets VM_RAND_READ on the mapping, which is what stops the kernel's
		// fault-around (and read-ahead) for it.
		if err := r.madvise(unix.MADV_RANDOM); err != nil {
			advised.err = fmt.Errorf("advising %s: %w", r, err)
			return
		}
	}
}

// Trim unmaps the executable's read-only pages from the process (they stay in the page cache)
// and returns the process's file-backed resident memory (RssFile) before and after, in bytes.
// Call it once start-up is over.
func Trim() (before, after int64, err error) {
	advised.Lock()
	defer advised.Unlock()
	if advised.err != nil {
		return 0, 0, advised.err
	}
	if before, err = rssFile(); err != nil {
		return 0, 0, err
	}
	clean, err := cleanRegions(advised.regions)
	if err != nil {
		return before, 0, err
	}
	for _, r := range clean {
		// A read-only private mapping without anonymous pages holds only page-cache pages,
		// so MADV_DONTNEED drops nothing but their mapping, which the next access restores.
		if err := r.madvise(unix.MADV_DONTNEED); err != nil {
			return before, 0, fmt.Errorf("trimming %s: %w", r, err)
		}
	}
	after, err = rssFile()
	return before, after, err
}

// cleanRegions returns the regions that hold no anonymous page, from /proc/self/smaps. A
// read-only mapping can hold private copies: the dynamic loader writes relocations into the
// segment it then makes read-only (RELRO) in a binary built with cgo or as a position-independent
// executable, and MADV_DONTNEED would replace those copies by the file's unrelocated bytes.
func cleanRegions(regions []region) ([]region, error) {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	anonymous := map[uintptr]bool{}
	var current uintptr
	for line := range bytes.Lines(smaps) {
		if r, ok := parseMapping(line); ok {
			current = r.start
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("Anonymous:")); ok {
			if f := bytes.Fields(v); len(f) == 0 || string(f[0]) != "0" {
				anonymous[current] = true
			}
		}
	}
	var out []region
	for _, r := range regions {
		if !anonymous[r.start] {
			out = append(out, r)
		}
	}
	return out, nil
}

// parseMapping parses the header line of a mapping in /proc/self/maps or smaps
// ("start-end perms offset dev inode path").
func parseMapping(line []byte) (region, bool) {
	f := bytes.Fields(line)
	if len(f) < 5 {
		return region{}, false
	}
	bounds := bytes.SplitN(f[0], []byte("-"), 2)
	if len(bounds) != 2 {
		return region{}, false
	}
	start, err1 := strconv.ParseUint(string(bounds[0]), 16, 64)
	end, err2 := strconv.ParseUint(string(bounds[1]), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return region{}, false
	}
	return region{start: uintptr(start), end: uintptr(end)}, true
}

// rssFile reads the process's file-backed resident memory from /proc/self/status.
func rssFile() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, []byte("RssFile:")); ok {
			f := bytes.Fields(v)
			if len(f) != 2 || string(f[1]) != "kB" {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no RssFile in /proc/self/status")
}

// region is one mapping of the executable.
type region struct {
	start, end uintptr
}

func (r region) String() string { return fmt.Sprintf("%#x-%#x", r.start, r.end) }

// madvise gives the kernel advice about the mapping. It calls the system call with the
// mapping's bounds directly: the mapping is not Go memory, and unix.Madvise would need it as a
// slice.
func (r region) madvise(advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// readOnlyExecutableRegions lists the mappings of the running executable that are private and
// not writable (code, read-only data, the runtime's tables), from /proc/self/maps.
func readOnlyExecutableRegions() ([]region, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("finding the executable: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	var out []region
	s := bufio.NewScanner(bytes.NewReader(maps))
	for s.Scan() {
		// start-end perms offset dev inode path
		f := bytes.Fields(s.Bytes())
		if len(f) < 6 || string(f[5]) != exe {
			continue
		}
		perms := f[1]
		if len(perms) != 4 || perms[1] == 'w' || perms[3] != 'p' {
			continue
		}
		if r, ok := parseMapping(s.Bytes()); ok {
			out = append(out, r)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	return out, nil
}
