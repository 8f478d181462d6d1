package metricsauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeAPIServer answers TokenReviews from tokens (token to user name) and SubjectAccessReviews by
// allowed (user names that may get /metrics); failing makes both fail. It counts the reviews.
type fakeAPIServer struct {
	tokens  map[string]string
	allowed map[string]bool
	failing bool
	reviews int
}

func (f *fakeAPIServer) reviewer(now func() time.Time) *Reviewer {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.reviews++
		if f.failing {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if user, ok := f.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: user}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.reviews++
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = f.allowed[sar.Spec.User] && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		return true, sar, nil
	})
	return &Reviewer{tokens: cs.AuthenticationV1().TokenReviews(), access: cs.AuthorizationV1().SubjectAccessReviews(),
		now: now, cache: map[[32]byte]verdict{}}
}

func TestFilter(t *testing.T) {
	api := &fakeAPIServer{
		tokens:  map[string]string{"prometheus-token": "system:serviceaccount:openshift-monitoring:prometheus-k8s", "other-token": "system:serviceaccount:default:other"},
		allowed: map[string]bool{"system:serviceaccount:openshift-monitoring:prometheus-k8s": true},
	}
	now := time.Unix(1_000_000, 0)
	r := api.reviewer(func() time.Time { return now })
	h, err := r.Filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(header string) int {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	tests := []struct {
		name   string
		header string
		want   int
	}{
		{"When a scrape has no token, it should be refused with 401 without asking the API server", "", http.StatusUnauthorized},
		{"When a scrape has another scheme, it should be refused with 401", "Basic cHJvbWV0aGV1czpwYXNz", http.StatusUnauthorized},
		{"When the API server does not know the token, it should be refused with 401", "Bearer forged", http.StatusUnauthorized},
		{"When the token's user may not get /metrics, it should be refused with 403", "Bearer other-token", http.StatusForbidden},
		{"When the token's user may get /metrics, it should be served", "Bearer prometheus-token", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scrape(tt.header); got != tt.want {
				t.Errorf("status = %d, want %d", got, tt.want)
			}
		})
	}

	t.Run("When the same caller scrapes again within a minute, it should not ask the API server again", func(t *testing.T) {
		before := api.reviews
		if got := scrape("Bearer prometheus-token"); got != http.StatusOK {
			t.Fatalf("status = %d", got)
		}
		if api.reviews != before {
			t.Errorf("%d more reviews", api.reviews-before)
		}
	})
	t.Run("When the verdict has expired, it should ask again", func(t *testing.T) {
		before := api.reviews
		now = now.Add(allowedTTL)
		if got := scrape("Bearer prometheus-token"); got != http.StatusOK {
			t.Fatalf("status = %d", got)
		}
		if api.reviews != before+2 {
			t.Errorf("%d more reviews, want 2", api.reviews-before)
		}
	})
	t.Run("When the API server cannot review, it should answer 500 and not remember it", func(t *testing.T) {
		api.failing = true
		if got := scrape("Bearer new-token"); got != http.StatusInternalServerError {
			t.Errorf("status = %d, want 500", got)
		}
		api.failing = false
		api.tokens["new-token"] = "system:serviceaccount:openshift-monitoring:prometheus-k8s"
		if got := scrape("Bearer new-token"); got != http.StatusOK {
			t.Errorf("status after recovery = %d, want 200", got)
		}
	})
}
