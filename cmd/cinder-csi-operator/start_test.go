package main

import (
	"bytes"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// The Deployments cluster-storage-operator renders for csi-operator (see each file's header).
const (
	csoStandaloneFixture = "testdata/cso/standalone-deployment.yaml"
	csoHyperShiftFixture = "testdata/cso/hypershift-deployment.yaml"
	csoConfigFixture     = "testdata/cso/operator-config.yaml"
	// csoConfigPath is where cluster-storage-operator mounts the configuration file.
	csoConfigPath = "/var/run/configmaps/config/config.yaml"
)

// imageVariables are every image variable the operator reads, cleared before each case.
var imageVariables = []string{
	operandimages.EnvDriver, operandimages.EnvDriverControlPlane, operandimages.EnvProvisioner, operandimages.EnvAttacher, operandimages.EnvResizer,
	operandimages.EnvSnapshotter, operandimages.EnvNodeDriverRegistrar, operandimages.EnvLivenessProbe, operandimages.EnvLivenessProbeControlPlane,
	operandimages.EnvKubeRBACProxy, operandimages.EnvKubeRBACProxyControlPlane,
}

// readCSODeployment reads a fixture Deployment and returns it with its one container.
func readCSODeployment(t *testing.T, path string) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(b, dep); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	if n := len(dep.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s has %d containers, want 1", path, n)
	}
	return dep, dep.Spec.Template.Spec.Containers[0]
}

// podEnvironment is the container's environment as the kubelet gives it to a pod named podName:
// literal values, and the downward API's metadata.name and metadata.namespace.
func podEnvironment(t *testing.T, c corev1.Container, podName, namespace string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = podName
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		default:
			t.Fatalf("env %s: a source the test does not model", e.Name)
		}
	}
	return env
}

// mountPath returns where c mounts the named volume.
func mountPath(t *testing.T, c corev1.Container, volume string) string {
	t.Helper()
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume })
	if i < 0 {
		t.Fatalf("no mount of volume %s", volume)
	}
	return c.VolumeMounts[i].MountPath
}

// TestStart_ClusterStorageOperatorDeployment runs start's parsing on the command line and
// environment of the Deployments cluster-storage-operator renders for csi-operator. It is not
// parallel: t.Setenv changes the whole process.
func TestStart_ClusterStorageOperatorDeployment(t *testing.T) {
	config, err := os.ReadFile(csoConfigFixture)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, fixture string
		hyperShift    bool
		// namespace stands in for the ServiceAccount's namespace file the pod has, which start
		// reads when no --namespace is given (cluster-storage-operator gives none).
		namespace string
	}{
		{name: "When started as cluster-storage-operator starts csi-operator on a standalone cluster, it should run the standalone operator", fixture: csoStandaloneFixture, namespace: names.GuestNamespace},
		{name: "When started as cluster-storage-operator starts csi-operator for a hosted cluster, it should run both managers of the hosted cluster", fixture: csoHyperShiftFixture, hyperShift: true, namespace: "clusters-example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			dep, c := readCSODeployment(t, tt.fixture)
			g.Expect(c.Command).To(BeEmpty(), "the image's entrypoint runs the args")
			g.Expect(c.Args).NotTo(BeEmpty())
			g.Expect(c.Args[0]).To(Equal("start"))
			g.Expect(c.Image).To(HavePrefix("quay.io/"), "the operator's image is the one thing a switch changes")

			for _, k := range append(imageVariables, "POD_NAME", "POD_NAMESPACE", "OPERATOR_IMAGE_VERSION", "RUN_AS_USER") {
				t.Setenv(k, "")
			}
			env := podEnvironment(t, c, names.OperatorName+"-7c9d8b6f5-q2x4z", dep.Namespace)
			for k, v := range env {
				t.Setenv(k, v)
			}
			t.Setenv("POD_NAMESPACE", tt.namespace)

			readFile := func(path string) ([]byte, error) {
				if path == csoConfigPath {
					return config, nil
				}
				return nil, fs.ErrNotExist
			}
			var stderr bytes.Buffer
			s, err := parseStart(c.Args[1:], readFile, &stderr)
			g.Expect(err).NotTo(HaveOccurred(), stderr.String())
			g.Expect(s.hyperShift).To(Equal(tt.hyperShift))
			f := s.flags
			if tt.hyperShift {
				g.Expect(f.guestKubeconfig).To(Equal(filepath.Join(mountPath(t, c, "guest-kubeconfig"), names.KeyKubeconfig)))
			} else {
				g.Expect(f.guestKubeconfig).To(BeEmpty())
			}
			g.Expect(f.kubeconfig).To(BeEmpty(), "in-cluster: the cluster where the pod runs")
			g.Expect(f.namespace).To(Equal(tt.namespace))
			g.Expect(f.leaderElect).To(BeTrue())
			g.Expect(f.leaderElectionID).To(Equal(dep.Name + "-lock"))
			g.Expect(f.leaderElectionNamespace).To(Equal(tt.namespace))
			g.Expect(f.zap.Level).To(Equal(zapcore.Level(-2)), "-v=2")
			// /metrics on the port the Deployment names metrics, with the certificate it mounts.
			_, port, err := net.SplitHostPort(f.metricsAddr)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Ports).To(ContainElement(And(HaveField("Name", "metrics"), HaveField("ContainerPort", BeEquivalentTo(atoi(t, port))))))
			g.Expect(f.metricsCertDir).To(Equal(mountPath(t, c, "serving-cert")))
			g.Expect(s.terminateOnFiles).To(Equal([]string{csoConfigPath}))
			g.Expect(filepath.Dir(csoConfigPath)).To(Equal(mountPath(t, c, "operator-config")))
			g.Expect(s.ignored).To(BeEmpty())
			g.Expect(leaderIdentity(os.Getenv)).To(Equal(tt.namespace + "/" + env["POD_NAME"]))

			// Every image the managers need comes from the Deployment's variables.
			ctrlImages, err := operandimages.ControllerImages(os.LookupEnv, tt.hyperShift)
			g.Expect(err).NotTo(HaveOccurred())
			nodeImages, err := operandimages.NodeImages(os.LookupEnv)
			g.Expect(err).NotTo(HaveOccurred())
			driver := env[operandimages.EnvDriver]
			if tt.hyperShift {
				driver = env[operandimages.EnvDriverControlPlane]
			}
			g.Expect(ctrlImages.Driver).To(Equal(driver))
			g.Expect(ctrlImages.KubeRBACProxy).To(Equal(env[operandimages.EnvKubeRBACProxy]))
			g.Expect(nodeImages.Driver).To(Equal(env[operandimages.EnvDriver]))

			// The whole command gets as far as connecting to its cluster, which a test has not.
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "config.yaml")
			g.Expect(os.WriteFile(cfgPath, config, 0o600)).To(Succeed())
			args := slices.Clone(c.Args)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], csoConfigPath, cfgPath)
			}
			stderr.Reset()
			g.Expect(run(args, &bytes.Buffer{}, &stderr)).To(Equal(1))
			g.Expect(stderr.String()).To(ContainSubstring("loading the in-cluster configuration"))
		})
	}
}

func TestParseStart(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"/config/empty.yaml": "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\n",
		"/config/serving.yaml": `apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo:
  bindAddress: 0.0.0.0:9443
  certFile: /etc/tls/tls.crt
  keyFile: /etc/tls/tls.key
  minTLSVersion: VersionTLS13
leaderElection:
  namespace: openshift-cluster-csi-drivers
  name: my-lock
  leaseDuration: 60s
authorization:
  disabled: true
`,
		"/config/disabled.yaml": "leaderElection:\n  disable: true\n",
		"/config/badcert.yaml":  "servingInfo:\n  certFile: /etc/tls/server.pem\n  keyFile: /etc/tls/server-key.pem\n",
		"/config/broken.yaml":   "servingInfo: [\n",
	}
	readFile := func(path string) ([]byte, error) {
		if s, ok := files[path]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	tests := []struct {
		name  string
		args  []string
		check func(g Gomega, s startOptions)
		err   string
	}{
		{
			name: "When given library-go's flags in pflag's spellings, it should map each",
			args: []string{"--v=4", "--kubeconfig", "/k", "--namespace=ns", "--listen=127.0.0.1:9000",
				"--terminate_on_files=/a", "--terminate-on-files=/b", "--guest-kubeconfig=/g"},
			check: func(g Gomega, s startOptions) {
				g.Expect(s.hyperShift).To(BeTrue())
				g.Expect(s.flags.kubeconfig).To(Equal("/k"))
				g.Expect(s.flags.namespace).To(Equal("ns"))
				g.Expect(s.flags.leaderElectionNamespace).To(Equal("ns"))
				g.Expect(s.flags.metricsAddr).To(Equal("127.0.0.1:9000"))
				g.Expect(s.terminateOnFiles).To(Equal([]string{"/a", "/b"}))
				g.Expect(s.flags.zap.Level).To(Equal(zapcore.Level(-4)))
			},
		},
		{
			name: "When given the logging flags that have no meaning here, it should accept and ignore them",
			args: []string{"--namespace=ns", "-v=0", "--vmodule=starter=6", "--log-flush-frequency=10s"},
			check: func(g Gomega, s startOptions) {
				g.Expect(s.hyperShift).To(BeFalse())
				g.Expect(s.flags.zap.Level).To(Equal(zapcore.Level(0)))
			},
		},
		{
			name: "When the configuration sets the serving address, certificate and lease, it should use them and name what it ignores",
			args: []string{"--namespace=ns", "--config=/config/serving.yaml"},
			check: func(g Gomega, s startOptions) {
				g.Expect(s.flags.metricsAddr).To(Equal("0.0.0.0:9443"))
				g.Expect(s.flags.metricsCertDir).To(Equal("/etc/tls"))
				g.Expect(s.flags.leaderElectionID).To(Equal("my-lock"))
				g.Expect(s.flags.leaderElectionNamespace).To(Equal("openshift-cluster-csi-drivers"))
				g.Expect(s.ignored).To(ConsistOf(HavePrefix("servingInfo.minTLSVersion"), HavePrefix("leaderElection timings"),
					HavePrefix("authentication.disabled and authorization.disabled")))
			},
		},
		{
			name: "When --listen and the configuration both name an address, it should take --listen, as library-go does",
			args: []string{"--namespace=ns", "--config=/config/serving.yaml", "--listen=:7443"},
			check: func(g Gomega, s startOptions) {
				g.Expect(s.flags.metricsAddr).To(Equal(":7443"))
			},
		},
		{
			name: "When the configuration disables leader election, it should run without",
			args: []string{"--namespace=ns", "--config=/config/disabled.yaml"},
			check: func(g Gomega, s startOptions) {
				g.Expect(s.flags.leaderElect).To(BeFalse())
			},
		},
		{
			name: "When nothing is configured, it should hold csi-operator's lease and serve on library-go's port and certificate",
			args: []string{"--namespace=ns", "--config=/config/empty.yaml"},
			check: func(g Gomega, s startOptions) {
				g.Expect(s.flags.leaderElect).To(BeTrue())
				g.Expect(s.flags.leaderElectionID).To(Equal("openstack-cinder-csi-driver-operator-lock"))
				g.Expect(s.flags.metricsAddr).To(Equal(":8443"))
				g.Expect(s.flags.metricsCertDir).To(Equal("/var/run/secrets/serving-cert"))
				g.Expect(s.flags.probeAddr).To(Equal(":8081"))
				g.Expect(s.flags.zap.Level).To(Equal(zapcore.Level(-2)))
				g.Expect(s.ignored).To(BeEmpty())
			},
		},
		{name: "When a flag library-go does not have is given, it should refuse it", args: []string{"--namespace=ns", "--leader-elect=false"}, err: "flag provided but not defined: -leader-elect"},
		{name: "When an argument follows the flags, it should refuse it", args: []string{"--namespace=ns", "extra"}, err: "unexpected arguments: extra"},
		{name: "When -v is negative, it should refuse it", args: []string{"--namespace=ns", "-v=-1"}, err: "-v=-1 is not a verbosity"},
		{name: "When the configuration file is missing, it should fail as library-go does", args: []string{"--namespace=ns", "--config=/config/none.yaml"}, err: "reading --config"},
		{name: "When the configuration file is not YAML, it should fail naming it", args: []string{"--namespace=ns", "--config=/config/broken.yaml"}, err: "parsing --config /config/broken.yaml as a GenericOperatorConfig"},
		{name: "When the certificate files are not service-ca's names, it should refuse them", args: []string{"--namespace=ns", "--config=/config/badcert.yaml"}, err: "tls.crt and tls.key of one directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s, err := parseStart(tt.args, readFile, &bytes.Buffer{})
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, s)
		})
	}
}

func TestNormalizeFlagNames(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	in := []string{"--terminate_on_files=/a_b", "-log_flush_frequency", "5s", "/x_y", "--", "--keep_this"}
	g.Expect(normalizeFlagNames(in)).To(Equal([]string{"--terminate-on-files=/a_b", "-log-flush-frequency", "5s", "/x_y", "--", "--keep_this"}))
	g.Expect(in[0]).To(Equal("--terminate_on_files=/a_b"), "the input is left alone")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
