package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane"
	"github.com/cinder-csi-operator/cinder-csi-operator/guest"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/images"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// runRender prints, offline, the objects the operator would apply for the given inputs, for
// review and GitOps diffs. It uses the reconcilers' own pure functions.
func runRender(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "hypershift", "hypershift or standalone")
	namespace := fs.String("namespace", "", "controller namespace (default: the HostedControlPlane's, or openshift-cluster-csi-drivers)")
	hcpFile := fs.String("hcp-file", "", "HostedControlPlane YAML (hypershift)")
	infraFile := fs.String("infrastructure-file", "", "Infrastructure YAML (standalone)")
	proxyFile := fs.String("proxy-file", "", "Proxy YAML (standalone, optional)")
	credsFile := fs.String("credentials-file", "", "Secret openstack-cloud-credentials YAML (clouds.yaml, optional cacert)")
	caFile := fs.String("ca-configmap-file", "", "ConfigMap with ca-bundle.pem (openstack-cloud-config, or the cloud-provider config), optional")
	userFile := fs.String("user-config-file", "", "ConfigMap openshift-config/cinder-csi-config YAML, optional")
	driverFile := fs.String("clustercsidriver-file", "", "ClusterCSIDriver YAML, optional (default Managed, Normal)")
	topology := fs.Bool("enable-topology", false, "topology decision to render when cinder-csi-config has no enable_topology (offline, zones cannot be listed)")
	monitor := fs.Bool("servicemonitor", true, "standalone: render the ServiceMonitor, as on a cluster whose monitoring stack serves the kind")
	if err := fs.Parse(args); err != nil {
		return err
	}
	hyperShift := *mode == "hypershift"
	if !hyperShift && *mode != "standalone" {
		return fmt.Errorf("unknown --mode %q: use hypershift or standalone", *mode)
	}
	if *credsFile == "" {
		return errors.New("--credentials-file is required")
	}
	scheme, err := clusters.NewScheme()
	if err != nil {
		return err
	}
	in := controlplane.RenderInputs{EnableTopology: *topology, ServiceMonitorCRD: *monitor}
	in.Config.HyperShift = hyperShift
	if in.Config.Images, err = images.ControllerImages(os.LookupEnv, hyperShift); err != nil {
		return err
	}
	var gCfg guest.Config
	gCfg.HyperShift = hyperShift
	if gCfg.Images, err = images.NodeImages(os.LookupEnv); err != nil {
		return err
	}
	files := []struct {
		path string
		into any
	}{
		{*credsFile, &in.Credentials}, {*caFile, &in.CAConfigMap}, {*userFile, &in.UserConfig}, {*driverFile, &in.Driver},
		{*hcpFile, &in.HCP}, {*infraFile, &in.Infrastructure}, {*proxyFile, &in.Proxy},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if err := readObject(f.path, f.into); err != nil {
			return err
		}
	}
	switch {
	case *namespace != "":
		in.Config.Namespace = *namespace
	case hyperShift && in.HCP != nil:
		in.Config.Namespace = in.HCP.Namespace
	case !hyperShift:
		in.Config.Namespace = names.GuestNamespace
	}
	if hyperShift && in.HCP == nil {
		return errors.New("--hcp-file is required in hypershift mode")
	}
	if !hyperShift && in.Infrastructure == nil {
		return errors.New("--infrastructure-file is required in standalone mode")
	}

	d := manifests.NewDecoder(scheme)
	mgmt, nodeConf, err := controlplane.Render(d, in)
	if err != nil {
		return fmt.Errorf("invalid input: %w", err)
	}
	guestObjs, err := guest.Render(d, guest.RenderInputs{Config: gCfg, Driver: in.Driver, CloudConf: nodeConf, SnapshotCRD: true})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	section := func(title string, objs []client.Object) error {
		fmt.Fprintf(&out, "# %s\n", title)
		for _, o := range objs {
			b, err := toYAML(scheme, o)
			if err != nil {
				return err
			}
			out.WriteString("---\n")
			out.Write(b)
		}
		return nil
	}
	mgmtTitle := "Applied by the controlplane manager to the management cluster, namespace " + in.Config.Namespace
	guestTitle := "Applied by the controlplane manager to the guest cluster"
	if !hyperShift {
		mgmtTitle, guestTitle = "Applied by the operator (controller side)", "Applied by the operator (node copy of cloud-conf)"
	}
	if err := section(mgmtTitle, mgmt); err != nil {
		return err
	}
	if err := section(guestTitle, []client.Object{nodeConf}); err != nil {
		return err
	}
	if err := section("Applied by the guest manager (the VolumeSnapshotClass only where its CRD exists)", guestObjs); err != nil {
		return err
	}
	_, err = stdout.Write(out.Bytes())
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

// toYAML serialises obj with its apiVersion and kind, without empty status or server fields.
func toYAML(scheme *runtime.Scheme, obj client.Object) ([]byte, error) {
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
