// Package cloudsyaml owns the OpenStack credentials the operator is given: clouds.yaml, decoded
// the one way cinder-csi-plugin decodes it, and the CA bundle its clouds are reached with. The
// controlplane manager checks both with it before it applies anything, and the topology client
// takes its cloud from Decode, so the operator and the driver never read one file two ways.
//
// Every message it returns names a field or a line and never quotes the file: clouds.yaml holds
// passwords, and a password pasted into the wrong field is exactly what makes it fail to decode.
package cloudsyaml

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	yamlv3 "gopkg.in/yaml.v3"
)

// Decode decodes clouds.yaml as the driver does. On failure the error says what is wrong and
// where ("clouds.yaml has a value of the wrong type at clouds.openstack.verify (line 4): it must
// be true or false"), never a value.
//
// cinder-csi-plugin reads clouds.yaml with gophercloud/utils' clientconfig, which decodes the
// whole file with gopkg.in/yaml.v3 into its Clouds type and fails on any value of the wrong type
// (a password where `verify` wants true or false, a mapping where a string belongs), in any cloud
// entry. The decode here is the same: yaml.v3 into gophercloud's clouds.Clouds, whose fields,
// types and Region decoder are those of clientconfig.Clouds (it adds only auth.trust_id, a
// string). Unknown keys are ignored by both.
func Decode(data []byte) (clouds.Clouds, error) {
	doc, fault := decode(data)
	if fault != "" {
		return clouds.Clouds{}, errors.New("clouds.yaml " + strings.TrimSuffix(fault, "."))
	}
	return doc, nil
}

// decode is Decode with the fault as a string, "" when data decodes.
func decode(data []byte) (clouds.Clouds, string) {
	var doc clouds.Clouds
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		var te *yamlv3.TypeError
		if errors.As(err, &te) {
			return doc, wrongType(data, te)
		}
		return doc, "is not valid YAML of the clouds.yaml format."
	}
	return doc, ""
}

// Encode returns doc as clouds.yaml. gophercloud's clouds.Parse reads it back with yaml.v2; yaml.v3
// quotes every string that YAML 1.1 would read as another type ("yes", "1:20"), so the values
// come back as they were.
func Encode(doc clouds.Clouds) ([]byte, error) {
	return yamlv3.Marshal(doc)
}

// Check checks, without contacting OpenStack, that data decodes as the driver decodes it and names
// cloud with an auth URL. It returns a fault that reads after the file's name, or "". nameFrom says
// where the cloud name came from, so that a missing cloud points the user at it.
func Check(data []byte, cloud, nameFrom string) string {
	doc, fault := decode(data)
	if fault != "" {
		return fault
	}
	c, ok := doc.Clouds[cloud]
	if !ok {
		return fmt.Sprintf("has no cloud named %q (%s).", cloud, nameFrom)
	}
	if c.AuthInfo == nil || c.AuthInfo.AuthURL == "" {
		return fmt.Sprintf("has no auth.auth_url for cloud %q.", cloud)
	}
	return ""
}

// typeErrorLine matches the one kind of yaml.v3 decoding error wrongType can place: a node of
// the wrong kind for its field, "line N: cannot unmarshal !!tag[ `value`] into T".
var typeErrorLine = regexp.MustCompile("^line ([0-9]+): cannot unmarshal (!![a-z]+)")

// wrongType words the first error of a yaml.v3 decode of clouds.yaml into clouds.Clouds. yaml.v3
// quotes the offending value (a password pasted into the wrong field, perhaps), so the message is
// made anew: the field's path, found by walking the document along clouds.Clouds, its line, and
// what the field takes.
func wrongType(data []byte, te *yamlv3.TypeError) string {
	if len(te.Errors) == 0 {
		return "does not decode as clouds.yaml."
	}
	m := typeErrorLine.FindStringSubmatch(te.Errors[0])
	if m == nil {
		// The other kind is a key given twice in one mapping.
		if line, _, ok := strings.Cut(strings.TrimPrefix(te.Errors[0], "line "), ":"); ok {
			if _, err := strconv.Atoi(line); err == nil {
				return fmt.Sprintf("does not decode as clouds.yaml at line %s (a key given twice?).", line)
			}
		}
		return "does not decode as clouds.yaml."
	}
	line, _ := strconv.Atoi(m[1])
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err == nil && len(root.Content) == 1 {
		if path, t, ok := findWrongType(root.Content[0], reflect.TypeFor[clouds.Clouds](), "", line, m[2], 0); ok {
			if path == "" {
				path = "the top level"
			}
			return fmt.Sprintf("has a value of the wrong type at %s (line %d): it must be %s.", path, line, kindName(t))
		}
	}
	return fmt.Sprintf("has a value of the wrong type at line %d.", line)
}

// findWrongType walks the YAML node n, which decodes into t, and returns the path and type of the
// first node at line with tag: the one yaml.v3 refused. Only keys that are fields of clouds.Clouds
// and cloud names make up the path, so it holds no value of the file.
func findWrongType(n *yamlv3.Node, t reflect.Type, path string, line int, tag string, depth int) (string, reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// Aliases are not followed: a few anchors can stand for exponentially many nodes. yaml.v3
	// reports a wrong type behind an alias at the anchor's line, which the walk may then not
	// reach; the message gives the line alone.
	if n.Kind == yamlv3.AliasNode || depth > 32 {
		return "", nil, false
	}
	if n.Line == line && n.ShortTag() == tag {
		return path, t, true
	}
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, ok := yamlField(t, n.Content[i].Value); ok {
				if p, ft, ok := findWrongType(n.Content[i+1], f.Type, join(n.Content[i].Value), line, tag, depth+1); ok {
					return p, ft, true
				}
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			// A cloud name: quoted unless it is a plain word, so the path reads unambiguously.
			name := n.Content[i].Value
			if !plainName.MatchString(name) {
				name = strconv.Quote(name)
			}
			if p, ft, ok := findWrongType(n.Content[i+1], t.Elem(), join(name), line, tag, depth+1); ok {
				return p, ft, true
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yamlv3.SequenceNode:
		for i, item := range n.Content {
			if p, ft, ok := findWrongType(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), line, tag, depth+1); ok {
				return p, ft, true
			}
		}
	}
	return "", nil, false
}

// plainName is a cloud name that needs no quoting in a path.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)

// yamlField returns the field of struct t whose yaml tag names key.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// kindName says what a field of type t takes, in clouds.yaml words.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	default:
		return "a " + t.Kind().String()
	}
}
