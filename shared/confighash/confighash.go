// Package confighash computes deterministic hashes of the ConfigMaps and Secrets the operand pods
// mount and writes them as pod-template annotations, so that a change to any input rolls exactly
// the pods that consume it (kubelet updates mounted files, but the driver reads cloud.conf and
// clouds.yaml only at start).
//
// A hash covers only data, never metadata: a resourceVersion or label change must not roll pods.
// Each entry is written as a kind tag, then the length-prefixed key and value; length prefixes
// rather than separators, because BinaryData values and Secret values may contain any byte,
// including the NUL a separator would use. The result is the first 16 hex characters of the
// SHA-256: enough to never collide between two versions of one input, short enough to read.
package confighash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// hexLen is the number of hex characters of the SHA-256 a hash keeps.
const hexLen = 16

// Kind tags written before each entry, so that the same key and value in Data and in
// BinaryData hash differently: they are different ConfigMaps to the API server.
const (
	tagString byte = 's'
	tagBinary byte = 'b'
)

// ConfigMap returns the hash of all of cm's Data and BinaryData, or "" when cm is nil (the input
// does not exist).
func ConfigMap(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	return Data(cm.Data, cm.BinaryData)
}

// ConfigMapKeys returns the hash of only the named keys of cm, or "" when cm is nil. Callers pass
// the keys their pods mount, so that an edit to an unrelated key of a shared ConfigMap does not
// roll pods. A named key that is missing is left out, which hashes differently from the key being
// present with an empty value.
func ConfigMapKeys(cm *corev1.ConfigMap, keys ...string) string {
	if cm == nil {
		return ""
	}
	data := make(map[string]string)
	bin := make(map[string][]byte)
	for _, k := range keys {
		if v, ok := cm.Data[k]; ok {
			data[k] = v
		}
		if v, ok := cm.BinaryData[k]; ok {
			bin[k] = v
		}
	}
	return Data(data, bin)
}

// SecretKeys returns the hash of only the named keys of s, or "" when s is nil; see
// ConfigMapKeys for why. Rotating the clouds.yaml key rolls the controller, while a key it does
// not mount does not.
func SecretKeys(s *corev1.Secret, keys ...string) string {
	if s == nil {
		return ""
	}
	all := secretData(s)
	bin := make(map[string][]byte)
	for _, k := range keys {
		if v, ok := all[k]; ok {
			bin[k] = v
		}
	}
	return Data(nil, bin)
}

// secretData returns Data with StringData merged over it, without modifying s.
func secretData(s *corev1.Secret) map[string][]byte {
	if len(s.StringData) == 0 {
		return s.Data
	}
	out := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = v
	}
	for k, v := range s.StringData {
		out[k] = []byte(v)
	}
	return out
}

// Data returns the hash of string and binary entries, independent of map iteration order. A nil
// and an empty map hash the same: the API server does not distinguish them either.
func Data(data map[string]string, binaryData map[string][]byte) string {
	h := sha256.New()
	for _, k := range sortedKeys(data) {
		writeEntry(h, tagString, k, []byte(data[k]))
	}
	for _, k := range sortedKeys(binaryData) {
		writeEntry(h, tagBinary, k, binaryData[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:hexLen]
}

// writeEntry feeds one entry unambiguously: tag, key length, key, value length, value.
func writeEntry(h hash.Hash, tag byte, key string, value []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte{tag})
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	h.Write([]byte(key))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(value)))])
	h.Write(value)
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
