// Command external-storage is what `make test-external-storage` runs: the upstream Kubernetes
// external-storage suite (e2e.test -storage.testdriver, from k8s.io/kubernetes at the local
// clusters' version) against the Cinder CSI driver the operator installs on real nodes. It starts
// the environment of one mode on real nodes (standalone: one cluster; hypershift: management and
// guest, the suite runs against the guest), deploys the operator as a pod from its install
// manifests, waits for the driver to be Available, imports the suite's test images into the node where its pods run, runs the suite
// with a JUnit report, prints the counts and stops everything. The exit status is the suite's.
package main

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/externalstorage"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// exitError carries the suite's exit status, so that main exits with it after the clean-up.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("the suite failed (exit status %d)", e.code) }

func main() {
	err := run()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		fmt.Fprintln(os.Stderr, "external-storage:", err)
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "external-storage:", err)
		os.Exit(1)
	}
}

func run() error {
	mode := flag.String("mode", env.ModeStandalone, "standalone (one cluster) or hypershift (management and guest; the suite runs against the guest)")
	operator := flag.String("operator", "bin/cinder-csi-operator", "cinder-csi-operator binary")
	binDir := flag.String("bin", "bin", "directory of the kubelet and the operand images (make operand-images)")
	suiteDir := flag.String("suite", "", "directory of e2e.test and agnhost (make external-storage-suite)")
	kubectl := flag.String("kubectl", "", "kubectl binary the suite runs")
	testDriver := flag.String("testdriver", "", "the suite's driver definition; empty: e2e/externalstorage/testdriver.yaml as built in")
	focus := flag.String("focus", "External.Storage", "ginkgo focus regular expression")
	skip := flag.String("skip", "", "ginkgo skip regular expression")
	out := flag.String("out", "bin/external-storage", "directory for the JUnit report and logs; the mode's subdirectory is replaced on start")
	timeout := flag.Duration("timeout", 2*time.Hour, "the suite's overall timeout (-ginkgo.timeout)")
	extra := flag.String("ginkgo-args", "", "more e2e.test arguments, space separated")
	parallel := flag.Int("procs", 1, "parallel suite processes (ginkgo --procs); more than one runs the suite through the ginkgo CLI next to e2e.test")
	seed := flag.Int("seed", 1, "ginkgo's random seed, fixed so that a run's spec order can be repeated")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := realnode.Check(); err != nil {
		return fmt.Errorf("the suite needs real nodes, which this host cannot run: %w", err)
	}
	abs := func(p *string) error {
		a, err := filepath.Abs(*p)
		*p = a
		return err
	}
	for _, p := range []*string{operator, binDir, suiteDir, kubectl, out} {
		if err := abs(p); err != nil {
			return err
		}
	}
	e2eTest := filepath.Join(*suiteDir, "e2e.test")
	agnhost := filepath.Join(*suiteDir, "agnhost")
	for _, f := range []string{*operator, e2eTest, agnhost, *kubectl} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w (make build external-storage-suite operand-binaries)", err)
		}
	}

	dir := filepath.Join(*out, *mode)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if *testDriver == "" {
		*testDriver = filepath.Join(dir, "testdriver.yaml")
		if err := os.WriteFile(*testDriver, externalstorage.TestDriver, 0o644); err != nil {
			return err
		}
	} else if err := abs(testDriver); err != nil {
		return err
	}
	repoList := filepath.Join(dir, "repo-list.yaml")
	if err := externalstorage.WriteRepoList(repoList); err != nil {
		return err
	}
	refs, err := externalstorage.SuiteImages(ctx, e2eTest, repoList, agnhost)
	if err != nil {
		return err
	}
	tars, err := externalstorage.BuildImages(filepath.Join(*binDir, "images", "external-storage"), refs, agnhost)
	if err != nil {
		return err
	}
	fmt.Printf("Suite images: %s, %s\n", refs[externalstorage.BusyBox], refs[externalstorage.Agnhost])

	started := time.Now()
	logf := func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }
	e, err := env.Start(ctx, env.Options{Mode: *mode, Dir: filepath.Join(dir, "env"), Logf: logf,
		RealNodes: &env.RealNodeOptions{BinDir: *binDir}})
	if err != nil {
		return fmt.Errorf("starting the %s environment on real nodes: %w", *mode, err)
	}
	defer e.Stop()
	if err := e.Real.GuestNode.ImportImages(ctx, tars...); err != nil {
		return fmt.Errorf("importing the suite's images: %w", err)
	}
	op, err := e.DeployOperator(ctx, env.PodOptions{Binary: *operator})
	if err != nil {
		return fmt.Errorf("deploying the operator: %w", err)
	}
	defer op.Stop()
	if err := waitAvailable(ctx, e.GuestClient, op.Failed(), 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("Driver Available %s after start (%s mode, real nodes); running the suite\n",
		time.Since(started).Round(time.Second), *mode)

	reportDir := filepath.Join(dir, "report")
	suiteArgs := []string{
		"-kubeconfig=" + e.Guest.KubeconfigPath(),
		"-storage.testdriver=" + *testDriver,
		"-kube-test-repo-list=" + repoList,
		"-kubectl-path=" + *kubectl,
		"-report-dir=" + reportDir,
	}
	suiteArgs = append(suiteArgs, strings.Fields(*extra)...)
	ginkgoArgs := []string{
		"focus=" + *focus,
		"timeout=" + timeout.String(),
		"seed=" + strconv.Itoa(*seed),
		"v",
		"no-color",
	}
	if *skip != "" {
		ginkgoArgs = append(ginkgoArgs, "skip="+*skip)
	}
	// One process: e2e.test itself, with ginkgo's flags prefixed. Several: the ginkgo CLI starts
	// them and merges their reports; the suite's ReportAfterSuite writes one JUnit file.
	bin, args := e2eTest, suiteArgs
	if *parallel > 1 {
		bin = filepath.Join(*suiteDir, "ginkgo")
		args = []string{"--procs=" + strconv.Itoa(*parallel)}
		for _, a := range ginkgoArgs {
			args = append(args, "--"+a)
		}
		args = append(append(append(args, e2eTest), "--"), suiteArgs...)
	} else {
		for _, a := range ginkgoArgs {
			args = append(args, "-ginkgo."+a)
		}
	}
	suiteLog, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		return err
	}
	defer func() { _ = suiteLog.Close() }()
	fmt.Printf("Running: %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = io.MultiWriter(os.Stdout, suiteLog)
	cmd.Stderr = io.MultiWriter(os.Stderr, suiteLog)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(*kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Interrupted, the suite gets time to clean up its namespaces before the environment goes.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	suiteStart := time.Now()
	runErr := cmd.Run()
	took := time.Since(suiteStart).Round(time.Second)
	if s, err := summarize(reportDir); err == nil {
		fmt.Printf("External storage suite, %s mode, %s: %s (report: %s)\n", *mode, took, s, reportDir)
	} else {
		fmt.Fprintf(os.Stderr, "no JUnit report: %v\n", err)
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		code := ee.ExitCode()
		if code <= 0 { // killed by a signal
			code = 1
		}
		return exitError{code: code}
	}
	return runErr
}

// waitAvailable polls the ClusterCSIDriver until the controller and the node plugin are
// Available and neither is Progressing.
func waitAvailable(ctx context.Context, c client.Client, exited <-chan error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		d := &operatorv1.ClusterCSIDriver{}
		if err := c.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err == nil &&
			conditions.IsTrue(d.Status.Conditions, names.ConditionControllerAvailable) &&
			conditions.IsTrue(d.Status.Conditions, names.ConditionNodeAvailable) &&
			!conditions.IsTrue(d.Status.Conditions, names.ConditionControllerProgressing) &&
			!conditions.IsTrue(d.Status.Conditions, names.ConditionNodeProgressing) {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the operator exited before the driver was Available: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the driver to be Available: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

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

// tally counts specs by status.
type tally struct{ passed, failed, skipped, interrupted, unselected int }

func (t *tally) add(status string, unselected bool) {
	switch {
	case unselected:
		t.unselected++
	case status == "passed":
		t.passed++
	case status == "failed" || status == "panicked":
		t.failed++
	case status == "skipped":
		t.skipped++
	default: // interrupted, timedout, aborted
		t.interrupted++
	}
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

// summarize counts the specs of the report directory's JUnit files by status, in total and per
// test pattern and suite (written to summary.txt beside the reports). Specs left out by the
// focus and skip expressions are counted apart from those the suite skipped when they ran (an
// unsupported capability, fs type or node count).
func summarize(reportDir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(reportDir, "junit*.xml"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no junit*.xml in %s", reportDir)
	}
	var total tally
	byPattern := map[string]*tally{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var r junitSuites
		if err := xml.Unmarshal(b, &r); err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range r.Suites {
			for _, c := range s.Cases {
				if !strings.HasPrefix(c.Name, "[It] ") {
					continue
				}
				// A spec the focus or skip left out is "skipped" with no reason.
				unselected := c.Status == "skipped" && (c.Skipped == nil || strings.TrimSpace(c.Skipped.Message) == "skipped")
				total.add(c.Status, unselected)
				if unselected {
					continue
				}
				p := patternOf(c.Name)
				if byPattern[p] == nil {
					byPattern[p] = &tally{}
				}
				byPattern[p].add(c.Status, false)
			}
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-80s %6s %6s %7s %11s\n", "test pattern / test suite", "passed", "failed", "skipped", "interrupted")
	for _, p := range slices.Sorted(maps.Keys(byPattern)) {
		t := byPattern[p]
		fmt.Fprintf(&table, "%-80s %6d %6d %7d %11d\n", p, t.passed, t.failed, t.skipped, t.interrupted)
	}
	if err := os.WriteFile(filepath.Join(reportDir, "summary.txt"), []byte(table.String()), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped by the suite, %d interrupted or timed out (%d specs not selected); per pattern in %s",
		total.passed, total.failed, total.skipped, total.interrupted, total.unselected, filepath.Join(reportDir, "summary.txt")), nil
}
