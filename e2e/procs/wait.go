package procs

import (
	"context"
	"fmt"
	"time"
)

// Wait describes a wait for a condition while child processes run: a process that ends during
// the wait ends it at once with that process's log, rather than leaving a caller to time out.
type Wait struct {
	// What is awaited, as in "waiting for <What>".
	What string
	// Interval is how often the condition is checked.
	Interval time.Duration
	// Alive, when set, returns an error once a process the condition depends on has ended
	// (FirstExit of them, typically).
	Alive func() error
	// Last, when set, tells why the condition was last false; a timeout quotes it.
	Last func() error
	// Log, when set, is a log file whose end a timeout quotes.
	Log string
}

// Poll calls cond every w.Interval until it returns true or an error, w.Alive reports an exit,
// or ctx ends; the error then names what was awaited and, when w says how, why it did not
// happen.
func Poll(ctx context.Context, w Wait, cond func() (bool, error)) error {
	ticker := time.NewTicker(w.Interval)
	defer ticker.Stop()
	for {
		if w.Alive != nil {
			if err := w.Alive(); err != nil {
				return fmt.Errorf("waiting for %s: %w", w.What, err)
			}
		}
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", w.What, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return w.timeout(ctx.Err())
		case <-ticker.C:
		}
	}
}

// timeout describes a wait that ctx ended with err.
func (w Wait) timeout(err error) error {
	err = fmt.Errorf("waiting for %s: %w", w.What, err)
	if w.Last != nil {
		err = fmt.Errorf("%w (last: %w)", err, w.Last())
	}
	if w.Log != "" {
		err = fmt.Errorf("%w; last lines of %s:\n%s", err, w.Log, LogTail(w.Log, TailLines))
	}
	return err
}
