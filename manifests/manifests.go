// Package manifests embeds the YAML the operator applies (the operands) and decodes it into
// typed objects. The YAML holds the static shape of every object; the managers' desired-state
// functions adapt only what varies (namespace, images, replicas, flags, hashes, flavour deltas).
package manifests

import (
	"embed"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed operands/*.yaml
var operands embed.FS

// Decoder turns YAML documents into typed objects of a scheme.
type Decoder struct {
	codecs serializer.CodecFactory
}

// NewDecoder returns a Decoder for the kinds of scheme. Decoding is strict: an unknown or
// duplicated field in an embedded manifest is an error, so a typo cannot silently drop a field.
// A kind the scheme does not know (one from an optional CRD, such as the ServiceMonitor) decodes
// into an *unstructured.Unstructured; only duplicated fields are caught there.
func NewDecoder(scheme *runtime.Scheme) *Decoder {
	return &Decoder{codecs: serializer.NewCodecFactory(scheme, serializer.EnableStrict)}
}

// Operand returns every object in the operand file name (for example "node_rbac.yaml"), in file
// order.
func (d *Decoder) Operand(name string) ([]client.Object, error) {
	data, err := operands.ReadFile("operands/" + name)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", name, err)
	}
	var objs []client.Object
	for i, doc := range splitDocuments(string(data)) {
		obj, _, err := d.codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			obj, err = decodeUnstructured([]byte(doc))
		}
		if err != nil {
			return nil, fmt.Errorf("decoding document %d of manifest %s: %w", i+1, name, err)
		}
		cobj, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("document %d of manifest %s is a %T, not an object", i+1, name, obj)
		}
		objs = append(objs, cobj)
	}
	return objs, nil
}

// Object decodes the single object in the operand file name into a new T.
func Object[T client.Object](d *Decoder, name string) (T, error) {
	var zero T
	objs, err := d.Operand(name)
	if err != nil {
		return zero, err
	}
	if len(objs) != 1 {
		return zero, fmt.Errorf("manifest %s holds %d objects, want 1", name, len(objs))
	}
	obj, ok := objs[0].(T)
	if !ok {
		return zero, fmt.Errorf("manifest %s holds a %T, want %T", name, objs[0], zero)
	}
	return obj, nil
}

// decodeUnstructured decodes a document of a kind outside the scheme.
func decodeUnstructured(doc []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict(doc, &u.Object); err != nil {
		return nil, err
	}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, fmt.Errorf("apiVersion and kind are required")
	}
	return u, nil
}

// splitDocuments splits a multi-document YAML file, dropping documents that hold only comments.
func splitDocuments(data string) []string {
	var docs []string
	for _, doc := range strings.Split("\n"+data, "\n---") {
		if hasContent(doc) {
			docs = append(docs, doc)
		}
	}
	return docs
}

func hasContent(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}
