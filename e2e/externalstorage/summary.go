package externalstorage

import (
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Counts are specs by what became of them.
type Counts struct {
	Passed, Failed, Skipped, Interrupted int
	// Unselected are the specs the focus and skip expressions left out; Skipped are those the
	// suite skipped once they ran (a capability the driver definition turns off, an fs type, a
	// node count).
	Unselected int
}

// add counts one spec of a JUnit status.
func (c *Counts) add(status string, unselected bool) {
	switch {
	case unselected:
		c.Unselected++
	case status == "passed":
		c.Passed++
	case status == "failed" || status == "panicked":
		c.Failed++
	case status == "skipped":
		c.Skipped++
	default: // interrupted, timedout, aborted
		c.Interrupted++
	}
}

// Summary is what a run of the suite did, read from its JUnit report.
type Summary struct {
	Counts
	// ByPattern counts the selected specs per test pattern and test suite ("Dynamic PV (xfs) /
	// volume-expand"); Unselected is always zero there.
	ByPattern map[string]Counts
	// Took is how long the suite ran, the environment's start not included.
	Took time.Duration
	// ReportDir holds the JUnit files and summary.txt, the ByPattern table.
	ReportDir string
}

func (s Summary) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped by the suite, %d interrupted or timed out (%d specs not selected); per pattern in %s",
		s.Passed, s.Failed, s.Skipped, s.Interrupted, s.Unselected, filepath.Join(s.ReportDir, summaryFile))
}

// summaryFile is the per-pattern table written beside the JUnit files.
const summaryFile = "summary.txt"

// junitSuites is the part of a JUnit report the summary reads: ginkgo's report has one test
// case per spec (named "[It] ..."), with its status, besides the suite's set-up nodes.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// patternOf names a spec's group: its test pattern and test suite, as in "Dynamic PV (xfs) /
// volume-expand" for "External Storage [Driver: d] [Testpattern: Dynamic PV (xfs)] [Slow]
// volume-expand should ...". Specs outside the storage framework's patterns are "other".
func patternOf(name string) string {
	_, rest, ok := strings.Cut(name, "[Testpattern: ")
	if !ok {
		return "other"
	}
	pattern, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return "other"
	}
	for _, f := range strings.Fields(rest) {
		if !strings.HasPrefix(f, "[") {
			return pattern + " / " + f
		}
	}
	return pattern
}

// Summarize counts the specs of reportDir's JUnit files by status, in total and per test
// pattern and suite, and writes the per-pattern table to summary.txt beside them.
func Summarize(reportDir string) (Summary, error) {
	files, err := filepath.Glob(filepath.Join(reportDir, "junit*.xml"))
	if err != nil || len(files) == 0 {
		return Summary{}, fmt.Errorf("no junit*.xml in %s", reportDir)
	}
	s := Summary{ByPattern: map[string]Counts{}, ReportDir: reportDir}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return Summary{}, err
		}
		var r junitSuites
		if err := xml.Unmarshal(b, &r); err != nil {
			return Summary{}, fmt.Errorf("%s: %w", f, err)
		}
		for _, suite := range r.Suites {
			for _, c := range suite.Cases {
				if !strings.HasPrefix(c.Name, "[It] ") {
					continue
				}
				// A spec the focus or skip left out is "skipped" with no reason.
				unselected := c.Status == "skipped" && (c.Skipped == nil || strings.TrimSpace(c.Skipped.Message) == "skipped")
				s.add(c.Status, unselected)
				if unselected {
					continue
				}
				p := patternOf(c.Name)
				n := s.ByPattern[p]
				n.add(c.Status, false)
				s.ByPattern[p] = n
			}
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-80s %6s %6s %7s %11s\n", "test pattern / test suite", "passed", "failed", "skipped", "interrupted")
	for _, p := range slices.Sorted(maps.Keys(s.ByPattern)) {
		n := s.ByPattern[p]
		fmt.Fprintf(&table, "%-80s %6d %6d %7d %11d\n", p, n.Passed, n.Failed, n.Skipped, n.Interrupted)
	}
	if err := os.WriteFile(filepath.Join(reportDir, summaryFile), []byte(table.String()), 0o644); err != nil {
		return Summary{}, err
	}
	return s, nil
}
