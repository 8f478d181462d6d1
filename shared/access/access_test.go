package access_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
)

// reviewer answers SelfSubjectAccessReviews as answer says at the time of each review, and
// counts them. An answer of errDenied denies; nil allows; any other error fails the review.
func reviewer(t *testing.T, answer func() error) (client.Client, *atomic.Int32) {
	t.Helper()
	s := runtime.NewScheme()
	if err := authorizationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			asked.Add(1)
			err := answer()
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

// answers returns an answer function that gives answers in turn, one per review.
func answers(t *testing.T, list ...error) func() error {
	i := 0
	return func() error {
		if i >= len(list) {
			t.Errorf("review %d asked, only %d expected", i+1, len(list))
			return errDenied
		}
		i++
		return list[i-1]
	}
}

var errDenied = errors.New("denied")

func TestQuestion(t *testing.T) {
	t.Parallel()
	ask := func(q *access.Question, c client.Client) (bool, bool, error) {
		return q.Allowed(context.Background(), c, "ns", "monitoring.coreos.com", "servicemonitors", "list", "watch")
	}

	t.Run("When every verb is allowed, it should say so and never ask again, not even after the interval", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			g := NewWithT(t)
			c, asked := reviewer(t, answers(t, nil, nil))
			var q access.Question
			for range 3 {
				ok, denied, err := ask(&q, c)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(BeTrue())
				g.Expect(denied).To(BeFalse())
				g.Expect(q.Recheck()).To(BeZero(), "nothing to ask again")
				time.Sleep(access.DefaultInterval)
			}
			g.Expect(asked.Load()).To(BeEquivalentTo(2), "one review per verb, once")
		})
	})

	t.Run("When a verb is denied, it should say denied once, keep the denial for the interval and then ask again", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			g := NewWithT(t)
			c, asked := reviewer(t, answers(t, nil, errDenied, nil, errDenied, nil, nil))
			var q access.Question
			ok, denied, err := ask(&q, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeFalse())
			g.Expect(denied).To(BeTrue())
			g.Expect(q.Recheck()).To(Equal(access.DefaultInterval))

			time.Sleep(access.DefaultInterval - time.Second)
			ok, denied, err = ask(&q, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeFalse())
			g.Expect(denied).To(BeFalse())
			g.Expect(asked.Load()).To(BeEquivalentTo(2), "the denial is kept within the interval")
			g.Expect(q.Recheck()).To(Equal(time.Second))

			time.Sleep(time.Second)
			ok, denied, err = ask(&q, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeFalse())
			g.Expect(denied).To(BeFalse(), "still denied: said once already")
			g.Expect(asked.Load()).To(BeEquivalentTo(4), "asked again once the interval passed")
			g.Expect(q.Recheck()).To(Equal(access.DefaultInterval))

			// The administrator grants the verbs.
			time.Sleep(access.DefaultInterval)
			ok, denied, err = ask(&q, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue(), "the grant is taken up without a restart")
			g.Expect(denied).To(BeFalse())
			g.Expect(q.Recheck()).To(BeZero())
			g.Expect(asked.Load()).To(BeEquivalentTo(6))
		})
	})

	t.Run("When the interval is set, it should ask again after that interval", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			g := NewWithT(t)
			c, asked := reviewer(t, answers(t, errDenied, nil))
			q := access.Question{Interval: 2 * time.Second}
			ok, _, err := q.Allowed(context.Background(), c, "", "authorization.k8s.io", "subjectaccessreviews", "create")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeFalse())
			g.Expect(q.Recheck()).To(Equal(2 * time.Second))
			time.Sleep(2 * time.Second)
			ok, _, err = q.Allowed(context.Background(), c, "", "authorization.k8s.io", "subjectaccessreviews", "create")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			g.Expect(asked.Load()).To(BeEquivalentTo(2))
		})
	})

	t.Run("When asking fails, it should return the error and ask again next time", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, asked := reviewer(t, answers(t, errors.New("connection refused"), nil))
		var q access.Question
		_, _, err := q.Allowed(context.Background(), c, "", "authorization.k8s.io", "subjectaccessreviews", "create")
		g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
		g.Expect(q.Recheck()).To(BeZero(), "nothing was answered")
		ok, denied, err := q.Allowed(context.Background(), c, "", "authorization.k8s.io", "subjectaccessreviews", "create")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		g.Expect(denied).To(BeFalse())
		g.Expect(asked.Load()).To(BeEquivalentTo(2))
	})
}

func TestSoonest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"When no duration is given, it should return zero", nil, 0},
		{"When every duration is zero, it should return zero", []time.Duration{0, 0}, 0},
		{"When some durations are zero, it should return the shortest positive one", []time.Duration{0, 10 * time.Second, 5 * time.Minute}, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(access.Soonest(tc.in...)).To(Equal(tc.want))
		})
	}
}
