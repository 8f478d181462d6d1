// Package metricsauth protects the operator's metrics endpoint as kube-rbac-proxy protects the
// CSI controller's: a scrape is served only to a caller whose bearer token the API server
// accepts (a TokenReview) and who may get the requested non-resource URL there (a
// SubjectAccessReview), such as Prometheus' ServiceAccount with OpenShift's prometheus-k8s
// ClusterRole. Anyone else gets 401 Unauthorized or 403 Forbidden.
//
// controller-runtime ships such a filter (pkg/metrics/filters), built on k8s.io/apiserver's
// delegating authenticator and authorizer. That module brings CEL, OpenTelemetry and the API
// server's authentication stack into the binary: 52 MB grew to 84 MB, and hundreds of hosted
// clusters each run this operator. The two reviews need nothing but client-go, so this package
// makes them itself, with a small cache so that a scrape every 30 s costs the API server two
// requests a minute at most.
//
// ServingCert is the endpoint's serving certificate, which follows a Secret volume that is
// filled or rotated after the start.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Cache lifetimes of a review's verdict, by token and request. An allowed caller is believed for
// a minute (a revoked token or binding stops working within it, as with kube-rbac-proxy's
// defaults); a refusal is remembered briefly, so that a caller hammering the endpoint with a bad
// token does not turn into as many reviews.
const (
	allowedTTL = time.Minute
	deniedTTL  = 10 * time.Second
	// reviewTimeout bounds the two reviews of one scrape.
	reviewTimeout = 10 * time.Second
	// maxEntries bounds the cache; a handful of scrapers is the normal case.
	maxEntries = 256
)

// Reviewer reviews scrapers' tokens and access with one API server.
type Reviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

// verdict is a cached outcome: the HTTP status to answer (200 to serve) until expires.
type verdict struct {
	status  int
	user    string
	expires time.Time
}

// New returns a Reviewer that sends its reviews to the API server of cfg: the cluster where the
// operator's pod runs, whose identities (Prometheus' ServiceAccount) scrape it. Its user needs
// create on tokenreviews and subjectaccessreviews (the ClusterRole system:auth-delegator).
func New(cfg *rest.Config) (*Reviewer, error) {
	authn, err := authenticationclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Reviewer{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now,
		cache: map[[sha256.Size]byte]verdict{}}, nil
}

// Filter is a controller-runtime metrics filter: it wraps the metrics handler (and any extra
// handler) so that only reviewed callers reach it.
func (r *Reviewer) Filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		status, user := r.review(req)
		switch status {
		case http.StatusOK:
			next.ServeHTTP(w, req)
			return
		case http.StatusUnauthorized:
			log.V(4).Info("Refused a scrape without a valid token", "path", req.URL.Path)
			http.Error(w, "Unauthorized", status)
		case http.StatusForbidden:
			log.V(4).Info("Refused a scrape", "user", user, "path", req.URL.Path)
			http.Error(w, "Forbidden: user "+user+" may not get "+req.URL.Path, status)
		default:
			http.Error(w, "The API server could not review the request", status)
		}
	}), nil
}

// FilterProvider returns r.Filter in the form of metricsserver.Options.FilterProvider.
func (r *Reviewer) FilterProvider() func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(*rest.Config, *http.Client) (metricsserver.Filter, error) { return r.Filter, nil }
}

// review returns the status to answer req with and, once the token is known, its user.
func (r *Reviewer) review(req *http.Request) (int, string) {
	token, ok := bearer(req.Header.Get("Authorization"))
	if !ok {
		return http.StatusUnauthorized, ""
	}
	verb := strings.ToLower(req.Method)
	key := sha256.Sum256([]byte(verb + " " + req.URL.Path + " " + token))
	if v, ok := r.cached(key); ok {
		return v.status, v.user
	}
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	v, cache := r.ask(ctx, token, verb, req.URL.Path)
	if cache {
		r.remember(key, v)
	}
	return v.status, v.user
}

// ask sends the two reviews; cache is false when the API server could not give a verdict.
func (r *Reviewer) ask(ctx context.Context, token, verb, path string) (verdict, bool) {
	tr, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{status: http.StatusInternalServerError}, false
	}
	if !tr.Status.Authenticated {
		return verdict{status: http.StatusUnauthorized, expires: r.now().Add(deniedTTL)}, true
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{status: http.StatusInternalServerError, user: u.Username}, false
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return verdict{status: http.StatusForbidden, user: u.Username, expires: r.now().Add(deniedTTL)}, true
	}
	return verdict{status: http.StatusOK, user: u.Username, expires: r.now().Add(allowedTTL)}, true
}

func (r *Reviewer) cached(key [sha256.Size]byte) (verdict, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.cache[key]
	if !ok || !r.now().Before(v.expires) {
		return verdict{}, false
	}
	return v, true
}

func (r *Reviewer) remember(key [sha256.Size]byte, v verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= maxEntries {
		now := r.now()
		for k, old := range r.cache {
			if !now.Before(old.expires) {
				delete(r.cache, k)
			}
		}
		if len(r.cache) >= maxEntries {
			// Still full of live verdicts: start over rather than grow.
			clear(r.cache)
		}
	}
	r.cache[key] = v
}

// bearer returns the token of an Authorization header of the Bearer scheme.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
