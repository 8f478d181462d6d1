package env

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// ReconcileCounter counts the reconciles each controller of one in-process operator finished.
//
// controller-runtime's reconcile metrics live in one process-wide registry and are labelled by
// controller name only, so with several operators in one test binary (parallel tests) they add
// up across operators. The counter instead reads the line controller-runtime logs at the end of
// every reconcile through this operator's own logger, which carries the controller name.
type ReconcileCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Count returns how many reconciles of the named controller ("controlplane", "guest") finished.
func (c *ReconcileCounter) Count(controller string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[controller]
}

func (c *ReconcileCounter) add(controller string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[controller]++
}

// Wrap returns a logger that writes what l writes and counts finished reconciles.
func (c *ReconcileCounter) Wrap(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		// One more frame (countingSink's) between the caller and the real sink.
		sink = cd.WithCallDepth(1)
	}
	return logr.New(&countingSink{sink: sink, counter: c})
}

// reconcileDoneLevel is the verbosity of controller-runtime's end-of-reconcile lines: they are
// counted whatever the operator's verbosity, and written only when the real sink wants them.
const reconcileDoneLevel = 5

// countingSink passes everything to sink and counts the end-of-reconcile lines of the controller
// named in its "controller" value.
type countingSink struct {
	sink       logr.LogSink
	counter    *ReconcileCounter
	controller string
}

func (s *countingSink) Init(logr.RuntimeInfo) {}

func (s *countingSink) Enabled(level int) bool {
	return level == reconcileDoneLevel || s.sink.Enabled(level)
}

func (s *countingSink) Info(level int, msg string, kv ...any) {
	// controller-runtime ends a reconcile with "Reconcile successful" or "Reconcile done,
	// requeueing[ after <d>]" (or the "Reconciler error" of Error below).
	if level == reconcileDoneLevel && s.controller != "" &&
		(msg == "Reconcile successful" || strings.HasPrefix(msg, "Reconcile done, requeueing")) {
		s.counter.add(s.controller)
	}
	if s.sink.Enabled(level) {
		s.sink.Info(level, msg, kv...)
	}
}

func (s *countingSink) Error(err error, msg string, kv ...any) {
	if msg == "Reconciler error" && s.controller != "" {
		s.counter.add(s.controller)
	}
	s.sink.Error(err, msg, kv...)
}

func (s *countingSink) WithValues(kv ...any) logr.LogSink {
	out := *s
	out.sink = s.sink.WithValues(kv...)
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok && k == "controller" {
			if v, ok := kv[i+1].(string); ok {
				out.controller = v
			}
		}
	}
	return &out
}

func (s *countingSink) WithName(name string) logr.LogSink {
	out := *s
	out.sink = s.sink.WithName(name)
	return &out
}
