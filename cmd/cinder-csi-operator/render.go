package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	cpdesired "github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	guestdesired "github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// renderFlags are render's flags: the mode, the input files and the zones.
type renderFlags struct {
	mode, namespace                                       string
	hcpFile, infraFile, proxyFile, apiServerFile          string
	credsFile, caFile, userFile, driverFile, nodeConfFile string
	enableTopology, enableTopologySet                     bool
	computeZones, volumeZones                             string
	monitor                                               bool
}

// parseRenderFlags parses render's command line.
func parseRenderFlags(args []string, stderr io.Writer) (renderFlags, error) {
	var r renderFlags
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&r.mode, "mode", "hypershift", "hypershift or standalone")
	fs.StringVar(&r.namespace, "namespace", "", "controller namespace (default: the HostedControlPlane's, or openshift-cluster-csi-drivers)")
	fs.StringVar(&r.hcpFile, "hcp-file", "", "HostedControlPlane YAML (hypershift)")
	fs.StringVar(&r.infraFile, "infrastructure-file", "", "Infrastructure YAML (standalone)")
	fs.StringVar(&r.proxyFile, "proxy-file", "", "Proxy YAML (standalone, optional)")
	fs.StringVar(&r.apiServerFile, "apiserver-file", "", "APIServer cluster YAML, for its TLS security profile (standalone, optional; default Intermediate)")
	fs.StringVar(&r.credsFile, "credentials-file", "", "Secret openstack-cloud-credentials YAML (clouds.yaml, optional cacert)")
	fs.StringVar(&r.caFile, "ca-configmap-file", "", "ConfigMap with ca-bundle.pem (openstack-cloud-config, or the installer's cloud provider config, whose [BlockStorage] and enable_topology apply without --user-config-file), optional")
	fs.StringVar(&r.userFile, "user-config-file", "", "ConfigMap openshift-config/cinder-csi-config YAML, optional")
	fs.StringVar(&r.driverFile, "clustercsidriver-file", "", "ClusterCSIDriver YAML, optional (default Managed, Normal)")
	fs.BoolVar(&r.enableTopology, "enable-topology", false, "topology decision to render when cinder-csi-config has no enable_topology (offline, zones cannot be listed); "+
		"with --compute-zones and --volume-zones, the default is the decision a listing of those zones makes")
	fs.StringVar(&r.computeZones, "compute-zones", "", "comma-separated available compute (Nova) availability zones, as a listing would return them: "+
		"the per-zone StorageClasses (zone_storage_classes) and the node copy's zone keys are rendered from them; needs --volume-zones")
	fs.StringVar(&r.volumeZones, "volume-zones", "", "comma-separated available volume (Cinder) availability zones, as a listing would return them; needs --compute-zones")
	fs.StringVar(&r.nodeConfFile, "node-cloud-conf-file", "", "the live node copy of cloud-conf (ConfigMap YAML), optional: without --compute-zones and --volume-zones, "+
		"the zones it records are rendered, as the operator keeps them while OpenStack cannot be asked")
	fs.BoolVar(&r.monitor, "servicemonitor", true, "render the ServiceMonitors and the PrometheusRule, as on a cluster whose monitoring stack serves the kinds")
	if err := fs.Parse(args); err != nil {
		return r, err
	}
	fs.Visit(func(f *flag.Flag) { r.enableTopologySet = r.enableTopologySet || f.Name == "enable-topology" })
	if r.mode != "hypershift" && r.mode != "standalone" {
		return r, fmt.Errorf("unknown --mode %q: use hypershift or standalone", r.mode)
	}
	if r.credsFile == "" {
		return r, errors.New("--credentials-file is required")
	}
	return r, nil
}

// input reads the input files into the controlplane manager's plan input, as if its caches held
// them; the manager's configuration is configs'.
func (r renderFlags) input() (cpdesired.Input, error) {
	detection, err := offlineDetection(r.enableTopology, r.enableTopologySet, r.computeZones, r.volumeZones)
	if err != nil {
		return cpdesired.Input{}, err
	}
	cp := cpdesired.Input{Monitoring: cpdesired.Monitoring{ServiceMonitors: r.monitor, PrometheusRules: r.monitor}, Detection: detection}
	files := []struct {
		path string
		into any
	}{
		{r.credsFile, &cp.Credentials}, {r.caFile, &cp.CAConfigMap}, {r.userFile, &cp.UserConfig}, {r.driverFile, &cp.Driver},
		{r.hcpFile, &cp.HCP}, {r.infraFile, &cp.Infrastructure}, {r.proxyFile, &cp.Proxy},
		{r.apiServerFile, &cp.APIServer}, {r.nodeConfFile, &cp.NodeCloudConf},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if err := readObject(f.path, f.into); err != nil {
			return cp, err
		}
	}
	if cp.Driver == nil {
		cp.Driver = &operatorv1.ClusterCSIDriver{}
	}
	hyperShift := r.mode == "hypershift"
	if hyperShift && cp.HCP == nil {
		return cp, errors.New("--hcp-file is required in hypershift mode")
	}
	if !hyperShift && cp.Infrastructure == nil {
		return cp, errors.New("--infrastructure-file is required in standalone mode")
	}
	return cp, nil
}

// configs are the two managers' configurations for the mode, with images from the environment.
func (r renderFlags) configs(cp cpdesired.Input) (cpdesired.Config, guestdesired.Config, error) {
	hyperShift := r.mode == "hypershift"
	cpCfg := cpdesired.Config{HyperShift: hyperShift}
	gCfg := guestdesired.Config{HyperShift: hyperShift}
	var err error
	if cpCfg.Images, err = operandimages.ControllerImages(os.LookupEnv, hyperShift); err != nil {
		return cpCfg, gCfg, err
	}
	if gCfg.Images, err = operandimages.NodeImages(os.LookupEnv); err != nil {
		return cpCfg, gCfg, err
	}
	switch {
	case r.namespace != "":
		cpCfg.Namespace = r.namespace
	case hyperShift:
		cpCfg.Namespace = cp.HCP.Namespace
	default:
		cpCfg.Namespace = names.GuestNamespace
	}
	return cpCfg, gCfg, nil
}

// runRender prints, offline, the objects the operator would apply for the given inputs, for
// review and GitOps diffs. It uses the reconcilers' own pure functions.
func runRender(args []string, stdout, stderr io.Writer) error {
	r, err := parseRenderFlags(args, stderr)
	if err != nil {
		return err
	}
	cp, err := r.input()
	if err != nil {
		return err
	}
	cpCfg, gCfg, err := r.configs(cp)
	if err != nil {
		return err
	}
	cp.Config = cpCfg
	scheme, err := clusters.NewScheme()
	if err != nil {
		return err
	}

	// The plans the managers execute, from the same pure functions.
	d := manifests.NewDecoder(scheme)
	cpPlan, err := cpdesired.Compute(d, cp)
	if err != nil {
		return err
	}
	if msgs := cpPlan.ProblemMessages(); len(msgs) > 0 {
		return fmt.Errorf("invalid input: %s", strings.Join(msgs, " "))
	}
	g := guestdesired.Input{Driver: cp.Driver, SnapshotCRD: true}
	for _, st := range cpPlan.Apply {
		if cm, ok := st.Object.(*corev1.ConfigMap); ok && st.Cluster == apply.ClusterGuest && cm.Name == nodeconf.Name(cpCfg.HyperShift) {
			g.CloudConf = cm
		}
	}
	g.Config = gCfg
	guestPlan, err := guestdesired.Compute(d, g)
	if err != nil {
		return err
	}

	mgmtTitle := "the management cluster, namespace " + cpCfg.Namespace
	guestTitle := "the guest cluster"
	if !cpCfg.HyperShift {
		mgmtTitle, guestTitle = "the cluster (controller side)", "the cluster (node copy of cloud-conf)"
	}
	return writeSections(stdout, scheme, []renderSection{
		{"Applied by the controlplane manager to " + mgmtTitle, cpPlan.Apply, apply.ClusterManagement, false},
		{"Applied by the controlplane manager to " + guestTitle, cpPlan.Apply, apply.ClusterGuest, false},
		{"Applied by the guest manager (the VolumeSnapshotClass only where its CRD exists)", guestPlan.Apply, apply.ClusterGuest, false},
		{"Deleted by the controlplane manager from " + mgmtTitle, cpPlan.Delete, apply.ClusterManagement, true},
		{"Deleted by the controlplane manager from " + guestTitle, cpPlan.Delete, apply.ClusterGuest, true},
		{"Deleted by the guest manager", guestPlan.Delete, apply.ClusterGuest, true},
	})
}

// offlineDetection returns the Detection of an offline render, where no zone can be listed: the
// topology decision and the zones are given, as if a listing had returned them (cpdesired.Offline,
// OfflineZones). Given zones decide topology as a listing of them would, unless enable-topology is
// set explicitly.
func offlineDetection(enableTopology, explicit bool, computeZones, volumeZones string) (cpdesired.Detection, error) {
	if (computeZones == "") != (volumeZones == "") {
		return cpdesired.Detection{}, errors.New("--compute-zones and --volume-zones go together: a listing returns both")
	}
	if computeZones == "" {
		return cpdesired.Offline(enableTopology), nil
	}
	// Trimmed and sorted before the decision, as the zones a listing returns would be.
	compute, volume := zoneclasses.SplitZones(computeZones), zoneclasses.SplitZones(volumeZones)
	enabled := enableTopology
	if !explicit {
		enabled = openstack.TopologyEnabled(compute, volume)
	}
	return cpdesired.OfflineZones(enabled, compute, volume), nil
}

// renderSection is one titled part of render's output: the steps of a plan that act on one
// cluster.
type renderSection struct {
	title string
	steps []plan.Step
	c     apply.Cluster
	// identities prints only each object's identity, for objects to delete.
	identities bool
}

// writeSections writes each section that has objects as a comment line with its title followed by
// one YAML document per object. Nothing is written to w unless every object converts.
func writeSections(w io.Writer, scheme *runtime.Scheme, sections []renderSection) error {
	var out bytes.Buffer
	for _, sec := range sections {
		var objs []client.Object
		for _, st := range sec.steps {
			if st.Cluster == sec.c {
				objs = append(objs, st.Object)
			}
		}
		if len(objs) == 0 {
			continue
		}
		fmt.Fprintf(&out, "# %s\n", sec.title)
		for _, o := range objs {
			b, err := toYAML(scheme, o, sec.identities)
			if err != nil {
				return err
			}
			out.WriteString("---\n")
			out.Write(b)
		}
	}
	_, err := w.Write(out.Bytes())
	return err
}

// readObject decodes one YAML object from path into *into (a pointer to a typed pointer).
func readObject(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var target any
	switch p := into.(type) {
	case **corev1.Secret:
		*p = &corev1.Secret{}
		target = *p
	case **corev1.ConfigMap:
		*p = &corev1.ConfigMap{}
		target = *p
	case **operatorv1.ClusterCSIDriver:
		*p = &operatorv1.ClusterCSIDriver{}
		target = *p
	case **hyperv1.HostedControlPlane:
		*p = &hyperv1.HostedControlPlane{}
		target = *p
	case **configv1.Infrastructure:
		*p = &configv1.Infrastructure{}
		target = *p
	case **configv1.Proxy:
		*p = &configv1.Proxy{}
		target = *p
	case **configv1.APIServer:
		*p = &configv1.APIServer{}
		target = *p
	default:
		return fmt.Errorf("cannot read %T", into)
	}
	if err := yaml.UnmarshalStrict(b, target); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	// The API server merges stringData into data; a Secret read from a file must look the same.
	if s, ok := target.(*corev1.Secret); ok && len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	return nil
}

// toYAML serialises obj with its apiVersion and kind, without empty status or server fields; only
// apiVersion, kind and metadata when identity is set (an object to delete).
func toYAML(scheme *runtime.Scheme, obj client.Object, identity bool) ([]byte, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if identity {
		for k := range m {
			if k != "apiVersion" && k != "kind" && k != "metadata" {
				delete(m, k)
			}
		}
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if spec, ok := m["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			if meta, ok := tmpl["metadata"].(map[string]any); ok {
				delete(meta, "creationTimestamp")
			}
		}
	}
	return yaml.Marshal(m)
}
