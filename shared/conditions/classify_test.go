package conditions

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// secret is planted in every place of the test errors that a message must never quote: object
// names, the API server's text, field values, UIDs, addresses.
const secret = "s3cr3t-Zq8xW2"

const hcpNamespace = "clusters-demo"

var (
	deploymentGVK   = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	daemonSetGVK    = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
	configMapGVK    = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	serviceGVK      = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	storageClassGVK = schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}
	driverGVK       = operatorv1.GroupVersion.WithKind("ClusterCSIDriver")
	monitorGVK      = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
	configMaps  = schema.GroupResource{Resource: "configmaps"}
)

// objErr returns an ObjectError as the applier would, its name a generated one that carries the
// planted secret.
func objErr(op apply.Op, c apply.Cluster, gvk schema.GroupVersionKind, resource, ns string, err error) *apply.ObjectError {
	return &apply.ObjectError{Op: op, Cluster: c, GVK: gvk, Resource: resource, Namespace: ns, Name: "name-" + secret, Err: err}
}

// forbidden is an RBAC denial as the API server words it.
func forbidden(gr schema.GroupResource, verb string) *apierrors.StatusError {
	e := apierrors.NewForbidden(gr, secret, fmt.Errorf(`User "system:serviceaccount:%s:op" cannot %s resource %q in API group %q`, secret, verb, gr.Resource, gr.Group))
	e.ErrStatus.Details.UID = secret
	return e
}

// withCause adds a StatusCause to a status error.
func withCause(e *apierrors.StatusError, c metav1.StatusCause) *apierrors.StatusError {
	e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, c)
	return e
}

func refused() error {
	return &url.Error{Op: "Patch", URL: "https://" + secret + ":6443/apis/apps/v1", Err: &net.OpError{
		Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 6443},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	const (
		mgmt  = apply.ClusterManagement
		guest = apply.ClusterGuest
		one   = apply.ClusterUnnamed
		// mgmtNote ends the messages of failures the guest's administrator cannot fix.
		mgmtNote = " This is on the management cluster: only its administrators can fix it."
		retries  = " The operator retries."
	)
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, secret, field.ErrorList{
		field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), secret, "must not contain "+secret),
		field.Required(field.NewPath("metadata", "labels"), ""),
		field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), secret+"2", "again"),
	})
	manyInvalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, secret, field.ErrorList{
		field.TooLong(field.NewPath("data", "a"), secret, 10),
		field.NotSupported(field.NewPath("data", "b"), secret, []string{"x"}),
		field.Duplicate(field.NewPath("data", "c"), secret),
		field.Forbidden(field.NewPath("data", "d"), secret),
		field.TooMany(field.NewPath("data", "e"), 3, 2),
		field.Invalid(field.NewPath("data", "f"), secret, secret),
		// A cause whose "field" is not a field path is left out rather than quoted.
		field.Invalid(field.NewPath("data", "password: "+secret), secret, secret),
	})

	tests := []struct {
		name       string
		err        error
		doing      string
		wantReason string
		wantMsg    string
	}{
		{
			name:       "When an apply on the management cluster is forbidden, it should name the verbs, resource and namespace the ServiceAccount needs",
			err:        objErr(apply.OpApply, mgmt, deploymentGVK, "deployments", hcpNamespace, forbidden(deployments, "patch")),
			wantReason: ReasonForbidden,
			wantMsg: "Applying Deployment in namespace clusters-demo failed: the management cluster's API server forbade it. " +
				"The operator's ServiceAccount needs the RBAC verbs patch and create on deployments (API group apps) in namespace clusters-demo: " +
				"grant them with a Role and RoleBinding." + mgmtNote + retries,
		},
		{
			name:       "When a read on the guest cluster is forbidden, it should ask for get, list and watch cluster-wide for the kubeconfig's user",
			err:        objErr(apply.OpRead, guest, storageClassGVK, "storageclasses", "", forbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, "list")),
			wantReason: ReasonForbidden,
			wantMsg: "Reading StorageClass cluster-wide failed: the guest cluster's API server forbade it. " +
				"The user of the operator's guest kubeconfig needs the RBAC verbs get, list and watch on storageclasses (API group storage.k8s.io) cluster-wide: " +
				"grant them with a ClusterRole and ClusterRoleBinding." + retries,
		},
		{
			name: "When a status write is forbidden, it should name the status subresource",
			err: fmt.Errorf("writing ClusterCSIDriver conditions: %w", objErr(apply.OpWriteStatus, one, driverGVK, "clustercsidrivers", "",
				forbidden(schema.GroupResource{Group: "operator.openshift.io", Resource: "clustercsidrivers"}, "patch"))),
			wantReason: ReasonForbidden,
			wantMsg: "Writing the status of ClusterCSIDriver cluster-wide failed: the cluster's API server forbade it. " +
				"The operator's ServiceAccount needs the RBAC verbs patch on clustercsidrivers/status (API group operator.openshift.io) cluster-wide: " +
				"grant them with a ClusterRole and ClusterRoleBinding." + retries,
		},
		{
			name:       "When a delete is forbidden and the REST mapper did not know the resource, it should take the resource from the status",
			err:        objErr(apply.OpDelete, one, configMapGVK, "", "openshift-cluster-csi-drivers", forbidden(configMaps, "delete")),
			wantReason: ReasonForbidden,
			wantMsg: "Deleting ConfigMap in namespace openshift-cluster-csi-drivers failed: the cluster's API server forbade it. " +
				"The operator's ServiceAccount needs the RBAC verbs delete on configmaps (core API group) in namespace openshift-cluster-csi-drivers: " +
				"grant them with a Role and RoleBinding." + retries,
		},
		{
			name: "When a list is forbidden and the resource is not known at all, it should name the kind",
			err: func() error {
				e := objErr(apply.OpRead, mgmt, schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedControlPlane"}, "", hcpNamespace,
					apierrors.NewForbidden(schema.GroupResource{Resource: "not a resource " + secret}, "", errors.New(secret)))
				e.Name = ""
				return e
			}(),
			wantReason: ReasonForbidden,
			wantMsg: "Listing HostedControlPlane objects in namespace clusters-demo failed: the management cluster's API server forbade it. " +
				"The operator's ServiceAccount needs the RBAC verbs list and watch on HostedControlPlane objects (API group hypershift.openshift.io) in namespace clusters-demo: " +
				"grant them with a Role and RoleBinding." + mgmtNote + retries,
		},
		{
			name:       "When a forbidden error names no object, it should describe it with the caller's phrase and the status's resource",
			err:        fmt.Errorf("listing HostedControlPlanes: %w", forbidden(schema.GroupResource{Group: "hypershift.openshift.io", Resource: "hostedcontrolplanes"}, "list")),
			doing:      "Reading the operator's inputs",
			wantReason: ReasonForbidden,
			wantMsg: "Reading the operator's inputs failed: the cluster's API server forbade it. " +
				"The operator's ServiceAccount lacks an RBAC permission on hostedcontrolplanes (API group hypershift.openshift.io); " +
				"compare its roles with the operator's install manifests." + retries,
		},
		{
			name: "When RBAC refuses a binding as an escalation, it should ask for the role's rules or bind, not for verbs on the binding",
			err: objErr(apply.OpApply, one, schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "clusterrolebindings", "",
				apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, secret,
					fmt.Errorf(`user "system:serviceaccount:%s:op" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["storage.k8s.io"], Resources:["%s"], Verbs:["get"]}`, secret, secret))),
			wantReason: ReasonForbidden,
			wantMsg: "Applying ClusterRoleBinding cluster-wide failed: the cluster's API server refused it as an escalation of privilege. " +
				"The operator's ServiceAccount may grant, in a role or a binding, only rules it holds itself, " +
				"unless it has the RBAC verb bind (for a binding) or escalate (for a role) on the role: " +
				"grant it the rules of the role it writes or binds, or bind on that role." + retries,
		},
		{
			name: "When the namespace is being deleted, it should say so instead of asking for RBAC",
			err: objErr(apply.OpApply, mgmt, configMapGVK, "configmaps", hcpNamespace, withCause(
				apierrors.NewForbidden(configMaps, secret, errors.New("unable to create new content in namespace "+hcpNamespace+" because it is being terminated")),
				metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: secret, Field: "metadata.namespace"})),
			wantReason: ReasonNamespaceTerminating,
			wantMsg: "Applying ConfigMap in namespace clusters-demo failed: namespace clusters-demo on the management cluster is being deleted, " +
				"and nothing can be created in it until the deletion finishes." + mgmtNote + retries,
		},
		{
			name: "When an admission webhook denies the request, it should point at the webhooks without quoting them",
			err: objErr(apply.OpApply, guest, daemonSetGVK, "daemonsets", names.GuestNamespace,
				apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, secret,
					errors.New(`admission webhook "`+secret+`.example.com" denied the request: `+secret))),
			wantReason: ReasonAdmissionDenied,
			wantMsg: "Applying DaemonSet in namespace openshift-cluster-csi-drivers failed: an admission webhook or policy on the guest cluster denied it. " +
				"Check the validating and mutating webhook configurations and the ValidatingAdmissionPolicies that match DaemonSet in namespace openshift-cluster-csi-drivers." + retries,
		},
		{
			name: "When a ValidatingAdmissionPolicy denies the request as invalid, it should report the policy, not a bug",
			err: objErr(apply.OpApply, one, storageClassGVK, "storageclasses", "", &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
				Message: "storageclasses.storage.k8s.io \"" + secret + "\" is forbidden: ValidatingAdmissionPolicy '" + secret + "' with binding 'b' denied request: " + secret,
			}}),
			wantReason: ReasonAdmissionDenied,
			wantMsg: "Applying StorageClass cluster-wide failed: an admission webhook or policy on the cluster denied it. " +
				"Check the validating and mutating webhook configurations and the ValidatingAdmissionPolicies that match StorageClass cluster-wide." + retries,
		},
		{
			name:       "When the object is invalid, it should list the sorted field paths without values and call it a bug",
			err:        objErr(apply.OpApply, guest, daemonSetGVK, "daemonsets", names.GuestNamespace, invalid),
			wantReason: ReasonInvalid,
			wantMsg: "Applying DaemonSet in namespace openshift-cluster-csi-drivers failed: the guest cluster's API server found it invalid " +
				"(metadata.labels: required; spec.template.spec.containers[0].image: invalid). " +
				"This is a bug in the operator: report it with this message." + retries,
		},
		{
			name:       "When many fields are invalid, it should list the first five and count the rest",
			err:        objErr(apply.OpApply, one, configMapGVK, "configmaps", "ns", manyInvalid),
			wantReason: ReasonInvalid,
			wantMsg: "Applying ConfigMap in namespace ns failed: the cluster's API server found it invalid " +
				"(data.a: too long; data.b: not supported; data.c: duplicate; data.d: forbidden; data.e: too many; 1 more). " +
				"This is a bug in the operator: report it with this message." + retries,
		},
		{
			name:       "When the request itself is rejected, it should give the HTTP code and call it a bug",
			err:        objErr(apply.OpApply, one, configMapGVK, "configmaps", "ns", apierrors.NewBadRequest(secret)),
			wantReason: ReasonRequestRejected,
			wantMsg: "Applying ConfigMap in namespace ns failed: the cluster's API server rejected the request (HTTP 400). " +
				"This is a bug in the operator, or an API server version it does not support: report it with this message." + retries,
		},
		{
			name:       "When the adoption patch meets a newer version, it should report a conflict",
			err:        objErr(apply.OpAdopt, mgmt, deploymentGVK, "deployments", hcpNamespace, apierrors.NewConflict(deployments, secret, errors.New("the object has been modified; resourceVersion "+secret))),
			wantReason: ReasonConflict,
			wantMsg: "Taking over Deployment in namespace clusters-demo from the operator it replaces failed: it changed on the management cluster while the operator wrote it. " +
				"If this persists, another controller keeps changing it." + retries,
		},
		{
			name:       "When the object was created meanwhile, it should report that",
			err:        objErr(apply.OpApply, guest, configMapGVK, "configmaps", names.GuestNamespace, apierrors.NewAlreadyExists(configMaps, secret)),
			wantReason: ReasonAlreadyExists,
			wantMsg:    "Applying ConfigMap in namespace openshift-cluster-csi-drivers failed: it was created on the guest cluster by someone else meanwhile." + retries,
		},
		{
			name:       "When the namespace does not exist, it should ask for it",
			err:        objErr(apply.OpApply, mgmt, serviceGVK, "services", hcpNamespace, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, secret)),
			wantReason: ReasonNamespaceNotFound,
			wantMsg: "Applying Service in namespace clusters-demo failed: namespace clusters-demo does not exist on the management cluster. " +
				"Create it, or find out why what should create it has not." + mgmtNote + retries,
		},
		{
			name:       "When the object disappeared during a status write, it should say it was not found",
			err:        objErr(apply.OpWriteStatus, guest, driverGVK, "clustercsidrivers", "", apierrors.NewNotFound(schema.GroupResource{Group: "operator.openshift.io", Resource: "clustercsidrivers"}, secret)),
			wantReason: ReasonNotFound,
			wantMsg: "Writing the status of ClusterCSIDriver cluster-wide failed: it was not found on the guest cluster. " +
				"It was deleted meanwhile, or the guest cluster's API server does not serve its kind." + retries,
		},
		{
			name:       "When the kind is not served, it should name the kind and its group version",
			err:        objErr(apply.OpApply, one, monitorGVK, "", "openshift-cluster-csi-drivers", &meta.NoKindMatchError{GroupKind: monitorGVK.GroupKind(), SearchedVersions: []string{"v1"}}),
			wantReason: ReasonKindNotServed,
			wantMsg: "Applying ServiceMonitor in namespace openshift-cluster-csi-drivers failed: the cluster's API server does not serve ServiceMonitor (monitoring.coreos.com/v1). " +
				"Install the CustomResourceDefinition or API that provides it." + retries,
		},
		{
			name:       "When the credentials are refused, it should point at the guest kubeconfig",
			err:        objErr(apply.OpApply, guest, configMapGVK, "configmaps", names.GuestNamespace, apierrors.NewUnauthorized(secret)),
			wantReason: ReasonUnauthorized,
			wantMsg: "Applying ConfigMap in namespace openshift-cluster-csi-drivers failed: the guest cluster's API server did not accept the operator's credentials. " +
				"Check that the operator's guest kubeconfig is current and valid." + retries,
		},
		{
			name:       "When the API server times out, it should name the cluster",
			err:        objErr(apply.OpApply, mgmt, deploymentGVK, "deployments", hcpNamespace, apierrors.NewServerTimeout(deployments, "patch", 2)),
			wantReason: ReasonAPIServerTimeout,
			wantMsg: "Applying Deployment in namespace clusters-demo failed: the management cluster's API server did not answer in time. " +
				"If this persists, check the API server's load and the network to it." + mgmtNote + retries,
		},
		{
			name:       "When a cache read times out waiting for its watch, it should ask for list and watch",
			err:        objErr(apply.OpRead, mgmt, configMapGVK, "configmaps", hcpNamespace, apierrors.NewTimeoutError("failed waiting for *v1.ConfigMap Informer to sync", 0)),
			wantReason: ReasonWatchNotSynced,
			wantMsg: "Reading ConfigMap in namespace clusters-demo failed: the operator's watch of ConfigMap in namespace clusters-demo on the management cluster did not fill in time. " +
				"Check that the operator's ServiceAccount has the RBAC verbs list and watch on configmaps (core API group) in namespace clusters-demo, " +
				"and that the management cluster's API server is reachable." + mgmtNote + retries,
		},
		{
			name:       "When the client's deadline passes, it should report a timeout",
			err:        objErr(apply.OpDelete, guest, storageClassGVK, "storageclasses", "", &url.Error{Op: "Delete", URL: "https://" + secret, Err: context.DeadlineExceeded}),
			wantReason: ReasonAPIServerTimeout,
			wantMsg: "Deleting StorageClass cluster-wide failed: the guest cluster's API server did not answer in time. " +
				"If this persists, check the API server's load and the network to it." + retries,
		},
		{
			name:       "When the API server throttles, it should mention API Priority and Fairness",
			err:        objErr(apply.OpApply, one, configMapGVK, "configmaps", "ns", apierrors.NewTooManyRequests(secret, 1)),
			wantReason: ReasonAPIServerThrottling,
			wantMsg: "Applying ConfigMap in namespace ns failed: the cluster's API server asked the operator to slow down. " +
				"If this persists, check the API server's load and its API Priority and Fairness configuration." + retries,
		},
		{
			name:       "When the API server is unavailable, it should say so",
			err:        objErr(apply.OpApply, guest, configMapGVK, "configmaps", names.GuestNamespace, apierrors.NewServiceUnavailable(secret)),
			wantReason: ReasonAPIServerUnreachable,
			wantMsg: "Applying ConfigMap in namespace openshift-cluster-csi-drivers failed: the guest cluster's API server is unavailable. " +
				"Check that the API server and its storage are running." + retries,
		},
		{
			name:       "When the connection is refused, it should say so without the address",
			err:        objErr(apply.OpApply, guest, configMapGVK, "configmaps", names.GuestNamespace, refused()),
			wantReason: ReasonAPIServerUnreachable,
			wantMsg: "Applying ConfigMap in namespace openshift-cluster-csi-drivers failed: the operator cannot reach the guest cluster's API server (connection refused). " +
				"Check that the API server is running and reachable from the operator's pod." + retries,
		},
		{
			name: "When the API server's name does not resolve, it should say so without the name",
			err: objErr(apply.OpRead, guest, configMapGVK, "configmaps", names.GuestNamespace,
				&url.Error{Op: "Get", URL: "https://" + secret, Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: secret, IsNotFound: true}}}),
			wantReason: ReasonAPIServerUnreachable,
			wantMsg: "Reading ConfigMap in namespace openshift-cluster-csi-drivers failed: the operator cannot reach the guest cluster's API server (its name does not resolve). " +
				"Check that the API server is running and reachable from the operator's pod." + retries,
		},
		{
			name: "When the API server's certificate has an unknown authority, it should point at the CA",
			err: objErr(apply.OpApply, guest, configMapGVK, "configmaps", names.GuestNamespace,
				&url.Error{Op: "Patch", URL: "https://" + secret, Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}),
			wantReason: ReasonAPIServerUntrusted,
			wantMsg: "Applying ConfigMap in namespace openshift-cluster-csi-drivers failed: the operator does not trust the certificate of the guest cluster's API server (signed by an unknown authority). " +
				"Check the CA in the operator's guest kubeconfig and the API server's serving certificate." + retries,
		},
		{
			name:       "When the API server's certificate expired, it should say so",
			err:        objErr(apply.OpApply, mgmt, configMapGVK, "configmaps", hcpNamespace, x509.CertificateInvalidError{Reason: x509.Expired, Detail: secret}),
			wantReason: ReasonAPIServerUntrusted,
			wantMsg: "Applying ConfigMap in namespace clusters-demo failed: the operator does not trust the certificate of the management cluster's API server (expired or not yet valid). " +
				"Check the CA bundle mounted with the operator's ServiceAccount token and the API server's serving certificate." + mgmtNote + retries,
		},
		{
			name:       "When an admission webhook cannot be called, it should point at the webhooks",
			err:        objErr(apply.OpApply, one, deploymentGVK, "deployments", "ns", apierrors.NewInternalError(errors.New(`failed calling webhook "`+secret+`": Post "https://`+secret+`": EOF`))),
			wantReason: ReasonAdmissionWebhookFailed,
			wantMsg: "Applying Deployment in namespace ns failed: the cluster's API server could not call an admission webhook. " +
				"Check that the webhooks that match Deployment in namespace ns are running and reachable." + retries,
		},
		{
			name:       "When the API server fails internally, it should give the HTTP code",
			err:        objErr(apply.OpApply, mgmt, deploymentGVK, "deployments", hcpNamespace, apierrors.NewInternalError(errors.New(secret))),
			wantReason: ReasonAPIServerError,
			wantMsg: "Applying Deployment in namespace clusters-demo failed: the management cluster's API server answered with an internal error (HTTP 500). " +
				"If this persists, check the API server and its storage." + mgmtNote + retries,
		},
		{
			name:       "When the request is cancelled, it should say the operator is stopping",
			err:        objErr(apply.OpApply, guest, configMapGVK, "configmaps", names.GuestNamespace, fmt.Errorf("client rate limiter Wait returned an error: %w", context.Canceled)),
			wantReason: ReasonInterrupted,
			wantMsg:    "Applying ConfigMap in namespace openshift-cluster-csi-drivers was interrupted: the operator is stopping or lost its leader lease." + retries,
		},
		{
			name:       "When an object's error is of no known class, it should ask for a report and say who can read the log",
			err:        objErr(apply.OpAdopt, mgmt, deploymentGVK, "deployments", hcpNamespace, errors.New(secret)),
			wantReason: ReasonUnexpectedError,
			wantMsg: "Taking over Deployment in namespace clusters-demo from the operator it replaces failed with an unexpected error. " +
				"If this persists, report it to the operator's maintainers with this message and the operator's log " +
				"(on a hosted cluster, the management cluster's administrators can read it)." + retries,
		},
		{
			name:       "When an error names no object, it should use the caller's phrase",
			err:        fmt.Errorf("computing the controller objects: %w", errors.New(secret)),
			doing:      "Applying the CSI controller objects",
			wantReason: ReasonUnexpectedError,
			wantMsg: "Applying the CSI controller objects failed with an unexpected error. " +
				"If this persists, report it to the operator's maintainers with this message and the operator's log." + retries,
		},
		{
			name:       "When the caller's phrase starts with an acronym, it should keep its case",
			err:        apierrors.NewTimeoutError(secret, 1),
			doing:      "CSI driver objects could not be read; reading them",
			wantReason: ReasonAPIServerTimeout,
			wantMsg: "CSI driver objects could not be read; reading them failed: the cluster's API server did not answer in time. " +
				"If this persists, check the API server's load and the network to it." + retries,
		},
		{
			name: "When several objects failed, it should put what needs the administrator first",
			err: errors.Join(
				objErr(apply.OpApply, mgmt, configMapGVK, "configmaps", hcpNamespace, apierrors.NewConflict(configMaps, secret, errors.New(secret))),
				objErr(apply.OpApply, mgmt, serviceGVK, "services", hcpNamespace, forbidden(schema.GroupResource{Resource: "services"}, "patch")),
				fmt.Errorf("removing: %w", objErr(apply.OpApply, mgmt, deploymentGVK, "deployments", hcpNamespace, forbidden(deployments, "patch"))),
			),
			wantReason: ReasonForbidden,
			wantMsg: "Applying Deployment in namespace clusters-demo failed: the management cluster's API server forbade it. " +
				"The operator's ServiceAccount needs the RBAC verbs patch and create on deployments (API group apps) in namespace clusters-demo: " +
				"grant them with a Role and RoleBinding. " +
				"Applying Service in namespace clusters-demo failed: the management cluster's API server forbade it. " +
				"The operator's ServiceAccount needs the RBAC verbs patch and create on services (core API group) in namespace clusters-demo: " +
				"grant them with a Role and RoleBinding. " +
				"Applying ConfigMap in namespace clusters-demo failed: it changed on the management cluster while the operator wrote it. " +
				"If this persists, another controller keeps changing it." + mgmtNote + retries,
		},
		{
			name: "When more than three distinct failures occurred, it should describe three, count the rest and merge repeats",
			err: errors.Join(
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "a", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "b", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "c", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "d", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "d", apierrors.NewInternalError(errors.New(secret+"2"))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "e", apierrors.NewInternalError(errors.New(secret))),
			),
			wantReason: ReasonAPIServerError,
			wantMsg: "Deleting ConfigMap in namespace a failed: the cluster's API server answered with an internal error (HTTP 500). If this persists, check the API server and its storage. " +
				"Deleting ConfigMap in namespace b failed: the cluster's API server answered with an internal error (HTTP 500). If this persists, check the API server and its storage. " +
				"Deleting ConfigMap in namespace c failed: the cluster's API server answered with an internal error (HTTP 500). If this persists, check the API server and its storage. " +
				"2 more failures are left out." + retries,
		},
		{
			name: "When four distinct failures occurred, it should count the one left out",
			err: errors.Join(
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "a", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "b", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, one, configMapGVK, "configmaps", "c", apierrors.NewInternalError(errors.New(secret))),
				objErr(apply.OpDelete, mgmt, configMapGVK, "configmaps", "d", apierrors.NewInternalError(errors.New(secret))),
			),
			wantReason: ReasonAPIServerError,
			wantMsg: "Deleting ConfigMap in namespace a failed: the cluster's API server answered with an internal error (HTTP 500). If this persists, check the API server and its storage. " +
				"Deleting ConfigMap in namespace b failed: the cluster's API server answered with an internal error (HTTP 500). If this persists, check the API server and its storage. " +
				"Deleting ConfigMap in namespace c failed: the cluster's API server answered with an internal error (HTTP 500). If this persists, check the API server and its storage. " +
				"1 more failure is left out." + retries,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			reason, msg := Classify(tt.err, tt.doing)
			g.Expect(reason).To(Equal(tt.wantReason))
			g.Expect(msg).To(Equal(tt.wantMsg))
			g.Expect(msg).To(Equal(CleanMessage(msg)), "a message must be one clean line within MaxMessageLength")
			g.Expect(strings.ToLower(msg)).NotTo(ContainSubstring(strings.ToLower(secret)),
				"a message must not quote what only the error's details hold")
			g.Expect(tt.err.Error()).To(ContainSubstring(secret), "the test must plant the secret in the error")
		})
	}
}

func TestClassify_ReasonsAreStable(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	for _, r := range failureOrder {
		g.Expect(r).To(MatchRegexp(`^[A-Z][A-Za-z0-9]*$`), "reason %q must be CamelCase", r)
	}
	seen := map[string]bool{}
	for _, r := range failureOrder {
		g.Expect(seen[r]).To(BeFalse(), "reason %q is listed twice", r)
		seen[r] = true
	}
}

func TestSet_Fold(t *testing.T) {
	t.Parallel()
	const typ = names.ConditionNodeDegraded
	forbiddenApply := objErr(apply.OpApply, apply.ClusterGuest, daemonSetGVK, "daemonsets", names.GuestNamespace,
		forbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "patch"))
	forbiddenMsg := "Applying DaemonSet in namespace openshift-cluster-csi-drivers failed: the guest cluster's API server forbade it. " +
		"The user of the operator's guest kubeconfig needs the RBAC verbs patch and create on daemonsets (API group apps) in namespace openshift-cluster-csi-drivers: " +
		"grant them with a Role and RoleBinding. The operator retries."
	tests := []struct {
		name     string
		existing []operatorv1.OperatorCondition
		err      error
		want     operatorv1.OperatorCondition
	}{
		{
			name: "When there is no error, it should record False with AsExpected",
			want: cond(typ, "False", now, names.ReasonAsExpected, ""),
		},
		{
			name: "When an apply failed, it should record True with the classified reason and message",
			err:  forbiddenApply,
			want: cond(typ, "True", now, ReasonForbidden, forbiddenMsg),
		},
		{
			name:     "When the same failure repeats with another generated name, it should keep the condition as it is",
			existing: []operatorv1.OperatorCondition{cond(typ, "True", earlier, ReasonForbidden, forbiddenMsg)},
			err: func() error {
				e := *forbiddenApply
				e.Name = "other-" + secret
				return &e
			}(),
			want: cond(typ, "True", earlier, ReasonForbidden, forbiddenMsg),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := New(tt.existing, now)
			s.Fold(typ, tt.err, "Applying the CSI node DaemonSet")
			g.Expect(s.List()).To(Equal([]operatorv1.OperatorCondition{tt.want}))
		})
	}
}
