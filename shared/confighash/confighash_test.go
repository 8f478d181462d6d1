package confighash

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestData(t *testing.T) {
	t.Parallel()
	base := Data(map[string]string{"a": "x", "b": "y"}, map[string][]byte{"c": []byte("z")})
	tests := []struct {
		name     string
		data     map[string]string
		bin      map[string][]byte
		wantSame bool
	}{
		{
			name: "When the same data is built in another order, it should give the same hash",
			data: func() map[string]string {
				m := map[string]string{}
				m["b"] = "y"
				m["a"] = "x"
				return m
			}(),
			bin:      map[string][]byte{"c": []byte("z")},
			wantSame: true,
		},
		{
			name: "When a string value changes, it should give a different hash",
			data: map[string]string{"a": "x", "b": "Y"},
			bin:  map[string][]byte{"c": []byte("z")},
		},
		{
			name: "When a key is renamed, it should give a different hash",
			data: map[string]string{"a": "x", "B": "y"},
			bin:  map[string][]byte{"c": []byte("z")},
		},
		{
			name: "When a binary value changes, it should give a different hash",
			data: map[string]string{"a": "x", "b": "y"},
			bin:  map[string][]byte{"c": []byte("z\x00")},
		},
		{
			name: "When an entry moves from BinaryData to Data, it should give a different hash",
			data: map[string]string{"a": "x", "b": "y", "c": "z"},
		},
		{
			name: "When a key is added, it should give a different hash",
			data: map[string]string{"a": "x", "b": "y", "d": ""},
			bin:  map[string][]byte{"c": []byte("z")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := Data(tt.data, tt.bin)
			g.Expect(got).To(MatchRegexp(`^[0-9a-f]{16}$`))
			if tt.wantSame {
				g.Expect(got).To(Equal(base))
			} else {
				g.Expect(got).NotTo(Equal(base))
			}
		})
	}

	t.Run("When a key and its value trade characters, it should give different hashes", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(Data(map[string]string{"ab": "c"}, nil)).NotTo(Equal(Data(map[string]string{"a": "bc"}, nil)))
		g.Expect(Data(nil, map[string][]byte{"a": []byte("x\x00b\x00y")})).
			NotTo(Equal(Data(nil, map[string][]byte{"a": []byte("x"), "b": []byte("y")})))
	})
	t.Run("When the same key and value are string or binary data, it should give different hashes", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(Data(map[string]string{"a": "x"}, nil)).NotTo(Equal(Data(nil, map[string][]byte{"a": []byte("x")})))
	})
	t.Run("When hashed many times, it should always give the same hash", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		m := map[string]string{}
		for _, k := range strings.Split("q w e r t y u i o p a s d f g h j k l", " ") {
			m[k] = k + k
		}
		first := Data(m, nil)
		for range 50 {
			g.Expect(Data(m, nil)).To(Equal(first))
		}
	})
	t.Run("When maps are nil or empty, it should give the same non-empty hash", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(Data(nil, nil)).To(Equal(Data(map[string]string{}, map[string][]byte{})))
		g.Expect(Data(nil, nil)).NotTo(BeEmpty())
	})
}

func TestConfigMap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		want string
	}{
		{
			name: "When the ConfigMap is nil, it should return an empty hash",
			cm:   nil,
			want: "",
		},
		{
			name: "When the ConfigMap has data, it should hash Data and BinaryData",
			cm: &corev1.ConfigMap{
				Data:       map[string]string{"cloud.conf": "[Global]\n"},
				BinaryData: map[string][]byte{"blob": {0, 1}},
			},
			want: Data(map[string]string{"cloud.conf": "[Global]\n"}, map[string][]byte{"blob": {0, 1}}),
		},
		{
			name: "When only metadata differs, it should ignore it",
			cm: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "cloud-conf", ResourceVersion: "42", Labels: map[string]string{"a": "b"}},
				Data:       map[string]string{"cloud.conf": "[Global]\n"},
			},
			want: Data(map[string]string{"cloud.conf": "[Global]\n"}, nil),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(ConfigMap(tt.cm)).To(Equal(tt.want))
		})
	}
}

func TestConfigMapKeys(t *testing.T) {
	t.Parallel()
	cm := &corev1.ConfigMap{
		Data:       map[string]string{"cloud.conf": "c", "enable_topology": "true", "ca-bundle.pem": "pem"},
		BinaryData: map[string][]byte{"bin": {1}},
	}
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		keys []string
		want string
	}{
		{
			name: "When the ConfigMap is nil, it should return an empty hash",
			keys: []string{"cloud.conf"},
			want: "",
		},
		{
			name: "When keys are named, it should hash only those",
			cm:   cm,
			keys: []string{"cloud.conf", "ca-bundle.pem"},
			want: Data(map[string]string{"cloud.conf": "c", "ca-bundle.pem": "pem"}, nil),
		},
		{
			name: "When keys are named in another order or twice, it should give the same hash",
			cm:   cm,
			keys: []string{"ca-bundle.pem", "cloud.conf", "ca-bundle.pem"},
			want: Data(map[string]string{"cloud.conf": "c", "ca-bundle.pem": "pem"}, nil),
		},
		{
			name: "When a named key is binary, it should hash it as binary",
			cm:   cm,
			keys: []string{"bin"},
			want: Data(nil, map[string][]byte{"bin": {1}}),
		},
		{
			name: "When a named key is missing, it should leave it out",
			cm:   cm,
			keys: []string{"cloud.conf", "missing"},
			want: Data(map[string]string{"cloud.conf": "c"}, nil),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(ConfigMapKeys(tt.cm, tt.keys...)).To(Equal(tt.want))
		})
	}

	t.Run("When an unnamed key changes, it should keep the hash", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		edited := cm.DeepCopy()
		edited.Data["enable_topology"] = "false"
		g.Expect(ConfigMapKeys(edited, "cloud.conf")).To(Equal(ConfigMapKeys(cm, "cloud.conf")))
		g.Expect(ConfigMap(edited)).NotTo(Equal(ConfigMap(cm)))
	})
	t.Run("When a named key is present but empty, it should differ from the key missing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		empty := &corev1.ConfigMap{Data: map[string]string{"k": ""}}
		g.Expect(ConfigMapKeys(empty, "k")).NotTo(Equal(ConfigMapKeys(&corev1.ConfigMap{}, "k")))
	})
}

func TestSecretKeys(t *testing.T) {
	t.Parallel()
	s := &corev1.Secret{
		Data:       map[string][]byte{"clouds.yaml": []byte("c"), "cacert": []byte("pem"), "other": []byte("o")},
		StringData: map[string]string{"cacert": "new-pem"},
	}
	tests := []struct {
		name string
		s    *corev1.Secret
		keys []string
		want string
	}{
		{
			name: "When the Secret is nil, it should return an empty hash",
			keys: []string{"clouds.yaml"},
			want: "",
		},
		{
			name: "When keys are named, it should hash only those, StringData winning",
			s:    s,
			keys: []string{"clouds.yaml", "cacert", "missing"},
			want: Data(nil, map[string][]byte{"clouds.yaml": []byte("c"), "cacert": []byte("new-pem")}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(SecretKeys(tt.s, tt.keys...)).To(Equal(tt.want))
			if tt.s != nil {
				g.Expect(tt.s.Data["cacert"]).To(Equal([]byte("pem")), "the input Secret must not be modified")
			}
		})
	}
}

func TestAnnotationKey(t *testing.T) {
	t.Parallel()
	// sha10 is the suffix a shortened key must end in: 10 hex characters of the full name's SHA-256.
	sha10 := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:10]
	}
	long := strings.Repeat("secret-openstack-cloud-credentials-", 3)
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{
			name:  "When the input name fits, it should append it to the prefix",
			input: "configmap-cloud-conf",
			want:  "cinder.csi.openshift.io/hash-configmap-cloud-conf",
		},
		{
			name:  "When the input name is 58 characters, it should keep it whole",
			input: strings.Repeat("a", 58),
			want:  "cinder.csi.openshift.io/hash-" + strings.Repeat("a", 58),
		},
		{
			name:  "When the input name is 59 characters, it should shorten it to fit",
			input: strings.Repeat("a", 59),
			want:  "cinder.csi.openshift.io/hash-" + strings.Repeat("a", 47) + "-" + sha10(strings.Repeat("a", 59)),
		},
		{
			name:  "When the input name is too long, it should shorten it with a hash suffix",
			input: long,
			want:  "cinder.csi.openshift.io/hash-" + long[:47] + "-" + sha10(long),
		},
		{
			name:  "When the input name has invalid characters, it should replace them and add a hash suffix",
			input: "secret/pull secret",
		},
		{
			name:  "When the input name is empty, it should still give a valid key",
			input: "",
		},
		{
			name:  "When the input name ends with a hyphen, it should still give a valid key",
			input: "configmap-",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got := AnnotationKey(tt.input)
			g.Expect(validation.IsQualifiedName(got)).To(BeEmpty())
			g.Expect(got).To(HavePrefix("cinder.csi.openshift.io/hash-"))
			g.Expect(AnnotationKey(tt.input)).To(Equal(got), "the key must be deterministic")
			if tt.want != "" {
				g.Expect(got).To(Equal(tt.want))
			}
		})
	}

	t.Run("When two long names share a prefix, it should give different keys", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(AnnotationKey(long + "a")).NotTo(Equal(AnnotationKey(long + "b")))
		g.Expect(AnnotationKey("secret/x")).NotTo(Equal(AnnotationKey("secret-x")))
	})
}

func TestAnnotate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing map[string]string
		hashes   map[string]string
		want     map[string]string
	}{
		{
			name:   "When inputs have hashes, it should set one annotation per input",
			hashes: map[string]string{"configmap-cloud-conf": "0123456789abcdef", "secret-openstack-cloud-credentials": "fedcba9876543210"},
			want: map[string]string{
				"cinder.csi.openshift.io/hash-configmap-cloud-conf":               "0123456789abcdef",
				"cinder.csi.openshift.io/hash-secret-openstack-cloud-credentials": "fedcba9876543210",
			},
		},
		{
			name:     "When an input is missing, it should omit its annotation and remove a stale one",
			existing: map[string]string{"cinder.csi.openshift.io/hash-configmap-ca": "old", "user": "kept"},
			hashes:   map[string]string{"configmap-ca": "", "configmap-cloud-conf": "0123456789abcdef"},
			want: map[string]string{
				"cinder.csi.openshift.io/hash-configmap-cloud-conf": "0123456789abcdef",
				"user": "kept",
			},
		},
		{
			name:   "When every input is missing, it should leave annotations nil",
			hashes: map[string]string{"configmap-ca": ""},
			want:   nil,
		},
		{
			name:     "When a hash changes, it should overwrite the annotation",
			existing: map[string]string{"cinder.csi.openshift.io/hash-configmap-cloud-conf": "old"},
			hashes:   map[string]string{"configmap-cloud-conf": "new"},
			want:     map[string]string{"cinder.csi.openshift.io/hash-configmap-cloud-conf": "new"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			tmpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: tt.existing}}
			Annotate(tmpl, tt.hashes)
			g.Expect(tmpl.Annotations).To(Equal(tt.want))
		})
	}

	t.Run("When the template is nil, it should not panic", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(func() { Annotate(nil, map[string]string{"a": "b"}) }).NotTo(Panic())
	})
}
