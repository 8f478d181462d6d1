package cloudconfig

import (
	"slices"
	"strconv"
	"strings"
)

// KnownBlockStorageKeys are the [BlockStorage] keys cinder-csi-plugin v1.36.0 reads: the gcfg
// tags of BlockStorageOpts in pkg/csi/cinder/openstack/openstack.go. gcfg ignores every other
// key without a word, so a misspelt key (node-volume-attach-limits, say) silently does nothing.
var KnownBlockStorageKeys = []string{"node-volume-attach-limit", "rescan-on-resize", "ignore-volume-az", "ignore-volume-microversion"}

// attachLimitKey is the [BlockStorage] key of the node plugin's attach limit.
const attachLimitKey = "node-volume-attach-limit"

// Report is what the user's configuration holds that the driver never sees or does not know,
// and whether it sets an attach limit. It names sections and keys only, never a value: a dropped
// [Global] may hold a password.
type Report struct {
	// UnknownBlockStorageKeys are [BlockStorage] keys the driver does not know, lower-cased and
	// sorted. They are passed through (the driver ignores them; a newer one may know them).
	UnknownBlockStorageKeys []string
	// DroppedBlockStorageKeys are [BlockStorage] keys the operator does not copy
	// (trust-device-path), lower-cased and sorted.
	DroppedBlockStorageKeys []string
	// DroppedSections are the sections dropped, other than [Global], sorted and de-duplicated
	// case-insensitively (gcfg merges them so), as first spelt. Always empty with
	// Input.BlockStorageOnly: the other sections of the installer's file are the cloud
	// provider's, not dropped driver settings.
	DroppedSections []string
	// Global is whether a [Global] section (or a [Global "name"] subsection) is dropped.
	Global bool
	// KeysBeforeSections is whether keys precede the first section header (dropped).
	KeysBeforeSections bool
	// AttachLimit is the kept node-volume-attach-limit, 0 when unset; AttachLimitSet says
	// whether it is set at all.
	AttachLimit    int64
	AttachLimitSet bool
}

// Ignored reports whether r names anything the driver never sees or does not know.
func (r Report) Ignored() bool {
	return len(r.UnknownBlockStorageKeys) > 0 || len(r.DroppedBlockStorageKeys) > 0 || len(r.DroppedSections) > 0 ||
		r.Global || r.KeysBeforeSections
}

// Inspect reports on in.UserConfig what Controller and Node leave out or pass on unknown. Its
// error is theirs: a configuration they refuse is reported as invalid, not inspected.
func Inspect(in Input) (Report, error) {
	user, err := parse(in.UserConfig, in.BlockStorageOnly)
	if err != nil {
		return Report{}, err
	}
	var r Report
	for _, e := range user.blockStorage {
		if _, known := lookup(knownBlockStorage, e.key); !known {
			r.UnknownBlockStorageKeys = append(r.UnknownBlockStorageKeys, strings.ToLower(e.key))
		}
		if strings.EqualFold(e.key, attachLimitKey) {
			r.AttachLimitSet = true
			// validInt64 accepted it: decimal or 0x-prefixed hexadecimal.
			r.AttachLimit, _ = strconv.ParseInt(e.value, 0, 64)
		}
	}

	// The dropped keys, sections and headerless lines, from the text itself: parse already
	// checked its structure, so every line is blank, a comment, a header or a key.
	raw := strings.Split(strings.TrimPrefix(in.UserConfig, "\ufeff"), "\n")
	section, inSection := "", false
	seen := map[string]bool{}
	for i := 0; i < len(raw); i++ {
		t := strings.TrimSpace(raw[i])
		switch {
		case t == "" || t[0] == '#' || t[0] == ';':
			continue
		case t[0] == '[':
			end := strings.IndexByte(t, ']')
			if end < 0 {
				continue
			}
			section, inSection = strings.TrimSpace(t[1:end]), true
			if in.BlockStorageOnly || isKeptSection(section) {
				continue
			}
			if isGlobal(section) {
				r.Global = true
				continue
			}
			if folded := strings.ToLower(section); !seen[folded] {
				seen[folded] = true
				r.DroppedSections = append(r.DroppedSections, printableSection(section))
			}
			continue
		}
		eq := strings.IndexByte(t, '=')
		if eq < 0 {
			continue
		}
		if continues(strings.TrimSpace(t[eq+1:])) {
			i = lastLine(raw, i)
		}
		key := strings.ToLower(strings.TrimSpace(t[:eq]))
		switch {
		case !inSection:
			r.KeysBeforeSections = !in.BlockStorageOnly
		case strings.EqualFold(section, sectionBlockStorage):
			if _, dropped := lookup(droppedBlockStorageKeys, key); dropped && !slices.Contains(r.DroppedBlockStorageKeys, key) {
				r.DroppedBlockStorageKeys = append(r.DroppedBlockStorageKeys, key)
			}
		}
	}
	slices.Sort(r.UnknownBlockStorageKeys)
	r.UnknownBlockStorageKeys = slices.Compact(r.UnknownBlockStorageKeys)
	slices.Sort(r.DroppedBlockStorageKeys)
	slices.Sort(r.DroppedSections)
	return r, nil
}

// knownBlockStorage is KnownBlockStorageKeys as a set, for lookup.
var knownBlockStorage = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range KnownBlockStorageKeys {
		m[k] = true
	}
	return m
}()

// isKeptSection reports the sections Node keeps.
func isKeptSection(name string) bool {
	return strings.EqualFold(name, sectionBlockStorage) || strings.EqualFold(name, sectionMetadata)
}

// isGlobal reports [Global] and gcfg's subsections of it, [Global "name"].
func isGlobal(name string) bool {
	head, _, _ := strings.Cut(name, " ")
	head, _, _ = strings.Cut(head, "\"")
	return strings.EqualFold(strings.TrimSpace(head), sectionGlobal)
}

// maxSectionName bounds a section name quoted in a condition.
const maxSectionName = 40

// printableSection returns name for a condition message: as spelt when it is short and made of
// letters, digits, blanks, quotes and the punctuation of zone and cloud names; otherwise a
// placeholder, so that no odd text of the user's reaches a condition.
func printableSection(name string) string {
	ok := len(name) <= maxSectionName && !strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(` "-_.`, r))
	})
	if !ok {
		return "(a section with an unusual name)"
	}
	return name
}
