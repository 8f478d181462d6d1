package conditions

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// A failed status write is one request against a fake client: what the API server does with a
// status write that succeeds is covered by shared/apply's tests, which start one.
func TestApplyStatus_Error(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(driverGVK, meta.RESTScopeRoot)
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "operator.openshift.io", Resource: "clustercsidrivers"}, names.ClusterCSIDriverName,
		errors.New(`User "`+secret+`" cannot patch resource "clustercsidrivers/status"`))
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
			return denied
		},
	}).Build()

	s := New(nil, now)
	s.True(names.ConditionNodeAvailable, ReasonAsExpected, "")
	err = ApplyStatus(t.Context(), apply.New(c, names.FieldOwnerGuest).On(apply.ClusterGuest), names.ClusterCSIDriverName, s.List(), nil)

	g.Expect(err).To(MatchError(ContainSubstring("writing ClusterCSIDriver conditions: writing the status of ClusterCSIDriver " + names.ClusterCSIDriverName + " on the guest cluster: ")))
	oe, ok := errors.AsType[*apply.ObjectError](err)
	g.Expect(ok).To(BeTrue())
	g.Expect(oe.Op).To(Equal(apply.OpWriteStatus))
	g.Expect(oe.GVK).To(Equal(operatorv1.GroupVersion.WithKind("ClusterCSIDriver")))
	g.Expect(oe.Resource).To(Equal("clustercsidrivers"))

	reason, msg := Classify(err, "Writing the conditions")
	g.Expect(reason).To(Equal(ReasonForbidden))
	g.Expect(msg).To(Equal("Writing the status of ClusterCSIDriver cluster-wide failed: the guest cluster's API server forbade it. " +
		"The user of the operator's guest kubeconfig needs the RBAC verbs patch on clustercsidrivers/status (API group operator.openshift.io) cluster-wide: " +
		"grant them with a ClusterRole and ClusterRoleBinding. The operator retries."))
}
