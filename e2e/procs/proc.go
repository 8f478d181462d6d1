package procs

import (
	"bufio"
	"os"
	"strings"
)

// StatState returns the state letter of a /proc/<pid>/stat (or task stat) line: the first field
// after the command, which is in parentheses and may itself hold spaces and parentheses.
func StatState(stat string) (byte, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, false
	}
	return stat[i+2], true
}

// LogLinesNaming returns the last limit lines of the log file at path that contain any of the
// non-empty needles, for a failure that must quote what a component logged about an object;
// nil when none does or the file cannot be read.
func LogLinesNaming(path string, needles []string, limit int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var found []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if Mentions(s.Text(), needles) {
			found = append(found, s.Text())
		}
	}
	if len(found) > limit {
		found = found[len(found)-limit:]
	}
	return found
}

// Mentions says whether line contains one of the non-empty needles.
func Mentions(line string, needles []string) bool {
	for _, n := range needles {
		if n != "" && strings.Contains(line, n) {
			return true
		}
	}
	return false
}
