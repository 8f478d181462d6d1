package env

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
)

// The environments of one process share its real-node run (a process can hold only one, and
// the host-wide lock would keep a second from ever starting): the first environment on real
// nodes opens it, the last to stop closes it. Each environment gets cluster numbers of its own in
// the run's address plan, so that several run side by side: their nodes, API server addresses
// and fake OpenStacks differ, and each node that runs the CSI node plugin sees its own
// /var/lib/kubelet (realnode.NodeOptions.RootDir). The plan's last cluster number is kept for the
// real cloud's address (RealCloudIP), which no environment's cluster may take.
var shared struct {
	mu       sync.Mutex
	run      *realnode.Run
	users    int
	clusters [realnode.MaxClusters + 1]bool
}

// realCloudCluster is the plan's cluster number whose OpenStack address is the real cloud's.
const realCloudCluster = realnode.MaxClusters

// acquireRun returns the process's real-node run, opening it if no environment holds it, and
// count clusters free cluster numbers reserved for the caller, who gives both back with
// releaseRun.
func acquireRun(ctx context.Context, count int) (*realnode.Run, []int, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var numbers []int
	for n := 1; n < realCloudCluster && len(numbers) < count; n++ {
		if !shared.clusters[n] {
			numbers = append(numbers, n)
		}
	}
	if len(numbers) < count {
		return nil, nil, fmt.Errorf("no %d free cluster numbers in the real-node address plan: %d environments run", count, shared.users)
	}
	if shared.run == nil {
		// The run outlives the environment that opened it, so it logs on its own rather than
		// through one environment's (a test's) log.
		run, err := realnode.NewRun(ctx, realnode.RunOptions{Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "realnode: "+format+"\n", args...)
		}})
		if err != nil {
			return nil, nil, err
		}
		shared.run = run
	}
	for _, n := range numbers {
		shared.clusters[n] = true
	}
	shared.users++
	return shared.run, numbers, nil
}

// releaseRun gives cluster numbers back and closes the run when no environment holds it any
// more. The caller has stopped its nodes.
func releaseRun(numbers []int) error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for _, n := range numbers {
		shared.clusters[n] = false
	}
	shared.users--
	if shared.users > 0 {
		return nil
	}
	run := shared.run
	shared.run = nil
	return run.Close()
}
