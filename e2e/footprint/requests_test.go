//go:build e2e

package footprint

import (
	"strings"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// userAgentPrefix starts the user agent of the managers' requests:
// cinder-csi-operator-<manager>/<version>.
const userAgentPrefix = "cinder-csi-operator-"

// leaderElectionSuffix ends the user agent of the leader election's requests. Its client's user
// agent is client-go's default (named after the binary: cinder-csi-operator/<version> (...))
// plus this suffix, not the manager's; nothing else in these clusters elects a leader (the
// clusters' controller-manager and scheduler run without), so it marks the operator's lease
// requests.
const leaderElectionSuffix = "/leader-election"

// fromOperator reports whether a request with this user agent was the operator's.
func fromOperator(userAgent string) bool {
	return strings.HasPrefix(userAgent, userAgentPrefix) || strings.HasSuffix(userAgent, leaderElectionSuffix)
}

// request is one request of the operator, as an API server's audit log records it.
type request struct {
	// cluster is "management" or "guest".
	cluster string
	localcluster.AuditEvent
}

// sender names who sent the request: the manager of its user agent ("controlplane", "guest"),
// or "leader-election".
func (r request) sender() string {
	if strings.HasSuffix(r.UserAgent, leaderElectionSuffix) {
		return "leader-election"
	}
	s, _, _ := strings.Cut(strings.TrimPrefix(r.UserAgent, userAgentPrefix), "/")
	return s
}

// watch reports whether the request starts a watch; the audit log records a watch when it starts
// (see localcluster.AuditLog), so a watch a reflector restarts is one more of them.
func (r request) watch() bool { return r.Verb == "watch" }

// requests follows the operator's requests in both clusters' audit logs.
type requests struct {
	// namespace holds the leader election lease, on the management cluster.
	namespace string
	nodeNames map[string]bool
	logs      []clusterLog
	// seen are the operator's requests read so far.
	seen []request
	// daemonSetStatus are when the DaemonSet controller wrote the node DaemonSet's status:
	// every write is an event the guest manager's watch receives, which its work queue
	// coalesces into fewer reconciles.
	daemonSetStatus []time.Time
}

// clusterLog is the audit log of one cluster.
type clusterLog struct {
	cluster string
	log     *localcluster.AuditLog
}

// newRequests follows the environment's audit logs from their beginning until the benchmark
// ends. nodeNames are the clusters' node names.
func newRequests(b *testing.B, e *env.Env, nodeNames map[string]bool) *requests {
	q := &requests{namespace: e.Namespace, nodeNames: nodeNames}
	for _, c := range []*localcluster.Cluster{e.Mgmt, e.Guest} {
		l := localcluster.OpenAuditLog(c.AuditLogPath())
		q.logs = append(q.logs, clusterLog{cluster: c.Name(), log: l})
		b.Cleanup(func() { _ = l.Close() })
	}
	return q
}

// poll reads what the audit logs recorded since the last poll and keeps the operator's requests.
func (q *requests) poll() error {
	for _, l := range q.logs {
		events, err := l.log.Next()
		if err != nil {
			return err
		}
		for _, ev := range events {
			ref := ev.ObjectRef
			switch {
			case fromOperator(ev.UserAgent):
				q.seen = append(q.seen, request{cluster: l.cluster, AuditEvent: ev})
			case l.cluster == "guest" && ev.Mutating() && ref.Resource == "daemonsets" && ref.Subresource == "status" &&
				ref.Namespace == names.GuestNamespace && ref.Name == names.NodeDaemonSet:
				q.daemonSetStatus = append(q.daemonSetStatus, ev.RequestReceivedTimestamp)
			}
		}
	}
	return nil
}

// lease reports whether the request is about the leader election lease.
func (q *requests) lease(r request) bool {
	ref := r.ObjectRef
	return r.cluster == "management" && ref.Resource == "leases" && ref.Namespace == q.namespace &&
		ref.Name == names.LeaderElectionControlPlane
}

// renewal reports whether the request is a write of the leader election lease: its renewals,
// and its takeover at the start, are updates.
func (q *requests) renewal(r request) bool { return q.lease(r) && r.Verb == "update" }

// lastWrite returns when the operator last sent a mutating request other than about its lease.
func (q *requests) lastWrite() time.Time {
	var last time.Time
	for _, r := range q.seen {
		if r.Mutating() && !q.lease(r) && r.RequestReceivedTimestamp.After(last) {
			last = r.RequestReceivedTimestamp
		}
	}
	return last
}

// between returns the requests received in [from, to).
func (q *requests) between(from, to time.Time) []request {
	var out []request
	for _, r := range q.seen {
		if at := r.RequestReceivedTimestamp; !at.Before(from) && at.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// daemonSetStatusWrites returns how many times the node DaemonSet's status was written in
// [from, to).
func (q *requests) daemonSetStatusWrites(from, to time.Time) int {
	n := 0
	for _, at := range q.daemonSetStatus {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// inWindow returns when the lease updates received in [from, to) were received, and every
// other request.
func (q *requests) inWindow(from, to time.Time) (leaseWrites []time.Time, other []request) {
	for _, r := range q.between(from, to) {
		if q.renewal(r) {
			leaseWrites = append(leaseWrites, r.RequestReceivedTimestamp)
			continue
		}
		other = append(other, r)
	}
	return leaseWrites, other
}

// perNode returns the requests received in [from, to) whose cost grows with the guest's size:
// any request about nodes or pods, or naming a node.
func (q *requests) perNode(from, to time.Time) []request {
	var out []request
	for _, r := range q.between(from, to) {
		ref := r.ObjectRef
		if ref.Resource == "nodes" || ref.Resource == "pods" || q.nodeNames[ref.Name] {
			out = append(out, r)
		}
	}
	return out
}

// claims returns the requests received in [from, to) about claims: the operator reads them only
// while it keeps a per-zone class for them, from its cache, so at rest the only ones expected
// are the restarts of that watch.
func (q *requests) claims(from, to time.Time) []request {
	var out []request
	for _, r := range q.between(from, to) {
		if r.ObjectRef.Resource == "persistentvolumeclaims" {
			out = append(out, r)
		}
	}
	return out
}
