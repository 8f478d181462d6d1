// Package install reads the operator's own install manifests (manifests/install) as an installer
// applies them, and its tests check them: statically, that they grant no wildcard and follow the
// pod rules; and against real local clusters, that the operator's managers, running in-process
// under exactly that RBAC (by impersonating the ServiceAccounts the manifests bind), install,
// report, remove and reinstall the driver without a single request being forbidden.
package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// PlaceholderNamespace is the HostedControlPlane namespace in hypershift/management.yaml, which
// the installer replaces with clusters-<name>.
const PlaceholderNamespace = "clusters-example"

// Document is one object of an install manifest: its YAML text and the object it holds.
type Document struct {
	Raw    []byte
	Object *unstructured.Unstructured
}

// Read reads an install manifest, applying replace (nil for none) to its text first, as the
// installer substitutes its placeholders, and returns its objects in file order; documents that
// hold only comments are skipped.
func Read(path string, replace *strings.Replacer) ([]Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if replace != nil {
		data = []byte(replace.Replace(string(data)))
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	for i := 1; ; i++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d of %s: %w", i, path, err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(raw, &u.Object); err != nil {
			return nil, fmt.Errorf("parsing document %d of %s: %w", i, path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		docs = append(docs, Document{Raw: raw, Object: u})
	}
}
