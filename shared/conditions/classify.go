package conditions

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// maxFailures bounds how many distinct failures one message describes; more would be cut by
// MaxMessageLength mid-sentence anyway.
const maxFailures = 3

// Fold records the Degraded condition degradedType from a step's outcome: False with
// names.ReasonAsExpected when err is nil, else True with the reason and message Classify gives
// for err and doing. It is the one way a manager turns a failed read, apply, delete or status write
// into a condition.
func (s *Set) Fold(degradedType string, err error, doing string) {
	if err == nil {
		s.False(degradedType, names.ReasonAsExpected, "")
		return
	}
	reason, message := Classify(err, doing)
	s.True(degradedType, reason, message)
}

// Classify returns a condition reason and a message that tell the administrator what failed
// and what to do, without the operator's log (which, on HyperShift, lives on the management
// cluster the guest's administrator cannot read).
//
// Every *apply.ObjectError in err (also inside errors.Join) is one failure, described by its
// op, kind, namespace and cluster, and classified by the error it wraps; an error with no
// ObjectError is one failure described by doing, a phrase that starts with a gerund ("Applying
// the CSI controller objects"). Only these and fixed vocabulary (API status reasons, HTTP codes,
// field paths, RBAC resource names from the operator's REST mapper) reach the message: never the
// error's text, an object's name, a value, a resourceVersion or a UID, which would change on
// every retry and may be secret. The full error stays available to the log.
func Classify(err error, doing string) (reason, message string) {
	if err == nil {
		return names.ReasonAsExpected, ""
	}
	var fs []located
	for _, l := range leaves(err) {
		f := located{failure: classify(l, doing)}
		if l.oe != nil {
			f.cluster = l.oe.Cluster
		}
		fs = append(fs, f)
	}
	slices.SortStableFunc(fs, func(a, b located) int {
		return cmp.Or(
			cmp.Compare(slices.Index(failureOrder, a.reason), slices.Index(failureOrder, b.reason)),
			strings.Compare(a.message, b.message))
	})
	fs = slices.CompactFunc(fs, func(a, b located) bool { return a.message == b.message })

	msgs := make([]string, 0, maxFailures+3)
	note := false
	for i, f := range fs {
		if i == maxFailures {
			if n := len(fs) - maxFailures; n == 1 {
				msgs = append(msgs, "1 more failure is left out.")
			} else {
				msgs = append(msgs, fmt.Sprintf("%d more failures are left out.", n))
			}
			break
		}
		msgs = append(msgs, f.message)
		note = note || f.cluster == apply.ClusterManagement && slices.Contains(onCluster, f.reason)
	}
	if note {
		msgs = append(msgs, managementNote)
	}
	msgs = append(msgs, retries)
	return fs[0].reason, strings.Join(msgs, " ")
}

// failure is one classified failure; message does not yet end in retries.
type failure struct {
	reason, message string
}

// located is a failure and the cluster it happened on.
type located struct {
	failure
	cluster apply.Cluster
}

// leaf is one failure in an error tree: an *apply.ObjectError, or a chain that holds none.
type leaf struct {
	err error
	// oe is err as an ObjectError, or nil.
	oe *apply.ObjectError
}

// leaves splits err into the failures it reports: each *apply.ObjectError, each branch of a
// joined error, and a chain that holds neither as a whole. It walks the tree one link at a
// time, where errors.As would stop at the first ObjectError of a joined error.
func leaves(err error) []leaf {
	for e := err; e != nil; {
		if oe, ok := e.(*apply.ObjectError); ok { //nolint:errorlint // the walk itself unwraps
			return []leaf{{err: e, oe: oe}}
		}
		switch u := e.(type) { //nolint:errorlint // the walk itself unwraps
		case interface{ Unwrap() []error }:
			var out []leaf
			for _, c := range u.Unwrap() {
				if c != nil {
					out = append(out, leaves(c)...)
				}
			}
			if len(out) == 0 {
				return []leaf{{err: err}}
			}
			return out
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		default:
			e = nil
		}
	}
	return []leaf{{err: err}}
}

// classify classifies one leaf of the error tree.
func classify(l leaf, doing string) failure {
	s := subject{oe: l.oe, doing: doing}
	err := l.err
	act := upperFirst(s.action())
	api := s.apiServer()

	if meta.IsNoMatchError(err) {
		what := "a kind the operator needs"
		if s.oe != nil && s.oe.GVK.Kind != "" {
			what = s.oe.GVK.Kind + " (" + s.oe.GVK.GroupVersion().String() + ")"
		}
		return failure{ReasonKindNotServed, fmt.Sprintf(
			"%s failed: %s does not serve %s. Install the CustomResourceDefinition or API that provides it.",
			act, api, what)}
	}

	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if f, ok := classifyStatus(s, &st); ok {
			return f
		}
	}

	if why, ok := untrusted(err); ok {
		return failure{ReasonAPIServerUntrusted, fmt.Sprintf(
			"%s failed: the operator does not trust the certificate of %s (%s). Check %s and the API server's serving certificate.",
			act, api, why, s.trustedCA())}
	}
	if timedOut(err) {
		return failure{ReasonAPIServerTimeout, fmt.Sprintf(
			"%s failed: %s did not answer in time. If this persists, check the API server's load and the network to it.",
			act, api)}
	}
	if errors.Is(err, context.Canceled) {
		return failure{ReasonInterrupted, fmt.Sprintf(
			"%s was interrupted: the operator is stopping or lost its leader lease.", act)}
	}
	if why, ok := unreachable(err); ok {
		return failure{ReasonAPIServerUnreachable, fmt.Sprintf(
			"%s failed: the operator cannot reach %s (%s). Check that the API server is running and reachable from the operator's pod.",
			act, api, why)}
	}
	return unexpected(s)
}

// classifyStatus classifies an error the API server answered with a Status.
func classifyStatus(s subject, st *metav1.Status) (failure, bool) {
	act := upperFirst(s.action())
	api := s.apiServer()
	switch {
	case admissionDenied(st):
		return failure{ReasonAdmissionDenied, fmt.Sprintf(
			"%s failed: an admission webhook or policy on %s denied it. Check the validating and mutating webhook configurations and the ValidatingAdmissionPolicies that match %s.",
			act, s.clusterName(), s.objects())}, true

	case st.Reason == metav1.StatusReasonForbidden || st.Code == 403:
		return classifyForbidden(s, st), true

	case st.Reason == metav1.StatusReasonUnauthorized || st.Code == 401:
		return failure{ReasonUnauthorized, fmt.Sprintf(
			"%s failed: %s did not accept the operator's credentials. Check that %s is current and valid.",
			act, api, s.credentials())}, true

	case st.Reason == metav1.StatusReasonNotFound:
		return classifyNotFound(s, st), true

	case st.Reason == metav1.StatusReasonInvalid:
		return failure{ReasonInvalid, fmt.Sprintf(
			"%s failed: %s found it invalid%s. This is a bug in the operator: report it with this message.",
			act, api, fieldPaths(st))}, true

	case st.Reason == metav1.StatusReasonConflict:
		return failure{ReasonConflict, fmt.Sprintf(
			"%s failed: it changed on %s while the operator wrote it. If this persists, another controller keeps changing it.",
			act, s.clusterName())}, true

	case st.Reason == metav1.StatusReasonAlreadyExists:
		return failure{ReasonAlreadyExists, fmt.Sprintf(
			"%s failed: it was created on %s by someone else meanwhile.", act, s.clusterName())}, true

	case st.Reason == metav1.StatusReasonTimeout || st.Reason == metav1.StatusReasonServerTimeout || st.Code == 504:
		return classifyTimeout(s, st), true

	case st.Reason == metav1.StatusReasonTooManyRequests || st.Code == 429:
		return failure{ReasonAPIServerThrottling, fmt.Sprintf(
			"%s failed: %s asked the operator to slow down. If this persists, check the API server's load and its API Priority and Fairness configuration.",
			act, api)}, true

	case st.Reason == metav1.StatusReasonServiceUnavailable || st.Code == 503:
		return failure{ReasonAPIServerUnreachable, fmt.Sprintf(
			"%s failed: %s is unavailable. Check that the API server and its storage are running.",
			act, api)}, true

	case strings.Contains(st.Message, "failed calling webhook"):
		return failure{ReasonAdmissionWebhookFailed, fmt.Sprintf(
			"%s failed: %s could not call an admission webhook. Check that the webhooks that match %s are running and reachable.",
			act, api, s.objects())}, true

	case st.Code >= 500:
		return failure{ReasonAPIServerError, fmt.Sprintf(
			"%s failed: %s answered with an internal error (HTTP %d). If this persists, check the API server and its storage.",
			act, api, st.Code)}, true

	case st.Code >= 400:
		return failure{ReasonRequestRejected, fmt.Sprintf(
			"%s failed: %s rejected the request (HTTP %d). This is a bug in the operator, or an API server version it does not support: report it with this message.",
			act, api, st.Code)}, true
	}
	return failure{}, false
}

// classifyNotFound classifies a NotFound answer: a missing namespace, or a missing object or kind.
func classifyNotFound(s subject, st *metav1.Status) failure {
	act := upperFirst(s.action())
	if st.Details != nil && st.Details.Group == "" && st.Details.Kind == "namespaces" {
		return failure{ReasonNamespaceNotFound, fmt.Sprintf(
			"%s failed: %s does not exist on %s. Create it, or find out why what should create it has not.",
			act, namespaceName(s), s.clusterName())}
	}
	return failure{ReasonNotFound, fmt.Sprintf(
		"%s failed: it was not found on %s. It was deleted meanwhile, or %s does not serve its kind.",
		act, s.clusterName(), s.apiServer())}
}

// classifyTimeout classifies a timeout: a watch that never filled, or a slow API server.
func classifyTimeout(s subject, st *metav1.Status) failure {
	act := upperFirst(s.action())
	api := s.apiServer()
	if s.oe != nil && s.oe.Op == apply.OpRead && strings.Contains(st.Message, "Informer to sync") {
		// controller-runtime's cache answers a read of a kind whose watch never filled with
		// this timeout: most often RBAC forbids the list or watch.
		return failure{ReasonWatchNotSynced, fmt.Sprintf(
			"%s failed: the operator's watch of %s %s on %s did not fill in time. Check that %s has the RBAC verbs list and watch on %s %s, and that %s is reachable.",
			act, s.kind(), s.scope(), s.clusterName(), s.identity(), s.resource(nil), s.scope(), api)}
	}
	return failure{ReasonAPIServerTimeout, fmt.Sprintf(
		"%s failed: %s did not answer in time. If this persists, check the API server's load and the network to it.",
		act, api)}
}

// unexpected describes an error of no known class.
func unexpected(s subject) failure {
	where := ""
	if s.cluster() != apply.ClusterUnnamed {
		where = " (on a hosted cluster, the management cluster's administrators can read it)"
	}
	return failure{ReasonUnexpectedError, fmt.Sprintf(
		"%s failed with an unexpected error. If this persists, report it to the operator's maintainers with this message and the operator's log%s.",
		upperFirst(s.action()), where)}
}

// classifyForbidden classifies a Forbidden answer: a terminating namespace, an RBAC escalation
// refusal, or a missing permission.
func classifyForbidden(s subject, st *metav1.Status) failure {
	act := upperFirst(s.action())
	api := s.apiServer()
	if hasCause(st, corev1.NamespaceTerminatingCause) {
		return failure{ReasonNamespaceTerminating, fmt.Sprintf(
			"%s failed: %s on %s is being deleted, and nothing can be created in it until the deletion finishes.",
			act, namespaceName(s), s.clusterName())}
	}
	// RBAC's escalation check refuses a role or binding that grants a rule its writer does not
	// hold (without escalate or bind on the role): the verbs on the binding are not what is
	// missing, so asking for them would send the administrator the wrong way.
	if strings.Contains(st.Message, rbacEscalation) {
		return failure{ReasonForbidden, fmt.Sprintf(
			"%s failed: %s refused it as an escalation of privilege. %s may grant, in a role or a binding, only rules it holds itself, "+
				"unless it has the RBAC verb bind (for a binding) or escalate (for a role) on the role: "+
				"grant it the rules of the role it writes or binds, or bind on that role.",
			act, api, upperFirst(s.identity()))}
	}
	if s.oe == nil {
		on := ""
		if r := s.resource(st); r != "" {
			on = " on " + r
		}
		return failure{ReasonForbidden, fmt.Sprintf(
			"%s failed: %s forbade it. %s lacks an RBAC permission%s; compare its roles with the operator's install manifests.",
			act, api, upperFirst(s.identity()), on)}
	}
	grant := "a Role and RoleBinding"
	if s.oe.Namespace == "" {
		grant = "a ClusterRole and ClusterRoleBinding"
	}
	return failure{ReasonForbidden, fmt.Sprintf(
		"%s failed: %s forbade it. %s needs the RBAC verbs %s on %s %s: grant them with %s.",
		act, api, upperFirst(s.identity()), s.verbs(), s.resource(st), s.scope(), grant)}
}

// rbacEscalation is how the API server's RBAC storage words an escalation refusal
// (k8s.io/kubernetes pkg/registry/rbac/validation, ConfirmNoEscalation).
const rbacEscalation = "is attempting to grant RBAC permissions not currently held"

// admissionDenied reports whether the API server's answer is a denial by an admission webhook
// or a ValidatingAdmissionPolicy. The message is only searched, never quoted: a webhook's text
// may hold anything.
func admissionDenied(st *metav1.Status) bool {
	return strings.Contains(st.Message, "admission webhook") && strings.Contains(st.Message, "denied the request") ||
		strings.Contains(st.Message, "ValidatingAdmissionPolicy")
}

func hasCause(st *metav1.Status, t metav1.CauseType) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == t {
			return true
		}
	}
	return false
}

// untrusted reports whether err is a failed TLS verification of the API server, and why, in
// fixed words.
func untrusted(err error) (string, bool) {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return "signed by an unknown authority", true
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return "expired or not yet valid", true
		}
		return "not valid", true
	case errors.As(err, &host):
		return "not valid for the API server's address", true
	case errors.As(err, &verify):
		return "not verifiable", true
	case errors.As(err, &header), errors.As(err, &alert):
		return "the TLS handshake failed", true
	}
	return "", false
}

// timedOut reports whether err is a deadline that passed, in the context or on the network.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unreachable reports whether err is a failure to reach the API server over the network, and
// why, in fixed words. Addresses and host names are left out.
func unreachable(err error) (string, bool) {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset", true
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable", true
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable", true
	case errors.As(err, &dns):
		return "its name does not resolve", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed", true
	case errors.As(err, &op):
		return "network error", true
	}
	return "", false
}
