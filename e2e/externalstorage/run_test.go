package externalstorage

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func TestSuiteCommand(t *testing.T) {
	t.Parallel()
	opts := SuiteOptions{SuiteDir: "/s", Kubectl: "/k/kubectl", Dir: "/run", Focus: "F", Timeout: time.Hour, Seed: 1, Args: []string{"-extra"}}
	for _, tt := range []struct {
		name     string
		procs    int
		skip     string
		wantBin  string
		wantArgs []string
	}{
		{name: "When one process runs the suite, it should run e2e.test with ginkgo's flags prefixed",
			procs: 1, skip: "S", wantBin: "/s/e2e.test",
			wantArgs: []string{"-kubeconfig=/kc", "-storage.testdriver=/run/testdriver.yaml", "-kube-test-repo-list=/run/repo-list.yaml",
				"-kubectl-path=/k/kubectl", "-report-dir=/run/report", "-extra",
				"-ginkgo.focus=F", "-ginkgo.timeout=1h0m0s", "-ginkgo.seed=1", "-ginkgo.v", "-ginkgo.no-color", "-ginkgo.skip=S"}},
		{name: "When several processes run the suite, it should run it through the ginkgo CLI",
			procs: 3, wantBin: "/s/ginkgo",
			wantArgs: []string{"--procs=3", "--focus=F", "--timeout=1h0m0s", "--seed=1", "--v", "--no-color", "/s/e2e.test", "--",
				"-kubeconfig=/kc", "-storage.testdriver=/run/testdriver.yaml", "-kube-test-repo-list=/run/repo-list.yaml",
				"-kubectl-path=/k/kubectl", "-report-dir=/run/report", "-extra"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := opts
			o.Procs, o.Skip = tt.procs, tt.skip
			s := &Suite{opts: o, e2eTest: "/s/e2e.test", driver: "/run/testdriver.yaml", repoList: "/run/repo-list.yaml"}
			bin, args := s.command("/kc")
			g := NewWithT(t)
			g.Expect(bin).To(Equal(tt.wantBin))
			g.Expect(args).To(Equal(tt.wantArgs))
		})
	}
}

// driverDefinition is the part of a driver definition the test below compares.
type driverDefinition struct {
	DriverInfo struct {
		Name         string          `json:"Name"`
		Capabilities map[string]bool `json:"Capabilities"`
	} `json:"DriverInfo"`
}

// TestDriverDefinitions checks that both definitions decode and that the real cloud's definition
// claims no capability the fake's lacks.
func TestDriverDefinitions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	var fake, onReal driverDefinition
	g.Expect(yaml.Unmarshal(TestDriver, &fake)).To(Succeed())
	g.Expect(yaml.Unmarshal(RealCloudTestDriver, &onReal)).To(Succeed())
	g.Expect(onReal.DriverInfo.Name).To(Equal(fake.DriverInfo.Name))
	// The real cloud's backend does no more than the fake: every capability it claims, the fake
	// claims too, and both list the same ones.
	g.Expect(onReal.DriverInfo.Capabilities).To(HaveLen(len(fake.DriverInfo.Capabilities)))
	for name, on := range onReal.DriverInfo.Capabilities {
		g.Expect(fake.DriverInfo.Capabilities).To(HaveKey(name))
		if on {
			g.Expect(fake.DriverInfo.Capabilities[name]).To(BeTrue(), "capability %s", name)
		}
	}
	g.Expect(onReal.DriverInfo.Capabilities).To(HaveKeyWithValue("onlineExpansion", false))
}
