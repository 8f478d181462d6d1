package desired

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// This file decides where the driver settings ([BlockStorage] and enable_topology) come from,
// in csi-operator's order, so that a cluster switching operators keeps its volumes' zone
// behaviour: the first of these ConfigMaps that exists wins.
//
//  1. openshift-config/cinder-csi-config, key config (supported since 4.14; in the guest on
//     HyperShift, where csi-operator reads no user configuration at all);
//  2. standalone only, the installer's cloud provider config: the ConfigMap in openshift-config
//     and the key Infrastructure cluster's spec.cloudConfig names (normally
//     cloud-provider-config and config). Clusters installed before 4.14 keep their driver
//     settings there, ignore-volume-az = yes among them (okd-project/okd#1856). Only its
//     [BlockStorage] and its enable_topology key are read: every other section belongs to the
//     cloud provider.
//
// HyperShift has no second source: csi-operator has none there, and the HostedControlPlane
// namespace's openstack-cloud-config is HyperShift's, not an installer's file a user edited.

// ConfigSourceKind says which ConfigMap the driver settings come from.
type ConfigSourceKind int

const (
	// NoConfigSource means no ConfigMap exists: the driver's defaults apply.
	NoConfigSource ConfigSourceKind = iota
	// UserConfigSource is the user's openshift-config/cinder-csi-config.
	UserConfigSource
	// InstallerConfigSource is the installer's cloud provider config (standalone).
	InstallerConfigSource
)

// ConfigSource is where the driver settings come from.
type ConfigSource struct {
	Kind ConfigSourceKind
	// Name is the ConfigMap's name in openshift-config, Key the key that holds its INI text,
	// and Data its data. With NoConfigSource, Name is the installer's cloud provider config that
	// Infrastructure names but does not exist ("" when Infrastructure names none, and on
	// HyperShift).
	Name, Key string
	Data      map[string]string
}

// chooseConfigSource returns the source of the driver settings: the first ConfigMap that exists.
// Standalone, in.CAConfigMap is the installer's cloud provider config (the reconciler reads the one
// Infrastructure names), whose ca-bundle.pem is also the OpenStack CA.
func chooseConfigSource(in *Input) ConfigSource {
	if in.UserConfig != nil {
		return ConfigSource{Kind: UserConfigSource, Name: names.UserConfigMap, Key: names.KeyUserConfig, Data: in.UserConfig.Data}
	}
	if in.Config.HyperShift {
		return ConfigSource{}
	}
	var named configv1.ConfigMapFileReference
	if in.Infrastructure != nil {
		named = in.Infrastructure.Spec.CloudConfig
	}
	if cm := in.CAConfigMap; cm != nil {
		name := cm.Name
		if name == "" {
			// An offline render reads the ConfigMap from a file that may leave its name out.
			name = named.Name
		}
		return ConfigSource{Kind: InstallerConfigSource, Name: name, Key: named.Key, Data: cm.Data}
	}
	return ConfigSource{Name: named.Name}
}

// settings returns the INI text and the enable_topology value the driver settings are made of,
// both "" when absent. A key that is missing from the ConfigMap is no error, for either source:
// for cinder-csi-config as before, and for the installer's file because it is the cloud
// provider's, not written for the driver. csi-operator degrades on a missing key and leaves its
// last cloud-conf in place, which would here hold back every other change too (a credential
// rotation, say) for a key the user may never have meant for the driver. The condition says the
// key is missing instead, and the Event on the change tells when it went.
func (s ConfigSource) settings() (ini, enableTopology string) {
	return s.Data[s.Key], s.Data[names.KeyEnableTopology]
}

// keyMissing reports whether the installer's cloud provider config lacks the key Infrastructure
// names.
func (s ConfigSource) keyMissing() bool {
	if s.Kind != InstallerConfigSource {
		return false
	}
	_, ok := s.Data[s.Key]
	return !ok
}

// ref names the ConfigMap, namespace included.
func (s ConfigSource) ref() string {
	return names.OpenShiftConfigNamespace + "/" + s.Name
}

// Record is the source in short, as the controller copy of cloud-conf records it in
// names.ConfigSourceAnnotation: a change of it is announced by an Event.
func (s ConfigSource) Record() string {
	switch s.Kind {
	case UserConfigSource:
		return s.ref()
	case InstallerConfigSource:
		if s.keyMissing() {
			return fmt.Sprintf("%s, without key %s", s.ref(), s.Key)
		}
		return fmt.Sprintf("%s, key %s", s.ref(), s.Key)
	default:
		return "none"
	}
}

// Action is the Event's action: what is used now. The Events of one action are one series to
// the recorder, which keeps the note of the first for minutes: an action per source keeps a
// quick change of source (cinder-csi-config deleted just after the install, say) from hiding in
// an earlier Event's series.
func (s ConfigSource) Action() string {
	switch {
	case s.Kind == UserConfigSource:
		return "UseCinderCSIConfig"
	case s.keyMissing():
		return "UseCloudProviderConfigWithoutKey"
	case s.Kind == InstallerConfigSource:
		return "UseCloudProviderConfig"
	default:
		return "UseDefaults"
	}
}

// Describe is the sentence of the Config condition that says where the driver settings come
// from. It names ConfigMaps and keys only: the installer's file holds the cloud provider's
// settings too, and none of them is quoted anywhere.
func (s ConfigSource) Describe() string {
	user := names.OpenShiftConfigNamespace + "/" + names.UserConfigMap
	switch s.Kind {
	case UserConfigSource:
		return fmt.Sprintf("Driver settings come from ConfigMap %s.", user)
	case InstallerConfigSource:
		what := fmt.Sprintf("[BlockStorage] of key %s and enable_topology", s.Key)
		if s.keyMissing() {
			what = fmt.Sprintf("enable_topology only, as it has no key %s", s.Key)
		}
		return fmt.Sprintf("Driver settings come from the installer's cloud provider config, ConfigMap %s, as %s does not exist: %s.",
			s.ref(), user, what)
	}
	switch s.Name {
	case "":
		return fmt.Sprintf("No ConfigMap %s exists: the driver runs with its defaults.", user)
	default:
		return fmt.Sprintf("Neither ConfigMap %s nor the installer's cloud provider config %s exists: the driver runs with its defaults.",
			user, s.ref())
	}
}

// annotate records the source on the controller copy of cloud-conf.
func (s ConfigSource) annotate(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[names.ConfigSourceAnnotation] = s.Record()
}

// settingsRef names the ConfigMap and key the INI text of the driver settings comes from.
func (s ConfigSource) settingsRef() string {
	return fmt.Sprintf("key %s of ConfigMap %s", s.Key, s.ref())
}
