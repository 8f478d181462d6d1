package conditions

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

var (
	earlier = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now     = metav1.NewTime(time.Date(2026, 6, 7, 8, 9, 10, 0, time.UTC))
)

func cond(t string, s operatorv1.ConditionStatus, at metav1.Time, reason, message string) operatorv1.OperatorCondition {
	return operatorv1.OperatorCondition{Type: t, Status: s, LastTransitionTime: at, Reason: reason, Message: message}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		now  metav1.Time
		want metav1.Time
	}{
		{
			name: "When now has sub-second precision, it should stamp whole seconds",
			now:  metav1.NewTime(time.Date(2026, 6, 7, 8, 9, 10, 999_999_999, time.UTC)),
			want: now,
		},
		{
			name: "When now is in another time zone, it should stamp the same instant in UTC",
			now:  metav1.NewTime(time.Date(2026, 6, 7, 10, 9, 10, 0, time.FixedZone("CEST", 2*3600))),
			want: now,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := New(nil, tt.now)
			s.True(names.ConditionControllerAvailable, "AsExpected", "")
			g.Expect(s.List()[0].LastTransitionTime).To(Equal(tt.want))
		})
	}

	t.Run("When nothing is set, it should list nothing, whatever exists", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := New([]operatorv1.OperatorCondition{cond(names.ConditionNodeAvailable, "True", earlier, "", "")}, now)
		g.Expect(s.List()).To(BeNil())
	})
}

func TestSet_Set(t *testing.T) {
	t.Parallel()
	const typ = names.ConditionControllerDegraded
	tests := []struct {
		name     string
		existing []operatorv1.OperatorCondition
		status   operatorv1.ConditionStatus
		reason   string
		message  string
		want     operatorv1.OperatorCondition
	}{
		{
			name:   "When the condition is new, it should stamp now",
			status: operatorv1.ConditionFalse, reason: "AsExpected",
			want: cond(typ, "False", now, "AsExpected", ""),
		},
		{
			name:     "When the status is unchanged, it should keep the last transition time",
			existing: []operatorv1.OperatorCondition{cond(typ, "False", earlier, "AsExpected", "")},
			status:   operatorv1.ConditionFalse, reason: "AsExpected",
			want: cond(typ, "False", earlier, "AsExpected", ""),
		},
		{
			name:     "When the status is unchanged but the message changes, it should keep the last transition time",
			existing: []operatorv1.OperatorCondition{cond(typ, "True", earlier, "ApplyFailed", "old")},
			status:   operatorv1.ConditionTrue, reason: "InvalidConfig", message: "new",
			want: cond(typ, "True", earlier, "InvalidConfig", "new"),
		},
		{
			name:     "When the status flips, it should stamp now",
			existing: []operatorv1.OperatorCondition{cond(typ, "False", earlier, "AsExpected", "")},
			status:   operatorv1.ConditionTrue, reason: "ApplyFailed", message: "Check the operator logs.",
			want: cond(typ, "True", now, "ApplyFailed", "Check the operator logs."),
		},
		{
			name:     "When the existing condition has no transition time, it should stamp now",
			existing: []operatorv1.OperatorCondition{cond(typ, "False", metav1.Time{}, "AsExpected", "")},
			status:   operatorv1.ConditionFalse, reason: "AsExpected",
			want: cond(typ, "False", now, "AsExpected", ""),
		},
		{
			name:     "When only another type exists, it should stamp now",
			existing: []operatorv1.OperatorCondition{cond(names.ConditionNodeDegraded, "False", earlier, "AsExpected", "")},
			status:   operatorv1.ConditionFalse, reason: "AsExpected",
			want: cond(typ, "False", now, "AsExpected", ""),
		},
		{
			name:   "When the message spans lines, it should store it on one line",
			status: operatorv1.ConditionTrue, reason: "InvalidConfig", message: "  line one\n\tline two \n",
			want: cond(typ, "True", now, "InvalidConfig", "line one line two"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := New(tt.existing, now)
			s.Set(typ, tt.status, tt.reason, tt.message)
			g.Expect(s.List()).To(Equal([]operatorv1.OperatorCondition{tt.want}))
		})
	}

	t.Run("When a type is set twice, it should keep the last", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := New([]operatorv1.OperatorCondition{cond(typ, "False", earlier, "AsExpected", "")}, now)
		s.True(typ, "ApplyFailed", "first")
		s.False(typ, "AsExpected", "")
		g.Expect(s.List()).To(Equal([]operatorv1.OperatorCondition{cond(typ, "False", earlier, "AsExpected", "")}))
	})
}

func TestSet_True(t *testing.T) {
	t.Parallel()
	t.Run("When True is called, it should record status True", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := New(nil, now)
		s.True(names.ConditionNodeAvailable, "AsExpected", "All nodes run the driver.")
		g.Expect(s.List()).To(Equal([]operatorv1.OperatorCondition{
			cond(names.ConditionNodeAvailable, "True", now, "AsExpected", "All nodes run the driver."),
		}))
	})
}

func TestSet_False(t *testing.T) {
	t.Parallel()
	t.Run("When False is called, it should record status False", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := New(nil, now)
		s.False(names.ConditionNodeProgressing, "AsExpected", "")
		g.Expect(s.List()).To(Equal([]operatorv1.OperatorCondition{
			cond(names.ConditionNodeProgressing, "False", now, "AsExpected", ""),
		}))
	})
}

func TestSet_List(t *testing.T) {
	t.Parallel()
	t.Run("When conditions are set in any order, it should list them sorted by type", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := New(nil, now)
		s.False(names.ConditionTopologyDegraded, "AsExpected", "")
		s.True(names.ConditionControllerAvailable, "AsExpected", "")
		s.False(names.ConditionConfigDegraded, "AsExpected", "")
		g.Expect(s.List()).To(Equal([]operatorv1.OperatorCondition{
			cond(names.ConditionConfigDegraded, "False", now, "AsExpected", ""),
			cond(names.ConditionControllerAvailable, "True", now, "AsExpected", ""),
			cond(names.ConditionTopologyDegraded, "False", now, "AsExpected", ""),
		}))
	})
	t.Run("When the same reconcile runs twice on its own output, it should produce identical conditions", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		run := func(existing []operatorv1.OperatorCondition, at metav1.Time) []operatorv1.OperatorCondition {
			s := New(existing, at)
			s.True(names.ConditionControllerAvailable, "AsExpected", "")
			s.True(names.ConditionControllerDegraded, "ApplyFailed", "Failed.")
			return s.List()
		}
		first := run(nil, now)
		second := run(first, metav1.NewTime(now.Add(time.Hour)))
		g.Expect(second).To(Equal(first))
	})
	t.Run("When the caller modifies the list, it should not change the Set", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := New(nil, now)
		s.True(names.ConditionNodeAvailable, "AsExpected", "")
		s.List()[0].Status = operatorv1.ConditionFalse
		g.Expect(s.List()[0].Status).To(Equal(operatorv1.ConditionTrue))
	})
}

func TestFind(t *testing.T) {
	t.Parallel()
	conds := []operatorv1.OperatorCondition{
		cond(names.ConditionNodeAvailable, "True", earlier, "", ""),
		cond(names.ConditionNodeDegraded, "False", earlier, "", ""),
	}
	tests := []struct {
		name  string
		conds []operatorv1.OperatorCondition
		typ   string
		want  *operatorv1.OperatorCondition
	}{
		{name: "When the type is present, it should return it", conds: conds, typ: names.ConditionNodeDegraded, want: &conds[1]},
		{name: "When the type is absent, it should return nil", conds: conds, typ: names.ConditionControllerAvailable},
		{name: "When the list is nil, it should return nil", typ: names.ConditionNodeAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := Find(tt.conds, tt.typ)
			if tt.want == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).To(BeIdenticalTo(tt.want), "Find should point into the slice")
		})
	}
}

func TestValidType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  string
		want bool
	}{
		{name: "When the type has the prefix and an Available suffix, it should accept it", typ: "OpenStackCinderControllerAvailable", want: true},
		{name: "When the type ends in Upgradeable, it should accept it", typ: "OpenStackCinderControllerUpgradeable", want: true},
		{name: "When the type ends in Warning, it should accept it as informational", typ: "OpenStackCinderAttachLimitWarning", want: true},
		{name: "When the type lacks the prefix, it should reject it", typ: "CinderControllerAvailable"},
		{name: "When the type has an unaggregated suffix, it should reject it", typ: "OpenStackCinderControllerReady"},
		{name: "When the type has a non-alphanumeric character, it should reject it", typ: "OpenStackCinder-Controller-Degraded"},
		{name: "When the type is empty, it should reject it", typ: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(validType(tt.typ)).To(Equal(tt.want))
		})
	}

	t.Run("When a condition type constant is declared in shared/names, it should be valid", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		types := conditionConstants(t)
		// Guards the source scan itself: these must be among what it found.
		g.Expect(types).To(ContainElements(names.ConditionControllerAvailable, names.ConditionStorageClassDegraded))
		for name, value := range types {
			g.Expect(validType(value)).To(BeTrue(), "names.%s = %q", name, value)
		}
	})
}

// conditionConstants returns every constant named Condition* in shared/names, read from the
// source so that a constant added later is checked without touching this test.
func conditionConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../names/names.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing shared/names: %v", err)
	}
	out := make(map[string]string)
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Condition") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("names.%s is not a string literal; extend conditionConstants", id.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("unquoting names.%s: %v", id.Name, err)
				}
				out[id.Name] = v
			}
		}
	}
	return out
}

func TestCleanMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxMessageLength) // two bytes per character
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "When the message is clean, it should keep it", in: "Fix line 3.", want: "Fix line 3."},
		{name: "When the message is empty, it should stay empty", in: "", want: ""},
		{name: "When the message has newlines and tabs, it should put it on one line", in: "a\nb\r\n\tc", want: "a b c"},
		{name: "When the message has surrounding space, it should trim it", in: "  a  b  ", want: "a b"},
		{name: "When the message has control characters, it should replace them", in: "a\x00\x1bb", want: "a b"},
		{
			name: "When the message is too long, it should cut it on a character boundary",
			in:   long,
			want: long[:MaxMessageLength-4] + "...",
		},
		{
			name: "When the message is exactly at the limit, it should keep it",
			in:   strings.Repeat("a", MaxMessageLength),
			want: strings.Repeat("a", MaxMessageLength),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := CleanMessage(tt.in)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(len(got)).To(BeNumerically("<=", MaxMessageLength))
			g.Expect(CleanMessage(got)).To(Equal(got), "cleaning must be idempotent")
		})
	}
}

func TestKeep(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	existing := []operatorv1.OperatorCondition{
		{Type: "OpenStackCinderNodeAvailable", Status: operatorv1.ConditionTrue, Reason: "AsExpected", Message: "up", LastTransitionTime: then},
		{Type: "OpenStackCinderNodeProgressing", Status: operatorv1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: then},
	}

	t.Run("When a kept type was not set in this reconcile, it should be sent unchanged", func(t *testing.T) {
		g := NewWithT(t)
		s := New(existing, now)
		s.Keep(existing, "OpenStackCinderNodeAvailable", "OpenStackCinderNodeMissing")
		g.Expect(s.List()).To(Equal(existing[:1]))
	})

	t.Run("When a kept type was already set in this reconcile, it should keep the new value", func(t *testing.T) {
		g := NewWithT(t)
		s := New(existing, now)
		s.False("OpenStackCinderNodeAvailable", "NotAvailable", "down")
		s.Keep(existing, "OpenStackCinderNodeAvailable")
		c := Find(s.List(), "OpenStackCinderNodeAvailable")
		g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse))
		g.Expect(c.LastTransitionTime).To(Equal(now))
	})
}

// validType reports whether t is a condition type this operator may write: it starts with
// TypePrefix, ends in a suffix cluster-storage-operator aggregates (or in WarningSuffix, for an
// informational one), and is CamelCase letters and digits in between.
func validType(t string) bool {
	rest, ok := strings.CutPrefix(t, TypePrefix)
	if !ok {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	for _, suffix := range append(slices.Clone(typeSuffixes), WarningSuffix) {
		if strings.HasSuffix(rest, suffix) {
			return true
		}
	}
	return false
}
