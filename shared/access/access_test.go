package access_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
)

// reviewer answers SelfSubjectAccessReviews from answers, one per review, and counts them.
func reviewer(t *testing.T, answers ...error) (client.Client, *int) {
	t.Helper()
	s := runtime.NewScheme()
	if err := authorizationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	asked := 0
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			err := answers[asked]
			asked++
			if errors.Is(err, errDenied) {
				return nil
			}
			if err != nil {
				return err
			}
			r.Status.Allowed = true
			return nil
		},
	}).Build()
	return c, &asked
}

var errDenied = errors.New("denied")

func TestOnce(t *testing.T) {
	t.Parallel()
	t.Run("When every verb is allowed, it should say so and never ask again", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, asked := reviewer(t, nil, nil)
		var o access.Once
		for range 3 {
			ok, denied, err := o.Allowed(t.Context(), c, "ns", "monitoring.coreos.com", "servicemonitors", "list", "watch")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			g.Expect(denied).To(BeFalse())
		}
		g.Expect(*asked).To(Equal(2), "one review per verb, once")
	})
	t.Run("When a verb is denied, it should say denied on the first answer only", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, asked := reviewer(t, nil, errDenied)
		var o access.Once
		ok, denied, err := o.Allowed(t.Context(), c, "ns", "monitoring.coreos.com", "servicemonitors", "list", "watch")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		g.Expect(denied).To(BeTrue())
		ok, denied, err = o.Allowed(t.Context(), c, "ns", "monitoring.coreos.com", "servicemonitors", "list", "watch")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		g.Expect(denied).To(BeFalse())
		g.Expect(*asked).To(Equal(2))
	})
	t.Run("When asking fails, it should return the error and ask again next time", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, asked := reviewer(t, errors.New("connection refused"), nil)
		var o access.Once
		_, _, err := o.Allowed(t.Context(), c, "", "authorization.k8s.io", "subjectaccessreviews", "create")
		g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
		ok, denied, err := o.Allowed(t.Context(), c, "", "authorization.k8s.io", "subjectaccessreviews", "create")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		g.Expect(denied).To(BeFalse())
		g.Expect(*asked).To(Equal(2))
	})
}
