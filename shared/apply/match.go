package apply

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Matches reports whether applying desired (as prepared for the request) as owner would leave
// live unchanged. It is deliberately conservative: when in doubt it answers false, which costs
// one apply request that the API server then finds to be a no-op.
//
// Two things must hold:
//   - every value desired sets is already present in live (desired is a subset of live). An
//     atomic list must have the same length and match element by element, because the apply
//     replaces it whole. An associative list (keyed, or a set), as the owner's managed fields
//     record it, is matched item by item by key: items other owners added may stay, as they
//     would after the apply (the other manager's ClusterCSIDriver conditions, for example);
//   - the owner's managed fields in live are exactly the fields desired sets. A field the owner
//     manages but no longer sends would be removed by the apply; a field it sends but does not
//     manage yet (an adopted object) would change ownership.
func Matches(desired map[string]any, live client.Object, owner, subresource string) bool {
	owned, ok := ownedFields(live.GetManagedFields(), owner, subresource)
	if !ok {
		return false
	}
	liveMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false
	}
	for k, v := range desired {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		if !subset(v, liveMap[k], childSet(owned, "f:"+k)) {
			return false
		}
	}
	return sameFields(topLevel(desired), owned)
}

// topLevel drops what the API server never records in managed fields.
func topLevel(desired map[string]any) map[string]any {
	out := make(map[string]any, len(desired))
	for k, v := range desired {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		if k == "metadata" {
			meta, _ := v.(map[string]any)
			rest := make(map[string]any, len(meta))
			for mk, mv := range meta {
				if mk != "name" && mk != "namespace" {
					rest[mk] = mv
				}
			}
			if len(rest) == 0 {
				continue
			}
			v = rest
		}
		out[k] = v
	}
	return out
}

// ownedFields returns the decoded field set of owner's apply entry for the subresource.
func ownedFields(entries []metav1.ManagedFieldsEntry, owner, subresource string) (map[string]any, bool) {
	for _, e := range entries {
		if e.Manager != owner || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != subresource {
			continue
		}
		if e.FieldsV1 == nil {
			return map[string]any{}, true
		}
		var set map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &set); err != nil {
			return nil, false
		}
		return set, true
	}
	return nil, false
}

// subset reports whether every value in want is present in have. set is the owner's FieldsV1
// node for want (nil when unknown); it tells an associative list from an atomic one.
func subset(want, have any, set map[string]any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			hv, ok := h[k]
			if !ok || !subset(v, hv, childSet(set, "f:"+k)) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return false
		}
		if countPrefix(set, "k:")+countPrefix(set, "v:") > 0 {
			for _, item := range w {
				if !containsItem(h, item, set) {
					return false
				}
			}
			return true
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i], nil) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(want, have)
	}
}

// containsItem reports whether the associative list have holds item: the live item with the
// same key (set's "k:" entry that names item) holding item's values, or, for a set ("v:"
// entries), an equal value. An item set does not name is not contained: the apply would add it.
func containsItem(have []any, item any, set map[string]any) bool {
	one := []any{item}
	for k, e := range set {
		switch {
		case strings.HasPrefix(k, "k:"):
			if findItem(one, k) != 0 {
				continue
			}
			child, _ := e.(map[string]any)
			i := findItem(have, k)
			return i >= 0 && subset(item, have[i], withoutDotSet(child))
		case strings.HasPrefix(k, "v:"):
			if findItem(one, k) != 0 {
				continue
			}
			return findItem(have, k) >= 0
		}
	}
	return false
}

// childSet returns the FieldsV1 node under key, or nil.
func childSet(set map[string]any, key string) map[string]any {
	child, _ := set[key].(map[string]any)
	return child
}

// sameFields reports whether the fields set in value are exactly the fields in set (a decoded
// FieldsV1 node: "f:<name>" for map fields, "k:<json>" / "v:<json>" / "i:<n>" for list items, "."
// for the item itself).
func sameFields(value any, set map[string]any) bool {
	switch v := value.(type) {
	case map[string]any:
		if len(set) == 0 {
			// An atomic map (or struct) is recorded as a single leaf: owning the leaf means
			// owning the whole value, which subset already compared.
			return true
		}
		seen := 0
		for k, e := range v {
			child, ok := set["f:"+k].(map[string]any)
			if !ok || !sameFields(e, child) {
				return false
			}
			seen++
		}
		return seen == countPrefix(set, "f:")
	case []any:
		if countPrefix(set, "k:")+countPrefix(set, "v:")+countPrefix(set, "i:") == 0 {
			// An atomic list is one leaf.
			return true
		}
		matched := make([]bool, len(v))
		for k, e := range set {
			child, _ := e.(map[string]any)
			i := findItem(v, k)
			if i < 0 || matched[i] {
				if k == "." {
					continue
				}
				return false
			}
			matched[i] = true
			if strings.HasPrefix(k, "k:") && !sameFields(v[i], withoutDotSet(child)) {
				return false
			}
		}
		for _, m := range matched {
			if !m {
				return false
			}
		}
		return true
	default:
		return true
	}
}

// findItem returns the index of the list item a FieldsV1 item key names, or -1.
func findItem(items []any, key string) int {
	switch {
	case strings.HasPrefix(key, "k:"):
		var keys map[string]any
		if err := json.Unmarshal([]byte(key[2:]), &keys); err != nil {
			return -1
		}
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			match := true
			for kk, kv := range keys {
				if !scalarEqual(m[kk], kv) {
					match = false
					break
				}
			}
			if match {
				return i
			}
		}
	case strings.HasPrefix(key, "v:"):
		var want any
		if err := json.Unmarshal([]byte(key[2:]), &want); err != nil {
			return -1
		}
		for i, it := range items {
			if scalarEqual(it, want) || reflect.DeepEqual(it, want) {
				return i
			}
		}
	case strings.HasPrefix(key, "i:"):
		n, err := strconv.Atoi(key[2:])
		if err == nil && n >= 0 && n < len(items) {
			return n
		}
	}
	return -1
}

func withoutDotSet(set map[string]any) map[string]any {
	if _, ok := set["."]; !ok {
		return set
	}
	out := make(map[string]any, len(set))
	for k, v := range set {
		if k != "." {
			out[k] = v
		}
	}
	return out
}

func countPrefix(set map[string]any, prefix string) int {
	n := 0
	for k := range set {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// scalarEqual compares JSON scalars, treating every number kind as the same number: the typed
// converter yields int64 where JSON decoding yields float64.
func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
