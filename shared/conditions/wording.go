package conditions

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// maxFieldPaths bounds the field paths an Invalid message lists.
const maxFieldPaths = 5

// retries ends every message Classify returns: the reconcile returns its error, so
// controller-runtime retries it with backoff.
const retries = "The operator retries."

// onCluster are the reasons whose remedy is on the cluster that failed, rather than a bug
// report or patience: on the management cluster, only its administrators can apply it.
var onCluster = []string{
	ReasonForbidden, ReasonUnauthorized, ReasonAPIServerUntrusted, ReasonNamespaceTerminating,
	ReasonNamespaceNotFound, ReasonKindNotServed, ReasonAdmissionDenied, ReasonAdmissionWebhookFailed,
	ReasonWatchNotSynced, ReasonAPIServerUnreachable, ReasonAPIServerTimeout, ReasonAPIServerThrottling,
	ReasonAPIServerError,
}

// managementNote tells the guest's administrator that only the management cluster's
// administrators can fix what the message describes.
const managementNote = "This is on the management cluster: only its administrators can fix it."

// subject is what a failure is about, in the words of a message.
type subject struct {
	// oe is the failed request, or nil when err carries none.
	oe *apply.ObjectError
	// doing is the caller's gerund phrase, for errors without an ObjectError.
	doing string
}

// action is what was being done, as a lower-case gerund phrase: "applying Deployment in
// namespace clusters-x".
func (s subject) action() string {
	if s.oe == nil {
		d := strings.TrimSpace(s.doing)
		if d == "" {
			return "reconciling the ClusterCSIDriver"
		}
		return lowerFirst(d)
	}
	kind := s.kind()
	switch s.oe.Op {
	case apply.OpRead:
		if s.oe.Name == "" {
			return "listing " + kind + " objects " + s.scope()
		}
		return "reading " + kind + " " + s.scope()
	case apply.OpApply:
		return "applying " + kind + " " + s.scope()
	case apply.OpAdopt:
		return "taking over " + kind + " " + s.scope() + " from the operator it replaces"
	case apply.OpDelete:
		return "deleting " + kind + " " + s.scope()
	case apply.OpWriteStatus:
		return "writing the status of " + kind + " " + s.scope()
	}
	return "requesting " + kind + " " + s.scope()
}

func (s subject) kind() string {
	if s.oe == nil || s.oe.GVK.Kind == "" {
		return "an object"
	}
	return s.oe.GVK.Kind
}

// objects names the kind and where, for webhook and policy selectors: "Deployment in namespace
// x", or "the operator's objects" when the object is not known.
func (s subject) objects() string {
	if s.oe == nil || s.oe.GVK.Kind == "" {
		return "the operator's objects"
	}
	return s.oe.GVK.Kind + " " + s.scope()
}

// scope is where the object is: "in namespace x", or "cluster-wide" for a cluster-scoped kind
// (or a list across namespaces), which RBAC grants only through a ClusterRole.
func (s subject) scope() string {
	if s.oe == nil || s.oe.Namespace == "" {
		return "cluster-wide"
	}
	return "in namespace " + s.oe.Namespace
}

func (s subject) cluster() apply.Cluster {
	if s.oe == nil {
		return apply.ClusterUnnamed
	}
	return s.oe.Cluster
}

// clusterName is "the guest cluster", "the management cluster", or "the cluster".
func (s subject) clusterName() string {
	if c := s.cluster(); c != apply.ClusterUnnamed {
		return "the " + string(c) + " cluster"
	}
	return "the cluster"
}

func (s subject) apiServer() string { return s.clusterName() + "'s API server" }

// identity is who the operator is on the cluster: on HyperShift it reaches the guest through a
// kubeconfig, everything else as its own ServiceAccount.
func (s subject) identity() string {
	if s.cluster() == apply.ClusterGuest {
		return "the user of the operator's guest kubeconfig"
	}
	return "the operator's ServiceAccount"
}

// credentials is what holds the identity's credentials.
func (s subject) credentials() string {
	if s.cluster() == apply.ClusterGuest {
		return "the operator's guest kubeconfig"
	}
	return "the operator's ServiceAccount token"
}

// trustedCA is where the operator takes the CA it verifies the API server with.
func (s subject) trustedCA() string {
	if s.cluster() == apply.ClusterGuest {
		return "the CA in the operator's guest kubeconfig"
	}
	return "the CA bundle mounted with the operator's ServiceAccount token"
}

// verbs are the RBAC verbs the failed request needed. Reads go through watch-backed caches, so
// they need list and watch; a server-side apply that creates its object is authorised as create
// as well as patch.
func (s subject) verbs() string {
	switch s.oe.Op {
	case apply.OpRead:
		if s.oe.Name == "" {
			return "list and watch"
		}
		return "get, list and watch"
	case apply.OpApply:
		return "patch and create"
	case apply.OpAdopt:
		return "get and patch"
	case apply.OpDelete:
		return "delete"
	case apply.OpWriteStatus:
		return "patch"
	}
	return "get"
}

// resource names what RBAC rules grant, as "deployments (API group apps)". The resource comes
// from the operator's REST mapper or, failing that, from the Forbidden status's details when it
// is a well-formed resource name; otherwise the kind is named.
func (s subject) resource(st *metav1.Status) string {
	res, group := "", ""
	if s.oe != nil {
		res, group = s.oe.Resource, s.oe.GVK.Group
	}
	if res == "" && st != nil && st.Details != nil && len(validation.IsDNS1123Subdomain(st.Details.Kind)) == 0 &&
		(st.Details.Group == "" || len(validation.IsDNS1123Subdomain(st.Details.Group)) == 0) {
		res, group = st.Details.Kind, st.Details.Group
	}
	if res == "" {
		if s.oe == nil || s.oe.GVK.Kind == "" {
			return ""
		}
		res = s.oe.GVK.Kind + " objects"
	} else if s.oe != nil && s.oe.Op == apply.OpWriteStatus {
		res += "/status"
	}
	if group == "" {
		return res + " (core API group)"
	}
	return res + " (API group " + group + ")"
}

// namespaceName is "namespace x", or "its namespace" when the namespace is not known.
func namespaceName(s subject) string {
	if s.oe == nil || s.oe.Namespace == "" {
		return "its namespace"
	}
	return "namespace " + s.oe.Namespace
}

// causeWords says what is wrong with a field, by cause type (field.ErrorType).
var causeWords = map[metav1.CauseType]string{
	metav1.CauseTypeFieldValueNotFound:     "not found",
	metav1.CauseTypeFieldValueRequired:     "required",
	metav1.CauseTypeFieldValueDuplicate:    "duplicate",
	metav1.CauseTypeFieldValueInvalid:      "invalid",
	metav1.CauseTypeFieldValueNotSupported: "not supported",
	metav1.CauseTypeForbidden:              "forbidden",
	metav1.CauseTypeTooLong:                "too long",
	metav1.CauseTypeTooMany:                "too many",
	metav1.CauseTypeInternal:               "internal error",
	metav1.CauseTypeTypeInvalid:            "wrong type",
}

// fieldPaths lists the field paths of an Invalid status's causes, each with what is wrong, as
// " (spec.x: required; spec.y: invalid)": sorted, de-duplicated and bounded, so that the message
// is stable. Neither the causes' messages nor their values are used; a path that does not look
// like a field path is left out.
func fieldPaths(st *metav1.Status) string {
	if st.Details == nil {
		return ""
	}
	var out []string
	for _, c := range st.Details.Causes {
		if !isFieldPath(c.Field) {
			continue
		}
		w, ok := causeWords[c.Type]
		if !ok {
			w = "invalid"
		}
		out = append(out, c.Field+": "+w)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return ""
	}
	more := ""
	if len(out) > maxFieldPaths {
		more = fmt.Sprintf("; %d more", len(out)-maxFieldPaths)
		out = out[:maxFieldPaths]
	}
	return " (" + strings.Join(out, "; ") + more + ")"
}

// isFieldPath reports whether p looks like a field path (spec.containers[0].image,
// metadata.labels[app.kubernetes.io/name]) and is short enough for a condition.
func isFieldPath(p string) bool {
	if p == "" || len(p) > 200 {
		return false
	}
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune(".[]-_/", r):
		default:
			return false
		}
	}
	return true
}

// lowerFirst lower-cases the first letter of a sentence start, unless it begins an acronym.
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	next, _ := utf8.DecodeRuneInString(s[n:])
	if unicode.IsUpper(next) {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// Sentence makes a text (an error's, say) a sentence of a condition message: trimmed, its first
// letter upper case, ending in a period.
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = upperFirst(s)
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// JoinSome joins items with commas for a message, naming at most most of them and counting the
// rest ("a, b and 3 more"), so that a message does not grow with the cluster.
func JoinSome(items []string, most int) string {
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}
