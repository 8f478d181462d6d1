package nodeconf

import (
	"slices"
	"strings"
)

// KeyError says that the value of one key of the node copy does not decode, and why. The reason
// does not repeat the value.
type KeyError struct {
	Key    string
	Reason string
}

// Error returns "key <key> <reason>".
func (e KeyError) Error() string { return "key " + e.Key + " " + e.Reason }

// DecodeError is Decode's error: one KeyError per key that does not decode, sorted by key.
// errors.As finds each KeyError in it.
type DecodeError []KeyError

// Error returns the keys' errors, separated by "; ".
func (e DecodeError) Error() string {
	msgs := make([]string, len(e))
	for i, k := range e {
		msgs[i] = k.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the KeyErrors.
func (e DecodeError) Unwrap() []error {
	out := make([]error, len(e))
	for i, k := range e {
		out[i] = k
	}
	return out
}

// Keys returns the keys that do not decode, sorted.
func (e DecodeError) Keys() []string {
	out := make([]string, len(e))
	for i, k := range e {
		out[i] = k.Key
	}
	return out
}

// sort orders e by key, so that the error reads the same whatever the order of the checks.
func (e DecodeError) sort() {
	slices.SortFunc(e, func(a, b KeyError) int { return strings.Compare(a.Key, b.Key) })
}
