package cloudconfig

import "strings"

// section is one INI section to write; sections without entries are left out.
type section struct {
	name    string
	entries []entry
}

// render writes sections in the given order as "key = value" lines with a blank line between
// sections. It does not use ini.v1's writer: that one quotes values holding ';' or '#' with
// backticks, which gcfg cannot read.
func render(sections []section) string {
	var b strings.Builder
	for _, s := range sections {
		if len(s.entries) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("[" + s.name + "]\n")
		for _, e := range s.entries {
			b.WriteString(e.key + " = " + quote(e.value) + "\n")
		}
	}
	return b.String()
}

// quote returns v as gcfg reads it back: bare when it is unambiguous, otherwise in double
// quotes with gcfg's escapes. Empty values are quoted too, so that "key =" is never mistaken
// for a truncated line.
func quote(v string) string {
	if v != "" && v == strings.TrimSpace(v) && !strings.ContainsAny(v, "\"\\;#\t\n") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
