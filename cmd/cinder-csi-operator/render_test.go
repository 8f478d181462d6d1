package main

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
)

func setImages(t *testing.T) {
	for _, v := range []string{operandimages.EnvDriver, operandimages.EnvProvisioner, operandimages.EnvAttacher, operandimages.EnvResizer,
		operandimages.EnvSnapshotter, operandimages.EnvNodeDriverRegistrar, operandimages.EnvLivenessProbe, operandimages.EnvKubeRBACProxy} {
		t.Setenv(v, strings.ToLower(v)+":test")
	}
}

// documents splits render's output into its objects' kinds and names.
func documents(t *testing.T, out string) []string {
	var kinds []string
	for _, doc := range strings.Split(out, "\n---\n")[1:] {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("render printed invalid YAML: %v\n%s", err, doc)
		}
		kinds = append(kinds, o.Kind+"/"+o.Metadata.Name)
	}
	return kinds
}

func TestRunRender(t *testing.T) {
	setImages(t)
	t.Run("When rendering a hosted cluster, it should print both sides with the HCP's settings", func(t *testing.T) {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		code := run([]string{"render", "--mode=hypershift", "--hcp-file=testdata/hcp.yaml",
			"--credentials-file=testdata/credentials.yaml", "--enable-topology=true"}, &out, &errOut)
		g.Expect(code).To(Equal(0), errOut.String())
		g.Expect(documents(t, out.String())).To(ContainElements(
			"ConfigMap/cloud-conf", "ServiceAccount/openstack-cinder-csi-driver-controller-sa",
			"Deployment/openstack-cinder-csi-driver-controller", "DaemonSet/openstack-cinder-csi-driver-node",
			"CSIDriver/cinder.csi.openstack.org", "StorageClass/standard-csi", "VolumeSnapshotClass/standard-csi"))
		g.Expect(out.String()).To(ContainSubstring("namespace: clusters-example"))
		g.Expect(out.String()).To(ContainSubstring("cloud = shiftstack"))
		g.Expect(out.String()).To(ContainSubstring("--cluster=example-x7k2p"))
		g.Expect(out.String()).To(ContainSubstring("replicas: 2"))
		g.Expect(out.String()).NotTo(ContainSubstring("ac-secret-value"))
	})
	t.Run("When rendering a standalone cluster, it should use the Infrastructure", func(t *testing.T) {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		code := run([]string{"render", "--mode=standalone", "--infrastructure-file=testdata/infrastructure.yaml",
			"--credentials-file=testdata/credentials.yaml"}, &out, &errOut)
		g.Expect(code).To(Equal(1), "the standalone cloud is named by Infrastructure status, default openstack")
		g.Expect(errOut.String()).To(ContainSubstring(`has no cloud named "openstack"`))
	})
	t.Run("When rendering a standalone cluster with its cloud, it should print the monitoring objects unless told not to", func(t *testing.T) {
		g := NewWithT(t)
		args := []string{"render", "--mode=standalone", "--infrastructure-file=testdata/infrastructure-shiftstack.yaml",
			"--credentials-file=testdata/credentials.yaml"}
		var out, errOut bytes.Buffer
		g.Expect(run(args, &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(documents(t, out.String())).To(ContainElements(
			"ConfigMap/openstack-cinder-csi-driver-trusted-ca-bundle", "Deployment/openstack-cinder-csi-driver-controller",
			"ServiceMonitor/openstack-cinder-csi-driver-controller-monitor", "ServiceMonitor/openstack-cinder-csi-driver-operator-monitor",
			"PrometheusRule/openstack-cinder-csi-driver-alerts", "ConfigMap/cloud-conf-node"))
		g.Expect(out.String()).To(ContainSubstring("serverName: openstack-cinder-csi-driver-controller-metrics.openshift-cluster-csi-drivers.svc"))

		out.Reset()
		g.Expect(run(append(args, "--servicemonitor=false"), &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(documents(t, out.String())).NotTo(ContainElements(
			"ServiceMonitor/openstack-cinder-csi-driver-controller-monitor", "PrometheusRule/openstack-cinder-csi-driver-alerts"))
	})
	t.Run("When rendering a standalone cluster with the installer's cloud provider config and no cinder-csi-config, it should take its [BlockStorage] and enable_topology", func(t *testing.T) {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		g.Expect(run([]string{"render", "--mode=standalone", "--infrastructure-file=testdata/infrastructure-shiftstack.yaml",
			"--credentials-file=testdata/credentials.yaml", "--ca-configmap-file=testdata/cloud-provider-config.yaml",
			"--enable-topology=true"}, &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(strings.Count(out.String(), "ignore-volume-az = yes")).To(Equal(2), "both copies of cloud-conf")
		g.Expect(strings.Count(out.String(), `enable_topology: "false"`)).To(Equal(2), "both copies of cloud-conf")
		g.Expect(out.String()).To(ContainSubstring("config-source: openshift-config/cloud-provider-config,"))
		g.Expect(out.String()).NotTo(ContainSubstring("trust-device-path"))
		g.Expect(out.String()).NotTo(ContainSubstring("cpc-secret-value"))
		g.Expect(out.String()).NotTo(ContainSubstring("secret-namespace"))
	})
	t.Run("When rendering a standalone cluster with an APIServer's TLS profile, it should give it to every kube-rbac-proxy", func(t *testing.T) {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		g.Expect(run([]string{"render", "--mode=standalone", "--infrastructure-file=testdata/infrastructure-shiftstack.yaml",
			"--credentials-file=testdata/credentials.yaml", "--apiserver-file=testdata/apiserver-modern.yaml"}, &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(strings.Count(out.String(), "--tls-min-version=VersionTLS13")).To(Equal(5))
		g.Expect(out.String()).NotTo(ContainSubstring("--tls-min-version=VersionTLS12"))
	})
	// The fixtures are the whole output: what a user reviews in a GitOps diff.
	for _, tt := range []struct {
		name string
		args []string
	}{
		{name: "When rendering a hosted cluster, it should print the fixture", args: []string{"--mode=hypershift",
			"--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml", "--enable-topology=true"}},
		{name: "When rendering a standalone cluster, it should print the fixture", args: []string{"--mode=standalone",
			"--infrastructure-file=testdata/infrastructure-shiftstack.yaml", "--credentials-file=testdata/credentials.yaml"}},
		{name: "When rendering a hosted cluster with every feature on, its zones and topology, it should print the fixture", args: []string{"--mode=hypershift",
			"--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml", "--user-config-file=testdata/cinder-csi-config-features.yaml",
			"--compute-zones=az1,az2,nova", "--volume-zones=az1,az2,ceph", "--enable-topology=true"}},
		{name: "When rendering a hosted cluster whose driver is Removed, it should print what is deleted", args: []string{"--mode=hypershift",
			"--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml", "--clustercsidriver-file=testdata/clustercsidriver-removed.yaml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var out, errOut bytes.Buffer
			g.Expect(run(append([]string{"render"}, tt.args...), &out, &errOut)).To(Equal(0), errOut.String())
			golden.CompareTextWithFixture(t, out.Bytes())
		})
	}
	t.Run("When given the zones, it should decide topology from them unless told, and render the per-zone classes", func(t *testing.T) {
		g := NewWithT(t)
		args := []string{"render", "--mode=hypershift", "--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml",
			"--user-config-file=testdata/cinder-csi-config-features.yaml"}
		var out, errOut bytes.Buffer
		g.Expect(run(append(args, "--compute-zones=az1,az2", "--volume-zones=az2,az1,az3"), &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(strings.Count(out.String(), `enable_topology: "true"`)).To(Equal(2), "every compute zone is a volume zone")
		g.Expect(out.String()).To(ContainSubstring(`volume_zones: az1,az2,az3`))
		g.Expect(out.String()).To(ContainSubstring(`zone_classes: '[{"volumeZone":"az1","computeZones":["az1"]},{"volumeZone":"az2","computeZones":["az2"]}]'`))

		out.Reset()
		g.Expect(run(append(args, "--compute-zones=az2, az1", "--volume-zones=az1 ,az2,az3"), &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(strings.Count(out.String(), `enable_topology: "true"`)).To(Equal(2), "the zones are trimmed before topology is decided from them")
		g.Expect(out.String()).To(ContainSubstring(`compute_zones: az1,az2`))

		out.Reset()
		g.Expect(run(append(args, "--compute-zones=az1,az2", "--volume-zones=az1,az2", "--enable-topology=false"), &out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(out.String()).To(ContainSubstring(`zone_classes: '[{"volumeZone":"az1"},{"volumeZone":"az2"}]'`), "unpinned without topology")
	})
	t.Run("When given a live node copy and no zones, it should render the zones it records", func(t *testing.T) {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		g.Expect(run([]string{"render", "--mode=hypershift", "--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml",
			"--user-config-file=testdata/cinder-csi-config-features.yaml", "--node-cloud-conf-file=testdata/node-cloud-conf.yaml", "--enable-topology=true"},
			&out, &errOut)).To(Equal(0), errOut.String())
		g.Expect(out.String()).To(ContainSubstring(`zone_classes: '[{"volumeZone":"az1","computeZones":["az1"]},{"volumeZone":"az2","computeZones":["az2"]}]'`))
	})
	t.Run("When given only one of the zone lists, it should refuse", func(t *testing.T) {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		g.Expect(run([]string{"render", "--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml", "--compute-zones=az1"}, &out, &errOut)).To(Equal(1))
		g.Expect(errOut.String()).To(ContainSubstring("--compute-zones and --volume-zones go together"))
	})
	t.Run("When an image variable is missing, it should fail naming it", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv(operandimages.EnvAttacher, "")
		var out, errOut bytes.Buffer
		code := run([]string{"render", "--hcp-file=testdata/hcp.yaml", "--credentials-file=testdata/credentials.yaml"}, &out, &errOut)
		g.Expect(code).To(Equal(1))
		g.Expect(errOut.String()).To(ContainSubstring("ATTACHER_IMAGE"))
	})
}
