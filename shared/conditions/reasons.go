package conditions

// Reasons of the Degraded conditions that Fold writes, one per class of failure. They are
// stable: tooling may match on them. A reconcile that fails in several ways reports the reason
// of the failure earliest in this list, the one the administrator should fix first.
const (
	// ReasonForbidden: the API server's RBAC forbade the request.
	ReasonForbidden = "Forbidden"
	// ReasonUnauthorized: the API server did not accept the operator's credentials.
	ReasonUnauthorized = "Unauthorized"
	// ReasonAPIServerUntrusted: the operator does not trust the API server's certificate.
	ReasonAPIServerUntrusted = "APIServerUntrusted"
	// ReasonNamespaceTerminating: the object's namespace is being deleted.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonNamespaceNotFound: the object's namespace does not exist.
	ReasonNamespaceNotFound = "NamespaceNotFound"
	// ReasonKindNotServed: the API server does not serve the object's kind.
	ReasonKindNotServed = "KindNotServed"
	// ReasonAdmissionDenied: an admission webhook or policy denied the request.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonInvalid: the API server found the object invalid, a bug in the operator.
	ReasonInvalid = "Invalid"
	// ReasonRequestRejected: the API server rejected the request itself, a bug in the operator
	// or an API server it does not support.
	ReasonRequestRejected = "RequestRejected"
	// ReasonUnexpectedError: an error of no known class.
	ReasonUnexpectedError = "UnexpectedError"
	// ReasonAdmissionWebhookFailed: the API server could not call an admission webhook.
	ReasonAdmissionWebhookFailed = "AdmissionWebhookFailed"
	// ReasonWatchNotSynced: the operator's cache of a kind did not fill in time.
	ReasonWatchNotSynced = "WatchNotSynced"
	// ReasonAPIServerUnreachable: the API server could not be reached or is unavailable.
	ReasonAPIServerUnreachable = "APIServerUnreachable"
	// ReasonAPIServerTimeout: the API server did not answer in time.
	ReasonAPIServerTimeout = "APIServerTimeout"
	// ReasonAPIServerThrottling: the API server asked the operator to slow down.
	ReasonAPIServerThrottling = "APIServerThrottling"
	// ReasonAPIServerError: the API server failed with an internal error.
	ReasonAPIServerError = "APIServerError"
	// ReasonNotFound: the object, or its API, disappeared during the request.
	ReasonNotFound = "NotFound"
	// ReasonConflict: the object changed while the operator wrote it.
	ReasonConflict = "Conflict"
	// ReasonAlreadyExists: the object was created by someone else meanwhile.
	ReasonAlreadyExists = "AlreadyExists"
	// ReasonInterrupted: the request was cancelled because the operator is stopping.
	ReasonInterrupted = "Interrupted"
)

// failureOrder ranks the reasons: what needs the administrator first, then bugs to report, then
// what usually passes by itself.
var failureOrder = []string{
	ReasonForbidden, ReasonUnauthorized, ReasonAPIServerUntrusted, ReasonNamespaceTerminating,
	ReasonNamespaceNotFound, ReasonKindNotServed, ReasonAdmissionDenied, ReasonInvalid,
	ReasonRequestRejected, ReasonUnexpectedError, ReasonAdmissionWebhookFailed, ReasonWatchNotSynced,
	ReasonAPIServerUnreachable, ReasonAPIServerTimeout, ReasonAPIServerThrottling, ReasonAPIServerError,
	ReasonNotFound, ReasonConflict, ReasonAlreadyExists, ReasonInterrupted,
}
