// Package testutil holds the helpers the managers' unit tests share: the manifests decoder, flag
// lookup in container arguments, condition sets as comparable values, and plans as names.
package testutil

import (
	"fmt"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// Decoder returns a manifests decoder for the managers' scheme, or fails the test.
func Decoder(t testing.TB) *manifests.Decoder {
	t.Helper()
	s, err := clusters.NewScheme()
	if err != nil {
		t.Fatalf("Building the scheme: %v", err)
	}
	return manifests.NewDecoder(s)
}

// FlagValue returns the value of --name=value in args, and whether it is there exactly once.
func FlagValue(args []string, name string) (string, bool) {
	var values []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			values = append(values, v)
		}
	}
	if len(values) != 1 {
		return "", false
	}
	return values[0], true
}

// CondState is the part of a condition a setter decides. It is an alias of an unnamed struct so
// that tables can list its fields without keys.
type CondState = struct {
	Status  operatorv1.ConditionStatus
	Reason  string
	Message string
}

// Conditions returns the conditions recorded in s by type.
func Conditions(s *conditions.Set) map[string]CondState {
	out := map[string]CondState{}
	for _, c := range s.List() {
		out[c.Type] = CondState{c.Status, c.Reason, c.Message}
	}
	return out
}

// NewSet returns an empty condition set stamped at the given time.
func NewSet(at time.Time) *conditions.Set {
	return conditions.New(nil, metav1.NewTime(at))
}

// StepNames names each step as cluster/Kind/namespace/name.
func StepNames(steps []plan.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = fmt.Sprintf("%s/%s/%s/%s", s.Cluster, plan.Kind(s.Object), s.Object.GetNamespace(), s.Object.GetName())
	}
	return out
}

// Objects returns the steps' objects, for golden.CompareWithFixture.
func Objects(steps []plan.Step) []any {
	out := make([]any, len(steps))
	for i, s := range steps {
		out[i] = s.Object
	}
	return out
}
