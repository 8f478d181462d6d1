package apply

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fuzzGVK is the kind the fuzzed objects are applied as; Matches does not look at it.
var fuzzGVK = schema.GroupVersionKind{Group: "fuzz.example.com", Version: "v1", Kind: "Thing"}

// maxMutations bounds how many values of one input are changed one at a time, so that each
// input stays fast.
const maxMutations = 16

// FuzzMatches checks Matches on objects decoded from arbitrary JSON and prepared as Apply
// prepares them, against the live object an API server would return after applying them: the
// same values, server-owned metadata, and the owner's apply entry with the field set the server
// records (fieldSet; lists named in listKeys are keyed, the others atomic).
//
//   - desired matches that live object, and a deep copy of it;
//   - Matches changes neither argument (live is the informer cache's own object);
//   - fields desired does not set, added to live (from the second input, as the server or other
//     managers would add them), and other managers' entries do not change that;
//   - changing in live any one value desired sets makes it not match;
//   - so does an owner entry that is not the owner's apply entry for the subresource, or whose
//     field set has one field more, or one field less where that leaves its parent other
//     fields (a parent left empty reads as an atomic map, which Matches cannot tell apart).
//
// Its seeds are under testdata/fuzz/FuzzMatches; `make fuzz` explores further.
func FuzzMatches(f *testing.F) {
	f.Fuzz(func(t *testing.T, desiredJSON, extraJSON []byte, status bool) {
		var obj map[string]any
		if json.Unmarshal(desiredJSON, &obj) != nil || obj == nil {
			t.Skip()
		}
		subresource := ""
		if status {
			subresource = "status"
		}
		desired, err := prepare(&unstructured.Unstructured{Object: obj}, fuzzGVK, subresource)
		if err != nil || !acceptable("", desired) {
			t.Skip()
		}
		set := fieldSet(topLevel(desired))
		owned := []metav1.ManagedFieldsEntry{fieldsEntry(t, testOwner, set, metav1.ManagedFieldsOperationApply, subresource)}
		live := liveObject(desired, owned)

		want := runtime.DeepCopyJSON(desired)
		wantLive := live.DeepCopy()
		if !Matches(desired, live, testOwner, subresource) {
			t.Fatalf("Desired does not match what applying it gives:\ndesired: %v\nowned:   %v", desired, set)
		}
		if !reflect.DeepEqual(desired, want) || !reflect.DeepEqual(live, wantLive) {
			t.Fatal("Matches changed its arguments")
		}
		if !Matches(desired, live.DeepCopy(), testOwner, subresource) {
			t.Fatal("Desired does not match a deep copy of the live object it matches")
		}

		var extra map[string]any
		if json.Unmarshal(extraJSON, &extra) == nil && extra != nil {
			added := live.DeepCopy()
			addAbsent(added.Object, extra, true)
			added.SetManagedFields(append(slices.Clone(owned),
				fieldsEntry(t, "other-manager", fieldSet(extra), metav1.ManagedFieldsOperationUpdate, ""),
				fieldsEntry(t, "other-manager", fieldSet(extra), metav1.ManagedFieldsOperationApply, "status")))
			if !Matches(desired, added, testOwner, subresource) {
				t.Fatalf("Fields desired does not set, added to live, make it not match:\ndesired: %v\nlive:    %v", desired, added.Object)
			}
		}

		paths := leaves(nil, desired)
		if len(paths) > maxMutations {
			// Spread the ones checked over the whole object.
			step := float64(len(paths)) / maxMutations
			var some [][]any
			for i := range maxMutations {
				some = append(some, paths[int(float64(i)*step)])
			}
			paths = some
		}
		for _, path := range paths {
			if path[0] == "apiVersion" || path[0] == "kind" {
				continue
			}
			changed := live.DeepCopy()
			changeAt(changed.Object, path)
			if Matches(desired, changed, testOwner, subresource) {
				t.Fatalf("Live with the value at %v changed still matches:\ndesired: %v\nlive:    %v", path, desired, changed.Object)
			}
		}

		for name, entry := range map[string]metav1.ManagedFieldsEntry{
			"an update entry":                     fieldsEntry(t, testOwner, set, metav1.ManagedFieldsOperationUpdate, subresource),
			"an entry for another subresource":    fieldsEntry(t, testOwner, set, metav1.ManagedFieldsOperationApply, otherSubresource(subresource)),
			"an entry with a field desired lacks": fieldsEntry(t, testOwner, withField(set), metav1.ManagedFieldsOperationApply, subresource),
			"only another owner's entry":          fieldsEntry(t, "other-manager", set, metav1.ManagedFieldsOperationApply, subresource),
		} {
			other := live.DeepCopy()
			other.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
			if Matches(desired, other, testOwner, subresource) {
				t.Fatalf("Live with %s still matches:\ndesired: %v\nowned:   %s", name, desired, entry.FieldsV1.GetRawString())
			}
		}
		for _, fewer := range withoutOne(set) {
			other := live.DeepCopy()
			other.SetManagedFields([]metav1.ManagedFieldsEntry{fieldsEntry(t, testOwner, fewer, metav1.ManagedFieldsOperationApply, subresource)})
			if Matches(desired, other, testOwner, subresource) {
				t.Fatalf("Live whose owner manages one field less still matches:\ndesired: %v\nowned:   %v", desired, fewer)
			}
		}
	})
}

// acceptable reports whether an API server would take v for an apply whose keyed lists are
// those of listKeys: their items are maps with scalar key fields, unique by key.
func acceptable(name string, v any) bool {
	if atomicStructs[name] {
		return true
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if !acceptable(k, e) {
				return false
			}
		}
	case []any:
		keys, ok := listKeys[name]
		if !ok {
			return true
		}
		seen := map[string]bool{}
		for _, it := range t {
			m, ok := it.(map[string]any)
			if !ok || !acceptable("", m) {
				return false
			}
			var id []string
			for _, k := range keys {
				switch m[k].(type) {
				case string, float64, bool:
				default:
					return false
				}
				id = append(id, fmt.Sprintf("%#v", m[k]))
			}
			if key := strings.Join(id, "\x00"); !seen[key] {
				seen[key] = true
			} else {
				return false
			}
		}
	}
	return true
}

// fieldsEntry returns a managed-fields entry of manager holding set.
func fieldsEntry(t *testing.T, manager string, set map[string]any, op metav1.ManagedFieldsOperationType, subresource string) metav1.ManagedFieldsEntry {
	t.Helper()
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatalf("Encoding a field set: %v", err)
	}
	return entry(manager, op, subresource, string(raw))
}

// liveObject returns what an API server holds after the apply of desired: the same values,
// server-owned metadata and the given managed fields.
func liveObject(desired map[string]any, managed []metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	live := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(desired)}
	if _, ok := live.Object["metadata"].(map[string]any); !ok {
		live.Object["metadata"] = map[string]any{}
	}
	meta := live.Object["metadata"].(map[string]any)
	meta["uid"] = "6f1c0c1e-5b0e-4a57-9d3c-1f0e8b4b2a10"
	meta["resourceVersion"] = "48213"
	meta["generation"] = int64(3)
	meta["creationTimestamp"] = "2024-01-01T00:00:00Z"
	live.SetManagedFields(managed)
	return live
}

// addAbsent copies into dst every field of src that dst does not have, recursing into maps both
// have. top says dst is the object itself, whose managed fields are left alone.
func addAbsent(dst, src map[string]any, top bool) {
	for k, v := range src {
		d, ok := dst[k]
		switch {
		case !ok:
			if top && (k == "apiVersion" || k == "kind") {
				continue
			}
			dst[k] = runtime.DeepCopyJSONValue(v)
		case top && k == "metadata":
			dm, ok1 := d.(map[string]any)
			sm, ok2 := v.(map[string]any)
			if ok1 && ok2 {
				sm = maps(sm)
				delete(sm, "managedFields")
				addAbsent(dm, sm, false)
			}
		default:
			dm, ok1 := d.(map[string]any)
			sm, ok2 := v.(map[string]any)
			if ok1 && ok2 {
				addAbsent(dm, sm, false)
			}
		}
	}
}

// maps returns a shallow copy of m.
func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// leaves returns the path (map keys and list indexes) of every scalar in v, in a stable order.
func leaves(prefix []any, v any) [][]any {
	var out [][]any
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, leaves(append(slices.Clip(prefix), k), t[k])...)
		}
	case []any:
		for i, e := range t {
			out = append(out, leaves(append(slices.Clip(prefix), i), e)...)
		}
	default:
		out = append(out, prefix)
	}
	return out
}

// changeAt replaces the scalar at path in obj by a different one of the same kind.
func changeAt(obj map[string]any, path []any) {
	var parent any = obj
	for _, p := range path[:len(path)-1] {
		switch k := p.(type) {
		case string:
			parent = parent.(map[string]any)[k]
		case int:
			parent = parent.([]any)[k]
		}
	}
	change := func(v any) any {
		switch s := v.(type) {
		case string:
			return s + "~"
		case bool:
			return !s
		case float64:
			if s == 0 {
				return float64(1)
			}
			return 2 * s
		case int64:
			return s + 1
		default:
			return "changed"
		}
	}
	switch k := path[len(path)-1].(type) {
	case string:
		m := parent.(map[string]any)
		m[k] = change(m[k])
	case int:
		l := parent.([]any)
		l[k] = change(l[k])
	}
}

func otherSubresource(subresource string) string {
	if subresource == "" {
		return "status"
	}
	return ""
}

// withField returns set with one more top-level field.
func withField(set map[string]any) map[string]any {
	out := maps(set)
	out["f:fuzz-added"] = map[string]any{}
	return out
}

// withoutOne returns copies of set with one field or item fewer each, taken from a node that
// keeps other fields or items.
func withoutOne(set map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(node map[string]any, rebuild func(map[string]any) map[string]any)
	walk = func(node map[string]any, rebuild func(map[string]any) map[string]any) {
		keys := make([]string, 0, len(node))
		for k := range node {
			if k != "." {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if len(keys) > 1 {
				fewer := maps(node)
				delete(fewer, k)
				out = append(out, rebuild(fewer))
			}
			if child, ok := node[k].(map[string]any); ok {
				walk(child, func(c map[string]any) map[string]any {
					n := maps(node)
					n[k] = c
					return rebuild(n)
				})
			}
			if len(out) >= maxMutations {
				return
			}
		}
	}
	walk(set, func(m map[string]any) map[string]any { return m })
	return out
}
