package apply

import (
	"encoding/json"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// listKeys are the associative-list keys, from the Kubernetes OpenAPI schema, of the lists in
// the objects these tests use; every other list is atomic.
var listKeys = map[string][]string{
	"containers":   {"name"},
	"env":          {"name"},
	"ports":        {"containerPort", "protocol"},
	"volumeMounts": {"mountPath"},
	"volumes":      {"name"},
	"conditions":   {"type"},
}

// atomicStructs are the fields, by name, whose struct type is atomic (metav1.LabelSelector): the
// API server records them as a single leaf.
var atomicStructs = map[string]bool{"selector": true, "labelSelector": true}

// fieldSet builds the decoded FieldsV1 an API server records for an apply of value, so that
// table tests and the benchmark have realistic managed fields without an API server (the
// integration test checks it against a real one).
func fieldSet(value map[string]any) map[string]any {
	return fieldSetOf("", value)
}

func fieldSetOf(name string, v any) map[string]any {
	out := map[string]any{}
	if atomicStructs[name] {
		return out
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			out["f:"+k] = fieldSetOf(k, e)
		}
	case []any:
		keys, ok := listKeys[name]
		if !ok {
			return out
		}
		for _, it := range t {
			m, _ := it.(map[string]any)
			id := map[string]any{}
			for _, k := range keys {
				id[k] = m[k]
			}
			raw, _ := json.Marshal(id)
			child := fieldSetOf("", m)
			child["."] = map[string]any{}
			out["k:"+string(raw)] = child
		}
	}
	return out
}

// set decodes a FieldsV1 JSON literal.
func set(t testing.TB, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("Decoding %s: %v", js, err)
	}
	return m
}

// entry returns a managed-fields entry holding the FieldsV1 literal js.
func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, js string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{
		Manager: manager, Operation: op, Subresource: subresource, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(js),
	}
}

// obj decodes a JSON object literal into a map.
func obj(t testing.TB, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("Decoding %s: %v", js, err)
	}
	return m
}

func TestMatches(t *testing.T) {
	t.Parallel()
	const owner = "op"
	// desiredCM is what Apply would send for a ConfigMap with one label and two data keys.
	const desiredCM = `{"apiVersion":"v1","kind":"ConfigMap",
		"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},
		"data":{"a":"1","b":"2"}}`
	const ownedCM = `{"f:metadata":{"f:labels":{"f:l":{}}},"f:data":{"f:a":{},"f:b":{}}}`

	tests := []struct {
		name        string
		desired     string
		live        string
		managed     []metav1.ManagedFieldsEntry
		subresource string
		want        bool
	}{
		{
			name:    "When live holds the desired values and the owner manages exactly those fields, it should match",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","uid":"u","resourceVersion":"7","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", ownedCM)},
			want:    true,
		},
		{
			name:    "When a value differs, it should not match",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"changed"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", ownedCM)},
		},
		{
			name:    "When another manager added fields with an update, it should match and leave them alone",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"},"annotations":{"user":"x"}},"data":{"a":"1","b":"2","c":"3"}}`,
			managed: []metav1.ManagedFieldsEntry{
				entry(owner, metav1.ManagedFieldsOperationApply, "", ownedCM),
				entry("kubectl", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:annotations":{".":{},"f:user":{}}},"f:data":{"f:c":{}}}`),
			},
			want: true,
		},
		{
			name:    "When only another manager's update entry exists (an object to adopt), it should not match",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`,
			managed: []metav1.ManagedFieldsEntry{entry("csi-operator", metav1.ManagedFieldsOperationUpdate, "", ownedCM)},
		},
		{
			name:    "When the owner's entry is an update rather than an apply, it should not match",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationUpdate, "", ownedCM)},
		},
		{
			name:    "When the owner manages a field it no longer sends, it should not match so the apply removes it",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"2","old":"x"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:labels":{"f:l":{}}},"f:data":{"f:a":{},"f:b":{},"f:old":{}}}`)},
		},
		{
			name:    "When the owner once set a label it no longer sends, it should not match",
			desired: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"a":"1","b":"2"}}`,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", ownedCM)},
		},
		{
			name:    "When the owner sends a field it does not manage yet, it should not match",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:labels":{"f:l":{}}},"f:data":{"f:a":{}}}`)},
		},
		{
			name:        "When the owner's entry is for the main resource but the status is compared, it should not match",
			desired:     `{"apiVersion":"v1","kind":"X","metadata":{"name":"c"},"status":{"phase":"Ready"}}`,
			live:        `{"metadata":{"name":"c"},"status":{"phase":"Ready"}}`,
			managed:     []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", `{"f:status":{"f:phase":{}}}`)},
			subresource: "status",
		},
		{
			name:        "When the owner's status entry holds exactly its conditions among another owner's, it should match",
			desired:     `{"apiVersion":"v1","kind":"X","metadata":{"name":"c"},"status":{"conditions":[{"type":"A","status":"True"}]}}`,
			live:        `{"metadata":{"name":"c"},"status":{"conditions":[{"type":"B","status":"False"},{"type":"A","status":"True"}]}}`,
			subresource: "status",
			managed: []metav1.ManagedFieldsEntry{
				entry(owner, metav1.ManagedFieldsOperationApply, "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"A\"}":{".":{},"f:type":{},"f:status":{}}}}}`),
				entry("other", metav1.ManagedFieldsOperationApply, "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"B\"}":{".":{},"f:type":{},"f:status":{}}}}}`),
			},
			want: true,
		},
		{
			name:    "When the owner's FieldsV1 cannot be decoded, it should not match",
			desired: desiredCM,
			live:    `{"metadata":{"name":"c","namespace":"ns","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`,
			managed: []metav1.ManagedFieldsEntry{entry(owner, metav1.ManagedFieldsOperationApply, "", `{not json`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			live := &unstructured.Unstructured{Object: obj(t, tt.live)}
			live.SetManagedFields(tt.managed)
			g.Expect(Matches(obj(t, tt.desired), live, owner, tt.subresource)).To(Equal(tt.want))
		})
	}

	t.Run("When the live object is typed and defaulted by the API server, it should match what was applied", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		desired, live := realisticDeployment(t)
		g.Expect(Matches(desired, live, testOwner, "")).To(BeTrue())

		live.Spec.Template.Spec.Containers[0].Args = append(live.Spec.Template.Spec.Containers[0].Args, "--extra")
		g.Expect(Matches(desired, live, testOwner, "")).To(BeFalse(), "an atomic list that grew must be applied again")
	})
}

func TestSubset(t *testing.T) {
	t.Parallel()
	const keyed = `{"k:{\"name\":\"a\"}":{".":{},"f:name":{},"f:v":{}}}`
	tests := []struct {
		name       string
		want, have any
		set        string
		expected   bool
	}{
		{name: "When scalars are equal, it should hold", want: "x", have: "x", expected: true},
		{name: "When numbers differ only in Go type, it should hold", want: int64(3), have: float64(3), expected: true},
		{name: "When a number is compared with a string, it should not hold", want: int64(3), have: "3"},
		{name: "When the live value is missing, it should not hold", want: "x", have: nil},
		{name: "When live has more map keys, it should hold", want: map[string]any{"a": "1"}, have: map[string]any{"a": "1", "b": "2"}, expected: true},
		{name: "When live lacks a map key, it should not hold", want: map[string]any{"a": "1", "b": "2"}, have: map[string]any{"a": "1"}},
		{name: "When a map is compared with a list, it should not hold", want: map[string]any{"a": "1"}, have: []any{"a"}},
		{name: "When an atomic list is equal, it should hold", want: []any{"--a", "--b"}, have: []any{"--a", "--b"}, expected: true},
		{name: "When an atomic list has an extra live item, it should not hold", want: []any{"--a"}, have: []any{"--a", "--b"}},
		{name: "When an atomic list is reordered, it should not hold", want: []any{"--a", "--b"}, have: []any{"--b", "--a"}},
		{
			name: "When an atomic list's items have defaulted live fields, it should hold",
			want: []any{map[string]any{"key": "k"}}, have: []any{map[string]any{"key": "k", "operator": "Equal"}}, expected: true,
		},
		{
			name: "When a keyed list has another owner's item too, it should hold",
			want: []any{map[string]any{"name": "a", "v": "1"}},
			have: []any{map[string]any{"name": "b", "v": "9"}, map[string]any{"name": "a", "v": "1"}},
			set:  keyed, expected: true,
		},
		{
			name: "When a keyed list's item has a different value, it should not hold",
			want: []any{map[string]any{"name": "a", "v": "1"}},
			have: []any{map[string]any{"name": "a", "v": "2"}},
			set:  keyed,
		},
		{
			name: "When a keyed list lacks the item, it should not hold",
			want: []any{map[string]any{"name": "a", "v": "1"}},
			have: []any{map[string]any{"name": "b", "v": "1"}},
			set:  keyed,
		},
		{
			name: "When the owner's set does not name the desired item, it should not hold",
			want: []any{map[string]any{"name": "new", "v": "1"}},
			have: []any{map[string]any{"name": "new", "v": "1"}},
			set:  keyed,
		},
		{
			name: "When a set list has another owner's value too, it should hold",
			want: []any{"Persistent"}, have: []any{"Ephemeral", "Persistent"},
			set: `{"v:\"Persistent\"":{}}`, expected: true,
		},
		{
			name: "When a set list lacks the value, it should not hold",
			want: []any{"Persistent"}, have: []any{"Ephemeral"},
			set: `{"v:\"Persistent\"":{}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s map[string]any
			if tt.set != "" {
				s = set(t, tt.set)
			}
			NewWithT(t).Expect(subset(tt.want, tt.have, s)).To(Equal(tt.expected))
		})
	}
}

func TestSameFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		value    string
		set      string
		expected bool
	}{
		{
			name:  "When the set names exactly the value's fields, it should hold",
			value: `{"metadata":{"labels":{"a":"1"}},"data":{"x":"1"}}`,
			set:   `{"f:metadata":{"f:labels":{"f:a":{}}},"f:data":{"f:x":{}}}`, expected: true,
		},
		{
			name:  "When the set has a field the value lacks, it should not hold",
			value: `{"data":{"x":"1"}}`,
			set:   `{"f:data":{"f:x":{},"f:y":{}}}`,
		},
		{
			name:  "When the value has a field the set lacks, it should not hold",
			value: `{"data":{"x":"1","y":"2"}}`,
			set:   `{"f:data":{"f:x":{}}}`,
		},
		{
			name:  "When a struct is atomic (one leaf), it should hold whatever its fields",
			value: `{"spec":{"selector":{"matchLabels":{"app":"a"}}}}`,
			set:   `{"f:spec":{"f:selector":{}}}`, expected: true,
		},
		{
			name:  "When an atomic list is one leaf, it should hold",
			value: `{"args":["--a","--b"]}`,
			set:   `{"f:args":{}}`, expected: true,
		},
		{
			name:     "When a keyed list names exactly the value's items, it should hold",
			value:    `{"containers":[{"name":"a","image":"i"},{"name":"b","image":"j"}]}`,
			set:      `{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:name":{},"f:image":{}},"k:{\"name\":\"b\"}":{".":{},"f:name":{},"f:image":{}}}}`,
			expected: true,
		},
		{
			name:  "When the owner still holds an item it no longer sends, it should not hold",
			value: `{"containers":[{"name":"a","image":"i"}]}`,
			set:   `{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:name":{},"f:image":{}},"k:{\"name\":\"b\"}":{".":{},"f:name":{},"f:image":{}}}}`,
		},
		{
			name:  "When the value has an item the owner does not hold yet, it should not hold",
			value: `{"containers":[{"name":"a","image":"i"},{"name":"b","image":"j"}]}`,
			set:   `{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:name":{},"f:image":{}}}}`,
		},
		{
			name:  "When a keyed item's fields differ from the set, it should not hold",
			value: `{"containers":[{"name":"a","image":"i","args":["--x"]}]}`,
			set:   `{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:name":{},"f:image":{}}}}`,
		},
		{
			name:     "When a key has several fields and numbers, it should find the item",
			value:    `{"ports":[{"containerPort":9202,"protocol":"TCP","name":"m"}]}`,
			set:      `{"f:ports":{"k:{\"containerPort\":9202,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{},"f:name":{}}}}`,
			expected: true,
		},
		{
			name:  "When a set list names exactly the values, it should hold",
			value: `{"modes":["Persistent"]}`,
			set:   `{"f:modes":{"v:\"Persistent\"":{}}}`, expected: true,
		},
		{
			name:  "When a set list holds a value no longer sent, it should not hold",
			value: `{"modes":["Persistent"]}`,
			set:   `{"f:modes":{"v:\"Persistent\"":{},"v:\"Ephemeral\"":{}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(sameFields(obj(t, tt.value), set(t, tt.set))).To(Equal(tt.expected))
		})
	}
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	live := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: "c", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2,
				CreationTimestamp: metav1.Now(), Labels: map[string]string{"l": "1"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
			},
			Data: map[string]string{"a": "1"},
		}
	}

	t.Run("When preparing an apply, it should keep metadata and data and drop server-owned fields", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		m, err := prepare(live(), gvk, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m).To(Equal(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": "ns", "labels": map[string]any{"l": "1"}},
			"data":     map[string]any{"a": "1"},
		}))
	})

	t.Run("When preparing a status apply, it should send identity and status only", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Labels: map[string]string{"l": "1"}},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
			Status:     appsv1.DeploymentStatus{Replicas: 2},
		}
		m, err := prepare(d, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "status")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m).To(Equal(map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "namespace": "ns"},
			"status":   map[string]any{"replicas": int64(2)},
		}))
	})

	t.Run("When a typed object has unset structs, it should send no nulls", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		m, err := prepare(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}},
			schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "")
		g.Expect(err).NotTo(HaveOccurred())
		raw, err := json.Marshal(m)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(raw)).NotTo(ContainSubstring("null"))
		g.Expect(m).NotTo(HaveKey("status"))
	})
}

// testOwner is the field owner the tests apply as.
const testOwner = "cinder-csi-operator-test"

// The fixtures shared with the harness's Applier tests (e2e/applier), which apply the Deployment
// to a real API server and record the fields it keeps for the apply (UPDATE=1 there rewrites
// deployment_fields.json; UPDATE=1 here rewrites deployment.yaml).
const (
	deploymentFixture = "testdata/deployment.yaml"
	fieldsFixture     = "testdata/deployment_fields.json"
)

// testDeployment returns the operator's real controller Deployment with images filled in.
func testDeployment(t testing.TB, d *manifests.Decoder, ns string) *appsv1.Deployment {
	t.Helper()
	dep, err := manifests.Object[*appsv1.Deployment](d, "controller.yaml")
	if err != nil {
		t.Fatalf("Loading the controller Deployment: %v", err)
	}
	dep.Namespace = ns
	dep.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue}
	dep.Annotations = map[string]string{"example.com/kept": "yes", "example.com/dropped": "yes"}
	dep.Spec.Replicas = ptr.To[int32](2)
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		c.Image = "" + c.Name + ":v1"
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
	}
	return dep
}

// TestFieldSetMatchesAPIServer checks the hand-built field sets of these tests against the one
// a real API server recorded for the controller Deployment, and that the harness applies the
// Deployment these tests build.
func TestFieldSetMatchesAPIServer(t *testing.T) {
	g := NewWithT(t)
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	dep := testDeployment(t, manifests.NewDecoder(scheme), "")
	b, err := yaml.Marshal(dep)
	g.Expect(err).NotTo(HaveOccurred())
	if update := os.Getenv("UPDATE"); update == "1" || update == "true" {
		g.Expect(os.WriteFile(deploymentFixture, b, 0o644)).To(Succeed())
	}
	fixture, err := os.ReadFile(deploymentFixture)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(fixture)).To(Equal(string(b)), "%s is stale; UPDATE=1 rewrites it", deploymentFixture)

	desired, err := prepare(dep, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "")
	g.Expect(err).NotTo(HaveOccurred())
	recorded, err := os.ReadFile(fieldsFixture)
	g.Expect(err).NotTo(HaveOccurred())
	var want map[string]any
	g.Expect(json.Unmarshal(recorded, &want)).To(Succeed())
	g.Expect(fieldSet(topLevel(desired))).To(Equal(want))
}

// realisticDeployment returns what Apply sends for the operator's controller Deployment, and
// the live object an API server would hand back after that apply: the same values plus
// defaulted fields and status, the owner's apply entry and the controller-manager's status
// entry.
func realisticDeployment(t testing.TB) (map[string]any, *appsv1.Deployment) {
	t.Helper()
	scheme, err := clusters.NewScheme()
	if err != nil {
		t.Fatalf("Building the scheme: %v", err)
	}
	dep := testDeployment(t, manifests.NewDecoder(scheme), "clusters-example")
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	desired, err := prepare(dep, gvk, "")
	if err != nil {
		t.Fatalf("Preparing: %v", err)
	}
	raw, err := json.Marshal(fieldSet(topLevel(desired)))
	if err != nil {
		t.Fatalf("Encoding the field set: %v", err)
	}

	live := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(desired, live); err != nil {
		t.Fatalf("Converting: %v", err)
	}
	live.UID, live.ResourceVersion, live.Generation = "0f4c", "48213", 3
	live.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	live.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	pod := &live.Spec.Template.Spec
	pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.SecurityContext = &corev1.PodSecurityContext{}
	for i := range pod.Containers {
		pod.Containers[i].TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	live.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	live.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: testOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw))},
		entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status",
			`{"f:status":{"f:availableReplicas":{},"f:conditions":{".":{}},"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{},"f:updatedReplicas":{}}}`),
	}
	return desired, live
}

// BenchmarkMatches measures the no-op detection that runs for every object on every reconcile:
// a realistic controller Deployment (six containers) that already matches.
func BenchmarkMatches(b *testing.B) {
	desired, live := realisticDeployment(b)
	if !Matches(desired, live, testOwner, "") {
		b.Fatal("The realistic Deployment does not match itself")
	}
	b.ReportAllocs()
	for b.Loop() {
		if !Matches(desired, live, testOwner, "") {
			b.Fatal("No longer matches")
		}
	}
}
