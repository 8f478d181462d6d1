// Package loglevel maps the ClusterCSIDriver log levels to verbosities and holds the operator's
// own verbosity, which spec.operatorLogLevel changes while the operator runs.
package loglevel

import (
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	operatorv1 "github.com/openshift/api/operator/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Verbosity returns the klog/logr verbosity of a ClusterCSIDriver log level: Normal 2, Debug 4,
// Trace 6, TraceAll 8, as library-go operators and csi-operator use. An empty level is Normal;
// any other value is an error, so a typo is reported rather than silently treated as Normal.
func Verbosity(l operatorv1.LogLevel) (int, error) {
	switch l {
	case "", operatorv1.Normal:
		return 2, nil
	case operatorv1.Debug:
		return 4, nil
	case operatorv1.Trace:
		return 6, nil
	case operatorv1.TraceAll:
		return 8, nil
	}
	return 0, fmt.Errorf("unknown log level %q: use Normal, Debug, Trace or TraceAll", string(l))
}

// Live is the operator's own verbosity. It wraps the zap level the logger was built with, so
// setting it takes effect at once for every logger derived from it.
type Live struct {
	mu    sync.Mutex
	level zap.AtomicLevel
}

// NewLive returns a Live level starting at verbosity v.
func NewLive(v int) *Live {
	return &Live{level: zap.NewAtomicLevelAt(zapcore.Level(-v))}
}

// FromEnabler adopts the level a command-line flag produced when it is an atomic level, so the
// flag sets the starting verbosity and the ClusterCSIDriver can still change it later. Any other
// enabler (or none) gives a Live level at verbosity v.
func FromEnabler(e zapcore.LevelEnabler, v int) *Live {
	if a, ok := e.(zap.AtomicLevel); ok {
		return &Live{level: a}
	}
	return NewLive(v)
}

// Level is the zap level to build the logger with.
func (l *Live) Level() zap.AtomicLevel { return l.level }

// Verbosity returns the current verbosity.
func (l *Live) Verbosity() int { return -int(l.level.Level()) }

// Set changes the verbosity and reports whether it changed.
func (l *Live) Set(v int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	want := zapcore.Level(-v)
	if l.level.Level() == want {
		return false
	}
	l.level.SetLevel(want)
	return true
}

// Follow sets the verbosity from a ClusterCSIDriver's spec.operatorLogLevel and logs a change.
// An unknown level leaves the verbosity as it is (the guest manager reports it); a nil Live
// does nothing.
func (l *Live) Follow(log logr.Logger, level operatorv1.LogLevel) {
	if l == nil {
		return
	}
	v, err := Verbosity(level)
	if err != nil {
		return
	}
	if l.Set(v) {
		log.Info("Changed the operator's verbosity", "verbosity", v)
	}
}
