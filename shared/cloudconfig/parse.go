package cloudconfig

import (
	"fmt"
	"strings"
	"unicode"

	"gopkg.in/ini.v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// entry is one key = value line of a kept section, in output order.
type entry struct {
	key   string
	value string
}

// userConfig is the part of the user's INI that survives into any cloud.conf.
type userConfig struct {
	blockStorage []entry
	metadata     []entry
}

// keyRef names a key of a section, both lower-cased, to find the line it was last set on.
type keyRef struct {
	section string
	key     string
}

// droppedBlockStorageKeys are [BlockStorage] keys never copied: trust-device-path is a legacy
// in-tree cinder option the CSI driver ignores, and csi-operator removed it too, so a cluster
// switching operators keeps the same cloud.conf.
var droppedBlockStorageKeys = map[string]bool{"trust-device-path": true}

// parse reads the user's INI and returns the kept [BlockStorage] and [Metadata] keys, validated.
// With blockStorageOnly, scan blanks every line outside [BlockStorage] first, so that nothing else
// is parsed, checked or kept (no [Metadata] either).
func parse(text string, blockStorageOnly bool) (userConfig, error) {
	only := ""
	if blockStorageOnly {
		only = sectionBlockStorage
	}
	normalised, lines, err := scan(text, only)
	if err != nil {
		return userConfig{}, err
	}
	f, err := ini.LoadSources(ini.LoadOptions{
		// gcfg matches names case-insensitively; merging "Foo" and "foo" here makes a duplicate
		// resolve the way the driver would resolve it.
		InsensitiveSections: true,
		InsensitiveKeys:     true,
		// gcfg only knows '='; ini.v1 would also split on ':'.
		KeyValueDelimiters: "=",
		// Makes `key = "a;b"` the value a;b (as in gcfg) instead of `"a`.
		UnescapeValueDoubleQuotes: true,
		// gcfg keeps single quotes as part of the value; ini.v1 would strip them and accept
		// `ignore-volume-az = 'true'`, which the driver refuses.
		PreserveSurroundedQuote: true,
	}, []byte(normalised))
	if err != nil {
		// scan rejects everything ini.v1 is known to reject, so this is a safety net only.
		return userConfig{}, &ConfigError{Key: names.KeyUserConfig, Reason: "not a valid INI file", Err: err}
	}

	var out userConfig
	if out.blockStorage, err = keep(f, sectionBlockStorage, lines, droppedBlockStorageKeys, blockStorageValidators); err != nil {
		return userConfig{}, err
	}
	if out.metadata, err = keep(f, sectionMetadata, lines, nil, metadataValidators); err != nil {
		return userConfig{}, err
	}
	return out, nil
}

// keep returns the keys of one section in the user's order, minus the dropped ones, after
// checking each value the driver would otherwise refuse at start.
func keep(f *ini.File, name string, lines map[keyRef]int, drop map[string]bool, validators map[string]validator) ([]entry, error) {
	if !f.HasSection(name) {
		return nil, nil
	}
	sec := f.Section(name)
	var out []entry
	for _, k := range sec.Keys() {
		key := k.Name()
		if _, ok := lookup(drop, key); ok {
			continue
		}
		// Value, not String: String expands ini.v1's %(name)s references, which gcfg does not have.
		value := k.Value()
		line := lines[keyRef{section: strings.ToLower(name), key: key}]
		if strings.ContainsFunc(value, isForbiddenControl) {
			return nil, &ConfigError{Key: names.KeyUserConfig, Line: line,
				Reason: fmt.Sprintf("[%s] %s contains a control character", name, key)}
		}
		// ini.v1 unescapes only \" inside quotes while gcfg also unescapes \\, \n and \t, so a
		// backslash would not survive the trip unchanged; no key of these sections takes one.
		if strings.Contains(value, `\`) {
			return nil, &ConfigError{Key: names.KeyUserConfig, Line: line,
				Reason: fmt.Sprintf("[%s] %s contains a backslash", name, key)}
		}
		if validate, ok := lookup(validators, key); ok {
			if reason := validate(value); reason != "" {
				return nil, &ConfigError{Key: names.KeyUserConfig, Line: line,
					Reason: fmt.Sprintf("[%s] %s %s", name, key, reason)}
			}
		}
		out = append(out, entry{key: key, value: value})
	}
	return out, nil
}

// lookup returns the entry of m whose key gcfg would take name for. gcfg matches names with
// strings.EqualFold, which folds more than the lower-casing ini.v1 does: "reſcan-on-resize" (with
// U+017F, a long s) is the driver's rescan-on-resize, and its value must be checked as one.
func lookup[V any](m map[string]V, name string) (V, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// isForbiddenControl reports characters cloud.conf cannot carry: gcfg has escapes only for tab
// and newline, and a newline in a value would be a second line to any other reader.
func isForbiddenControl(r rune) bool {
	return r != '\t' && unicode.IsControl(r)
}

// scan checks the structure of the user's INI line by line, because ini.v1's errors carry no
// line number and the user needs one. It accepts only what both ini.v1 and gcfg read the same
// way, returns the text with section headers rewritten to a plain "[name]" (ini.v1 finds a
// header's end with the last ']' on the line, so a comment holding ']' would change the name),
// and records the line each key was last set on. Line structure is kept one to one, so ini.v1
// sees the keys on the same lines.
//
// When only names a section, the lines of every other section (and those before the first
// header) are blanked instead of checked: section headers are still checked, since they decide
// which lines belong to the section, but no other line of those sections reaches ini.v1, a
// check or an error.
func scan(text, only string) (string, map[keyRef]int, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	raw := strings.Split(text, "\n")
	lines := make(map[keyRef]int)
	section := ""
	// skipped reports whether the current section's lines are blanked rather than read; gcfg
	// matches section names with strings.EqualFold.
	skipped := func() bool { return only != "" && !strings.EqualFold(section, only) }
	bad := func(i int, reason string) (string, map[keyRef]int, error) {
		return "", nil, &ConfigError{Key: names.KeyUserConfig, Line: i + 1, Reason: reason}
	}
	for i := 0; i < len(raw); i++ {
		t := strings.TrimSpace(raw[i])
		switch {
		case t == "" || t[0] == '#' || t[0] == ';':
			if skipped() {
				raw[i] = ""
			}
			continue
		case t[0] == '[':
			end := strings.IndexByte(t, ']')
			if end < 0 {
				return bad(i, `section header is missing its closing "]"`)
			}
			if rest := strings.TrimSpace(t[end+1:]); rest != "" && rest[0] != '#' && rest[0] != ';' {
				return bad(i, "unexpected text after section header")
			}
			section = strings.TrimSpace(t[1:end])
			if section == "" {
				return bad(i, "section name is empty")
			}
			raw[i] = "[" + section + "]"
			if skipped() {
				raw[i] = ""
			}
			continue
		}

		eq := strings.IndexByte(t, '=')
		value := ""
		if eq >= 0 {
			value = strings.TrimSpace(t[eq+1:])
		}
		if skipped() {
			end := i
			if continues(value) {
				end = lastLine(raw, i)
			}
			for j := i; j <= end; j++ {
				raw[j] = ""
			}
			i = end
			continue
		}
		if eq < 0 {
			return bad(i, `expected "key = value" or a [section] header`)
		}
		key := strings.TrimSpace(t[:eq])
		if key == "" {
			return bad(i, `key name is missing before "="`)
		}
		if !validKeyName(key) {
			return bad(i, "invalid key name: keys start with a letter and contain only letters, digits and hyphens")
		}
		lines[keyRef{section: strings.ToLower(section), key: strings.ToLower(key)}] = i + 1

		switch {
		case strings.HasPrefix(value, "`") || strings.HasPrefix(value, `"""`):
			return bad(i, "backtick and triple-quoted values are not supported by the driver")
		case strings.HasPrefix(value, `"`):
			if !strings.Contains(value[1:], `"`) {
				return bad(i, "quoted value is missing its closing quote")
			}
		case continues(value):
			i = lastLine(raw, i)
		}
	}
	return strings.Join(raw, "\n"), lines, nil
}

// continues reports whether an unquoted value ends in a backslash, which continues it on the
// next line.
func continues(value string) bool {
	return !strings.HasPrefix(value, `"`) && !strings.HasPrefix(value, "`") && strings.HasSuffix(value, `\`)
}

// lastLine returns the last line of a value that continues after line i: the first later line
// that does not end in a backslash or is blank, as ini.v1 reads it.
func lastLine(raw []string, i int) int {
	for i+1 < len(raw) {
		i++
		next := strings.TrimSpace(raw[i])
		if next == "" || !strings.HasSuffix(next, `\`) {
			break
		}
	}
	return i
}

// validKeyName reports whether gcfg accepts name as a variable name: a letter, then letters,
// digits and hyphens. Anything else makes the driver fail to start.
func validKeyName(name string) bool {
	for i, r := range name {
		switch {
		case unicode.IsLetter(r):
		case i > 0 && (unicode.IsDigit(r) || r == '-'):
		default:
			return false
		}
	}
	return name != ""
}
