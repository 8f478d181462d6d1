// Package testutil holds the helpers the managers' unit tests share: the manifests decoder, flag
// lookup in container arguments, condition sets as comparable values, plans as names, and the
// OpenStack credentials the tests feed in.
package testutil

import (
	"fmt"
	"reflect"
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

// CloudsYAML is a clouds.yaml with the default cloud, "openstack".
const CloudsYAML = "clouds: {openstack: {auth: {auth_url: https://keystone.example:5000}}}\n"

// CA stands in for an OpenStack CA bundle: a real (self-signed, Ed25519) certificate, since the
// operator refuses a CA it cannot parse.
const CA = "-----BEGIN CERTIFICATE-----\n" +
	"MIIBVTCCAQegAwIBAgIUJXVTqn4fEgCu/5oh4sq6PxGIpagwBQYDK2VwMB8xHTAb\n" +
	"BgNVBAMMFGV4YW1wbGUgT3BlblN0YWNrIENBMCAXDTI2MTEyNDA3MTcxMFoYDzIx\n" +
	"MjYxMDMxMDcxNzEwWjAfMR0wGwYDVQQDDBRleGFtcGxlIE9wZW5TdGFjayBDQTAq\n" +
	"MAUGAytlcAMhAC9jv/PwXrJxL9ofBFjBu4hZUH3fCP5jUGFvy1zC+oUPo1MwUTAd\n" +
	"BgNVHQ4EFgQUgTqwvrJd6jPlx+VflW3Qyz129howHwYDVR0jBBgwFoAUgTqwvrJd\n" +
	"6jPlx+VflW3Qyz129howDwYDVR0TAQH/BAUwAwEB/zAFBgMrZXADQQBb1bOLMXNP\n" +
	"t5ASOYbVUTiIXGvML8Q6JPeS7eJxQ2xxLL9pTjT0LH5mdPD3l7WxtqDCKaNP9V8v\n" +
	"Hzyn2i4E81AA\n" +
	"-----END CERTIFICATE-----\n"

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
		out[i] = s.String()
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

// Want returns the expected conditions of workload w by type.
func Want(w conditions.Workload, available, progressing, degraded CondState) map[string]CondState {
	return map[string]CondState{w.Available: available, w.Progressing: progressing, w.Degraded: degraded}
}

// StatusCase is one row of a table test of a workload's status setter.
type StatusCase[W any] struct {
	Name string
	// Live is the live workload, nil when it does not exist.
	Live W
	// WaitingFor explains a missing workload; ApplyErr is the applier's result.
	WaitingFor string
	ApplyErr   error
	Want       map[string]CondState
}

// StatusSetter writes a workload's conditions from its live object, what it waits for and the
// applier's error.
type StatusSetter[W any] func(s *conditions.Set, live W, waitingFor string, applyErr error)

// RunStatusCases runs each case on a fresh condition set, and then checks that the messages do
// not depend on the time or on the error's text: the same state seen later with another error
// text must write the same conditions, or every reconcile would write status.
func RunStatusCases[W any](t *testing.T, set StatusSetter[W], cases []StatusCase[W]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			t.Parallel()
			s := NewSet(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			set(s, tt.Live, tt.WaitingFor, tt.ApplyErr)
			if got := Conditions(s); !reflect.DeepEqual(got, tt.Want) {
				t.Errorf("conditions:\n got  %+v\n want %+v", got, tt.Want)
			}
			if tt.ApplyErr == nil {
				return
			}
			first := NewSet(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			later := NewSet(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
			set(first, tt.Live, tt.WaitingFor, fmt.Errorf("conflict at %s", time.Now()))
			set(later, tt.Live, tt.WaitingFor, fmt.Errorf("conflict at %s", time.Now().Add(time.Hour)))
			if a, b := Conditions(first), Conditions(later); !reflect.DeepEqual(a, b) {
				t.Errorf("the same state at another time with another error text wrote other conditions:\n %+v\n %+v", a, b)
			}
		})
	}
}

// Build calls build with the managers' decoder and fails the test if it returns an error.
func Build[T any](t testing.TB, build func(*manifests.Decoder) (T, error)) T {
	t.Helper()
	v, err := build(Decoder(t))
	if err != nil {
		t.Fatalf("Building the desired objects: %v", err)
	}
	return v
}
