package confighash

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// maxNameLen is the longest name part of a qualified annotation key.
const maxNameLen = 63

// suffixLen is the number of hex characters appended to a shortened input name.
const suffixLen = 10

// AnnotationKey returns the pod-template annotation key for an input, names.HashAnnotationPrefix
// followed by the input name (for example "cinder.csi.openshift.io/hash-configmap-cloud-conf").
// The part after the "/" of an annotation key is limited to 63 characters from [-A-Za-z0-9_.],
// starting and ending alphanumeric. A name that does not fit is shortened deterministically: its
// valid characters, cut to length, then "-" and 10 hex characters of the SHA-256 of the full
// name, so that two long names sharing a prefix still get different keys.
func AnnotationKey(input string) string {
	domain, prefix, _ := strings.Cut(names.HashAnnotationPrefix, "/")
	if candidate := prefix + input; validName(candidate) {
		return domain + "/" + candidate
	}
	sum := sha256.Sum256([]byte(input))
	suffix := "-" + hex.EncodeToString(sum[:])[:suffixLen]
	body := strings.Map(func(r rune) rune {
		if isAlnum(r) || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, input)
	if room := maxNameLen - len(prefix) - len(suffix); len(body) > room {
		body = body[:room]
	}
	return domain + "/" + prefix + body + suffix
}

// Annotate sets one annotation per input on tmpl, keyed by AnnotationKey(name) with the input's
// hash as the value. An empty hash means the input does not exist: its key is removed rather
// than set to "", because an empty value says nothing a missing key does not, and omitting it
// from the applied object lets server-side apply drop it from the live object too.
func Annotate(tmpl *corev1.PodTemplateSpec, hashes map[string]string) {
	if tmpl == nil {
		return
	}
	for input, h := range hashes {
		key := AnnotationKey(input)
		if h == "" {
			delete(tmpl.Annotations, key)
			continue
		}
		if tmpl.Annotations == nil {
			tmpl.Annotations = make(map[string]string, len(hashes))
		}
		tmpl.Annotations[key] = h
	}
}

// validName reports whether s is a valid name part of a qualified annotation key.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen || !isAlnum(rune(s[0])) || !isAlnum(rune(s[len(s)-1])) {
		return false
	}
	for _, r := range s {
		if !isAlnum(r) && r != '-' && r != '_' && r != '.' {
			return false
		}
	}
	return true
}

// isAlnum reports whether r is an ASCII letter or digit.
func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
