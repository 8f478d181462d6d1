package realcloud

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// requestIDPattern matches an OpenStack request ID, as faults and API errors quote it.
var requestIDPattern = regexp.MustCompile(`req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// maxEvidenceLines bounds what evidence quotes from one log: the last lines that name an ID
// (a server's build is logged on a few dozen lines of nova-compute's log).
const maxEvidenceLines = 40

// Evidence returns what the services logged about ids (server, volume or request IDs) and about
// every request ID text quotes, from every log of the cloud: each line that names one of them,
// and after each such line logged at ERROR, the traceback its process logged with it. An API
// that answers 500 says only that it failed; the reason is in its log, and the run directory
// that holds the logs goes with Stop. Empty when no log names them.
func (c *Cloud) Evidence(text string, ids ...string) string {
	ids = append(ids, requestIDPattern.FindAllString(text, -1)...)
	if len(ids) == 0 {
		return ""
	}
	logs := []string{filepath.Join(c.LogDir(), "tls-proxy.log")}
	for _, p := range c.processes() {
		logs = append(logs, p.LogPath())
	}
	var b strings.Builder
	for _, path := range logs {
		if lines := linesAbout(path, ids); len(lines) > 0 {
			fmt.Fprintf(&b, "--- %s:\n%s\n", filepath.Base(path), strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// linesAbout returns the lines of the oslo.log file path that name one of ids, each followed by
// the traceback lines of its process when it is an ERROR line, at most maxEvidenceLines groups
// (the last ones).
func linesAbout(path string, ids []string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var groups [][]string
	// follow is the "<pid> ERROR" of the last matched ERROR line: oslo.log writes a logged
	// exception's traceback one line each, with that prefix after the time stamp and without
	// the request's context.
	follow := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if procs.Mentions(line, ids) {
			groups = append(groups, []string{line})
			follow = ""
			if pid, level := osloFields(line); level == "ERROR" {
				follow = pid + " ERROR "
			}
			continue
		}
		if follow != "" && len(groups[len(groups)-1]) < 200 && strings.Contains(line, " "+follow) {
			groups[len(groups)-1] = append(groups[len(groups)-1], line)
			continue
		}
		follow = ""
	}
	if len(groups) > maxEvidenceLines {
		groups = groups[len(groups)-maxEvidenceLines:]
	}
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// osloFields returns the process ID and level of an oslo.log line ("<date> <time> <pid>
// <LEVEL> <logger> ..."); empty strings for a line of another shape.
func osloFields(line string) (pid, level string) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return "", ""
	}
	return f[2], f[3]
}
