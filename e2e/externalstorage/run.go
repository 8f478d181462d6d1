package externalstorage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// SuiteOptions say what to run of the suite and where its files go; everything but the
// environment, so that a run can be prepared before the environment starts.
type SuiteOptions struct {
	// SuiteDir holds e2e.test, agnhost and, for Procs > 1, ginkgo (make external-storage-suite).
	SuiteDir string
	// Kubectl is the kubectl binary the suite runs; its directory goes first on the suite's PATH.
	Kubectl string
	// ImageDir is where the suite's image tars are written.
	ImageDir string
	// Dir is the run's directory: the driver definition and registry list the suite reads, its
	// output (e2e.log) and its JUnit report (report/, replaced by every run). Created if missing.
	Dir string
	// Driver is the driver definition: TestDriver, RealCloudTestDriver or one of the caller's.
	Driver []byte
	// Focus and Skip are ginkgo's regular expressions; Focus defaults to External.Storage.
	Focus, Skip string
	// Timeout is the suite's own (-ginkgo.timeout); two hours when zero.
	Timeout time.Duration
	// Procs is the number of parallel suite processes; more than one runs the suite through
	// the ginkgo CLI next to e2e.test.
	Procs int
	// Seed is ginkgo's random seed, fixed so that a run's spec order can be repeated; zero is
	// taken as 1.
	Seed int
	// Args are more e2e.test arguments.
	Args []string
	// Output receives the suite's output (which Dir/e2e.log keeps too); os.Stdout when nil.
	Output io.Writer
	// Logf receives progress; printed to Output when nil.
	Logf func(format string, args ...any)
}

// ExitError is a suite that ran and failed: Code is e2e.test's (or ginkgo's) exit status.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("the suite failed (exit status %d)", e.Code) }

// Suite is a run of the suite prepared with Prepare: its files written and its images built.
type Suite struct {
	opts             SuiteOptions
	e2eTest, agnhost string
	driver, repoList string
	images           []string
}

// Prepare checks the suite's binaries, writes the driver definition and the registry list into
// opts.Dir and builds the images the suite's pods run (from the references e2e.test names), all
// of which needs no environment. Paths are made absolute.
func Prepare(ctx context.Context, opts SuiteOptions) (*Suite, error) {
	if opts.Focus == "" {
		opts.Focus = "External.Storage"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Hour
	}
	if opts.Procs < 1 {
		opts.Procs = 1
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Output == nil {
		opts.Output = os.Stdout
	}
	if opts.Logf == nil {
		out := opts.Output
		opts.Logf = func(f string, a ...any) { fmt.Fprintf(out, f+"\n", a...) }
	}
	if len(opts.Driver) == 0 {
		return nil, errors.New("no driver definition")
	}
	for _, p := range []*string{&opts.SuiteDir, &opts.Kubectl, &opts.ImageDir, &opts.Dir} {
		a, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = a
	}
	s := &Suite{
		opts:     opts,
		e2eTest:  filepath.Join(opts.SuiteDir, "e2e.test"),
		agnhost:  filepath.Join(opts.SuiteDir, "agnhost"),
		driver:   filepath.Join(opts.Dir, "testdriver.yaml"),
		repoList: filepath.Join(opts.Dir, "repo-list.yaml"),
	}
	need := []string{s.e2eTest, s.agnhost, opts.Kubectl}
	if opts.Procs > 1 {
		need = append(need, s.ginkgo())
	}
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w (make external-storage-suite operand-binaries)", err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.driver, opts.Driver, 0o644); err != nil {
		return nil, fmt.Errorf("writing the driver definition: %w", err)
	}
	if err := WriteRepoList(s.repoList); err != nil {
		return nil, err
	}
	refs, err := SuiteImages(ctx, s.e2eTest, s.repoList, s.agnhost)
	if err != nil {
		return nil, err
	}
	if s.images, err = BuildImages(opts.ImageDir, refs, s.agnhost); err != nil {
		return nil, err
	}
	opts.Logf("Suite images: %s, %s, %s", refs[BusyBox], refs[Agnhost], refs[GlibcDNSTesting])
	return s, nil
}

// Run prepares the suite (Prepare) and runs it against e (Suite.Run).
func Run(ctx context.Context, e *env.Env, opts SuiteOptions) (Summary, error) {
	s, err := Prepare(ctx, opts)
	if err != nil {
		return Summary{}, err
	}
	return s.Run(ctx, e)
}

// ReportDir is where Run writes the JUnit report.
func (s *Suite) ReportDir() string { return filepath.Join(s.opts.Dir, "report") }

func (s *Suite) ginkgo() string { return filepath.Join(s.opts.SuiteDir, "ginkgo") }

// Run imports the suite's images into the guest cluster's real node, where its pods run, and
// runs the suite against the guest cluster with the driver deployed there. It returns the
// summary of the JUnit report, and an *ExitError when the suite ran and failed (the summary
// then says what failed). Cancelled, the suite gets a SIGINT and a minute to delete its
// namespaces before it is killed.
func (s *Suite) Run(ctx context.Context, e *env.Env) (Summary, error) {
	if e.Real == nil {
		return Summary{}, errors.New("the suite needs real nodes: its pods mount the volumes")
	}
	if err := e.Real.GuestNode.ImportImages(ctx, s.images...); err != nil {
		return Summary{}, fmt.Errorf("importing the suite's images: %w", err)
	}
	reportDir := s.ReportDir()
	if err := os.RemoveAll(reportDir); err != nil {
		return Summary{}, err
	}
	log, err := os.Create(filepath.Join(s.opts.Dir, "e2e.log"))
	if err != nil {
		return Summary{}, err
	}
	defer func() { _ = log.Close() }()
	bin, args := s.command(e.Guest.KubeconfigPath())
	s.opts.Logf("Running: %s %s", bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = io.MultiWriter(s.opts.Output, log)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(s.opts.Kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Cancelled, the suite gets time to clean up its namespaces before the environment goes.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	// ginkgo runs e2e.test workers of its own: in a process group of their own, they can all be
	// ended at once. An interrupted test binary cancels no context (procs.OnInterrupt), so there
	// the group is killed from the interrupt: without it, a Ctrl-C of make test left ginkgo and
	// its workers running against an environment that was gone. ginkgo also dies with the
	// binary (Pdeathsig).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	runErr := cmd.Start()
	if runErr == nil {
		pgid := cmd.Process.Pid
		forget := func() {}
		if testing.Testing() {
			forget = procs.OnInterrupt("the upstream suite (process group "+strconv.Itoa(pgid)+")", func() {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			})
		}
		runErr = cmd.Wait()
		forget()
		// Workers that outlived ginkgo would hold the environment's files open.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	took := time.Since(start)
	sum, sumErr := Summarize(reportDir)
	sum.Took, sum.ReportDir = took, reportDir
	var ee *exec.ExitError
	switch {
	case errors.As(runErr, &ee):
		code := ee.ExitCode()
		if code <= 0 { // killed by a signal
			code = 1
		}
		if sumErr != nil {
			s.opts.Logf("No JUnit report: %v", sumErr)
		}
		return sum, &ExitError{Code: code}
	case runErr != nil:
		return sum, fmt.Errorf("running %s: %w", bin, runErr)
	case sumErr != nil:
		// A suite that passed without a report ran nothing that can be counted on.
		return sum, fmt.Errorf("the suite passed but left no report: %w", sumErr)
	}
	return sum, nil
}

// command is the suite's command line against the cluster of kubeconfig.
func (s *Suite) command(kubeconfig string) (string, []string) {
	o := s.opts
	suiteArgs := []string{
		"-kubeconfig=" + kubeconfig,
		"-storage.testdriver=" + s.driver,
		"-kube-test-repo-list=" + s.repoList,
		"-kubectl-path=" + o.Kubectl,
		"-report-dir=" + s.ReportDir(),
	}
	suiteArgs = append(suiteArgs, o.Args...)
	ginkgoArgs := []string{
		"focus=" + o.Focus,
		"timeout=" + o.Timeout.String(),
		"seed=" + strconv.Itoa(o.Seed),
		"v",
		"no-color",
	}
	if o.Skip != "" {
		ginkgoArgs = append(ginkgoArgs, "skip="+o.Skip)
	}
	// One process: e2e.test itself, with ginkgo's flags prefixed. Several: the ginkgo CLI starts
	// them and merges their reports; the suite's ReportAfterSuite writes one JUnit file.
	if o.Procs == 1 {
		args := suiteArgs
		for _, a := range ginkgoArgs {
			args = append(args, "-ginkgo."+a)
		}
		return s.e2eTest, args
	}
	args := []string{"--procs=" + strconv.Itoa(o.Procs)}
	for _, a := range ginkgoArgs {
		args = append(args, "--"+a)
	}
	args = append(append(append(args, s.e2eTest), "--"), suiteArgs...)
	return s.ginkgo(), args
}
