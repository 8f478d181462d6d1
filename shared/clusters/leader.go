package clusters

import (
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// newLeaderLock builds the Lease lock named o.LeaderElectionID in o.LeaderElectionNamespace of
// the cluster cfg points at, held under o.LeaderElectionIdentity, and the recorder of its Events.
//
// controller-runtime builds the lock itself only with an identity of its own choosing (the host
// name plus a random UUID), new at every start: a container the kubelet restarts after a crash
// then finds the lease held by its previous identity and waits LeaseDuration for it to expire.
// With a stable identity client-go's leader elector sees its own name on the lease and renews it
// at once.
func newLeaderLock(cfg *rest.Config, scheme *runtime.Scheme, o Options) (resourcelock.Interface, *leaderEvents, error) {
	identity := o.LeaderElectionIdentity
	if identity == "" {
		var err error
		if identity, err = fallbackIdentity(); err != nil {
			return nil, nil, err
		}
	}
	// The client settings controller-runtime gives its own lock: a user agent ending in
	// "/leader-election", and a timeout below RenewDeadline so that one hung request cannot
	// cost the lease.
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(RenewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	// The Events ("<identity> became leader") go to the lease's cluster and namespace, next to
	// the Lease they are about, as with controller-runtime's own lock.
	events := &leaderEvents{sink: cs.CoreV1().Events(""), scheme: scheme, component: identity}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaderElectionNamespace, o.LeaderElectionID,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: events})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the leader election lock: %w", err)
	}
	return lock, events, nil
}

// fallbackIdentity is the identity of a process that runs outside a pod, for example a developer's
// run: the host name plus a random suffix, as controller-runtime chooses it. A fixed name would
// let two such processes on one host both believe they lead.
func fallbackIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("choosing a leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// leaderEvents records the lock's Events while the manager runs and drops them otherwise, so
// that a manager that is built but never started (a failed setup, a test) leaves no broadcaster
// goroutine behind.
type leaderEvents struct {
	sink      typedcorev1.EventInterface
	scheme    *runtime.Scheme
	component string

	mu       sync.Mutex
	recorder record.EventRecorder
}

// start starts recording to the API server and returns the function that stops it again.
func (e *leaderEvents) start() (stop func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.sink})
	e.mu.Lock()
	e.recorder = b.NewRecorder(e.scheme, corev1.EventSource{Component: e.component})
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.recorder = nil
		e.mu.Unlock()
		b.Shutdown()
	}
}

func (e *leaderEvents) current() record.EventRecorder {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorder
}

// Event implements record.EventRecorder.
func (e *leaderEvents) Event(object runtime.Object, eventtype, reason, message string) {
	if r := e.current(); r != nil {
		r.Event(object, eventtype, reason, message)
	}
}

// Eventf implements record.EventRecorder.
func (e *leaderEvents) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r := e.current(); r != nil {
		r.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// AnnotatedEventf implements record.EventRecorder.
func (e *leaderEvents) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r := e.current(); r != nil {
		r.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
