package localcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event (one line of an API server's audit log)
// that tests and benchmarks read.
type AuditEvent struct {
	AuditID          string
	Stage            string
	Verb             string
	UserAgent        string
	User             struct{ Username string }
	ImpersonatedUser struct{ Username string }
	ObjectRef        struct {
		Resource, Namespace, Name, APIGroup, Subresource string
	}
	// ResponseStatus is the answer's status; Code 403 for a request the authorizer denied.
	ResponseStatus           struct{ Code int }
	RequestReceivedTimestamp time.Time
}

// Mutating reports whether the request could change an object.
func (e AuditEvent) Mutating() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// String formats the event for failure messages and reports: when, verb, resource and
// namespace/name, and the user agent.
func (e AuditEvent) String() string {
	ref := e.ObjectRef
	resource := ref.Resource
	if ref.Subresource != "" {
		resource += "/" + ref.Subresource
	}
	return e.RequestReceivedTimestamp.Format("15:04:05.000") + " " + e.Verb + " " + resource + " " +
		ref.Namespace + "/" + ref.Name + " (" + e.UserAgent + ")"
}

// ReadAuditLog reads the whole audit log of a cluster started with Options.Audit, one event per
// request (see AuditLog.Next).
func ReadAuditLog(path string) ([]AuditEvent, error) {
	l := OpenAuditLog(path)
	defer func() { _ = l.Close() }()
	return l.Next()
}

// AuditLog reads an API server's audit log as it grows, so that a long run can look at its
// requests as they happen without reading the whole log again each time.
//
// The API server rotates the log at 100 MiB (the file is renamed, a new one created). The open
// file is kept across calls, so Next reads the rest of a renamed file before it moves on to the
// new one: nothing is lost as long as Next is called once per rotation or more often.
type AuditLog struct {
	path string
	f    *os.File
	// partial is the start of a line the API server has not finished writing yet.
	partial []byte
	// started holds the audit IDs of requests whose ResponseStarted event was returned.
	started map[string]bool
}

// OpenAuditLog returns a reader of the audit log at path, from its beginning. The file is
// opened by the first Next.
func OpenAuditLog(path string) *AuditLog {
	return &AuditLog{path: path, started: map[string]bool{}}
}

// Next returns the requests logged since the previous call, one event per request: a watch (or
// any other long-running request) is logged when its response starts and again when it ends, and
// Next returns it once, when it starts; every other request is logged once, when it completes
// (the policy omits the RequestReceived stage).
func (l *AuditLog) Next() ([]AuditEvent, error) {
	if l.path == "" {
		return nil, errors.New("the cluster has no audit log; start it with Audit")
	}
	if l.f == nil {
		f, err := os.Open(l.path)
		if err != nil {
			return nil, err
		}
		l.f = f
	}
	events, err := l.drain()
	if err != nil {
		return nil, err
	}
	// A rotation renames the file the API server wrote and creates a new one at path: what
	// was written to the old file before the rename has been drained, read the rest of it
	// (written between the drain and the rename), then follow the new file.
	open, err := l.f.Stat()
	if err != nil {
		return nil, err
	}
	current, err := os.Stat(l.path)
	if err != nil {
		return nil, err
	}
	if !os.SameFile(open, current) {
		rest, err := l.drain()
		if err != nil {
			return nil, err
		}
		events = append(events, rest...)
		_ = l.f.Close()
		l.f, l.partial = nil, nil
		more, err := l.Next()
		if err != nil {
			return nil, err
		}
		events = append(events, more...)
	}
	return events, nil
}

// drain reads the open file to its end and decodes every complete line.
func (l *AuditLog) drain() ([]AuditEvent, error) {
	data, err := io.ReadAll(l.f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", l.path, err)
	}
	data = append(l.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	l.partial = bytes.Clone(data[end+1:])
	var events []AuditEvent
	for line := range bytes.SplitSeq(data[:end+1], []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("decoding an event of %s: %w", l.path, err)
		}
		switch {
		case e.Stage == "ResponseStarted":
			l.started[e.AuditID] = true
		case l.started[e.AuditID]:
			// The end of a request returned when it started.
			delete(l.started, e.AuditID)
			continue
		}
		events = append(events, e)
	}
	return events, nil
}

// Close closes the log file.
func (l *AuditLog) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
