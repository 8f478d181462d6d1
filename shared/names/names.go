// Package names holds the object names, namespaces, labels, annotations, keys, field owners and
// condition types the operator uses, so that reconcilers, desired-state builders and tests never
// spell one twice. Object names follow openshift/csi-operator on purpose: a cluster that runs it
// today can switch to this operator and have the existing objects adopted. The node copy of
// cloud-conf, the managers' contract, has its name, keys and annotation in shared/nodeconf.
package names

// Driver and API object names.
const (
	// DriverName is the CSI driver name, the CSIDriver object name and the ClusterCSIDriver name.
	DriverName = "cinder.csi.openstack.org"
	// TopologyKey is the driver's topology key: the label the kubelet puts on a node from the node
	// plugin's NodeGetInfo, the key of a StorageClass's allowedTopologies and of the node affinity
	// of the PersistentVolumes the driver provisions with topology.
	TopologyKey = "topology." + DriverName + "/zone"
	// ClusterCSIDriverName is the name of the user-facing operator API object in the guest.
	ClusterCSIDriverName = DriverName

	// AssetPrefix prefixes the names of most objects the operator creates.
	AssetPrefix = "openstack-cinder-csi-driver"
)

// OperatorName is the name cluster-storage-operator gives csi-operator's Deployment and its
// ServiceAccount, and the value of its pods' label `name`. The standalone install keeps all
// three, so that what OpenShift looks up by name (its storage conformance tests check this
// Deployment's pod labels) still finds the operator after a switch.
const OperatorName = AssetPrefix + "-operator"

// Namespaces.
const (
	// GuestNamespace is where the node plugin runs, in the guest cluster (and, in standalone
	// mode, also the controller).
	GuestNamespace = "openshift-cluster-csi-drivers"
	// OpenShiftConfigNamespace holds the user's optional driver configuration.
	OpenShiftConfigNamespace = "openshift-config"
)

// Objects the controlplane manager owns.
const (
	ControllerDeployment     = AssetPrefix + "-controller"
	ControllerServiceAccount = AssetPrefix + "-controller-sa"
	// ControllerPodLabel is the label the controller Deployment selects its pods by, with the
	// value ControllerDeployment.
	ControllerPodLabel       = "app"
	ControllerPDB            = AssetPrefix + "-controller-pdb"
	ControllerMetricsService = AssetPrefix + "-controller-metrics"
	ControllerMetricsSecret  = AssetPrefix + "-controller-metrics-serving-cert"
	TrustedCABundleConfigMap = AssetPrefix + "-trusted-ca-bundle"
	// ControllerServiceMonitor, OperatorServiceMonitor and AlertsRule are created next to the
	// controller when the monitoring stack serves their kinds.
	ControllerServiceMonitor = AssetPrefix + "-controller-monitor"
	OperatorServiceMonitor   = OperatorName + "-monitor"
	AlertsRule               = AssetPrefix + "-alerts"
	// OperatorMetricsService is the operator's own metrics Service (its install manifests).
	OperatorMetricsService = OperatorName + "-metrics"
	// KubeRBACProxyRole is the ClusterRole of the controller's kube-rbac-proxies (standalone).
	KubeRBACProxyRole = "openstack-cinder-kube-rbac-proxy-role"

	// CloudConfConfigMap carries the generated cloud.conf and the topology decision: the
	// controller copy next to the controller, csi-operator's name for both its copies. The node
	// copy in the guest namespace, the managers' contract, is shared/nodeconf's (nodeconf.Name).
	CloudConfConfigMap = "cloud-conf"
)

// SidecarLeases are the leader-election Leases of the controller's sidecars, in the guest
// namespace (the sidecars' API server is the guest's), named as csi-lib-utils names them from
// the driver name (every character other than a letter, a digit or '-' becomes '-'): the
// provisioner's, the attacher's, the resizer's and the snapshotter's. Each is held under the
// name of the controller pod whose sidecar leads.
var SidecarLeases = []string{
	"cinder-csi-openstack-org",
	"external-attacher-leader-cinder-csi-openstack-org",
	"external-resizer-cinder-csi-openstack-org",
	"external-snapshotter-leader-cinder-csi-openstack-org",
}

// Objects the guest manager owns.
const (
	NodeDaemonSet      = AssetPrefix + "-node"
	NodeServiceAccount = AssetPrefix + "-node-sa"
	StorageClass       = "standard-csi"
	VolumeSnapshotCls  = "standard-csi"
)

// Inputs the operator reads but does not own.
const (
	// CredentialsSecret holds clouds.yaml (and optionally cacert) for the controller.
	CredentialsSecret = "openstack-cloud-credentials"
	// HyperShiftCloudConfigMap is the HCP-namespace ConfigMap with the OpenStack CA.
	HyperShiftCloudConfigMap = "openstack-cloud-config"
	// UserConfigMap is the user's optional driver configuration in openshift-config.
	UserConfigMap = "cinder-csi-config"
	// GuestKubeconfigSecret is the HyperShift guest admin kubeconfig in the HCP namespace.
	GuestKubeconfigSecret = "service-network-admin-kubeconfig"
	// PullSecret is the HyperShift pull secret in the HCP namespace.
	PullSecret = "pull-secret"
	// InfrastructureName and ProxyName are the singleton config.openshift.io objects.
	InfrastructureName = "cluster"
	ProxyName          = "cluster"
	// APIServerName is the standalone cluster's APIServer, whose spec.tlsSecurityProfile sets
	// the TLS profile of every metrics endpoint the operator runs.
	APIServerName = "cluster"
	// VolumeSnapshotClassCRD is the CRD whose presence enables the VolumeSnapshotClass.
	VolumeSnapshotClassCRD = "volumesnapshotclasses.snapshot.storage.k8s.io"
	// ServiceMonitorCRD is the CRD whose presence enables the ServiceMonitors (standalone; on
	// HyperShift the management cluster's discovery says whether the kinds are served).
	ServiceMonitorCRD = "servicemonitors.monitoring.coreos.com"
)

// ConfigMap and Secret keys of the inputs. The keys of cloud-conf are shared/nodeconf's; it carries
// KeyEnableTopology and KeyCABundle under these same names.
const (
	// KeyEnableTopology is the topology override of the user's cinder-csi-config and of the
	// installer's cloud provider config: "true" or "false".
	KeyEnableTopology = "enable_topology"
	// KeyCABundle is the OpenStack CA's key in the cloud ConfigMap it is read from (HyperShift's
	// openstack-cloud-config, standalone the cloud provider's config).
	KeyCABundle   = "ca-bundle.pem"
	KeyCloudsYAML = "clouds.yaml"
	KeyCACert     = "cacert"
	KeyUserConfig = "config"
	KeyKubeconfig = "kubeconfig"
	KeyTrustedCA  = "ca-bundle.crt"
)

// Feature keys of the user's openshift-config/cinder-csi-config, next to config and
// enable_topology. Each is opt-in but KeySnapshotForceCreate, which is on unless set to "false".
// The node copy of cloud-conf carries the backup class's keys and KeySnapshotForceCreate under
// these same names (nodeconf.Contents).
const (
	// KeyZoneStorageClasses "true" asks for one StorageClass per usable volume zone.
	KeyZoneStorageClasses = "zone_storage_classes"
	// KeyZoneMapping maps compute zones to volume zones of other names: "compute=volume" pairs
	// separated by commas or newlines (zoneclasses.ParseMapping).
	KeyZoneMapping = "zone_mapping"
	// KeyBackupSnapshotClass "true" asks for the VolumeSnapshotClass BackupSnapshotClass, whose
	// snapshots are Cinder backups.
	KeyBackupSnapshotClass = "backup_snapshot_class"
	// KeyBackupAvailabilityZone is the availability zone of those backups ("" lets Cinder choose).
	KeyBackupAvailabilityZone = "backup_availability_zone"
	// KeyPVCAnnotations "true" lets claims carry the driver's volume affinity and anti-affinity
	// annotations (the driver's --pvc-annotations).
	KeyPVCAnnotations = "pvc_annotations"
	// KeySnapshotForceCreate "false" makes standard-csi's VolumeSnapshotClass refuse volumes in use
	// (force-create "false", csi-operator's setting).
	KeySnapshotForceCreate = "snapshot_force_create"
	// KeyAttachmentWarningAfter is how long a VolumeAttachment may attach or detach before
	// VolumeAttachmentWarning names it: a Go duration of at least 10s, default 5m.
	KeyAttachmentWarningAfter = "attachment_warning_after"
)

// Classes next to standard-csi.
const (
	// BackupSnapshotClass is the VolumeSnapshotClass whose snapshots are Cinder backups.
	BackupSnapshotClass = "standard-csi-backup"
	// ZoneClassLabel marks a per-zone StorageClass; its value is the class's volume zone.
	ZoneClassLabel = "cinder.csi.openshift.io/zone-class"
)

// Paths inside the driver containers, referenced from cloud.conf.
const (
	// CloudsFilePath is where the controller mounts clouds.yaml.
	CloudsFilePath = "/etc/kubernetes/secret/clouds.yaml"
	// CAFilePath is where the driver containers mount the OpenStack CA bundle.
	CAFilePath = "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem"
)

// Labels and annotations.
const (
	// ManagedByLabel marks every object this operator applies; caches select on it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "cinder-csi-operator"

	// HashAnnotationPrefix prefixes the per-input pod-template hash annotations.
	HashAnnotationPrefix = "cinder.csi.openshift.io/hash-"
	// ConfigSourceAnnotation records on the controller copy of cloud-conf which ConfigMap the
	// driver settings came from, so that a change of source is announced once, by whichever
	// operator replica leads, also across restarts.
	ConfigSourceAnnotation = "cinder.csi.openshift.io/config-source"

	HostedControlPlaneLabel = "hypershift.openshift.io/hosted-control-plane"
	NeedManagementKASAccess = "hypershift.openshift.io/need-management-kas-access"
	ControlPlaneNodeLabel   = "hypershift.openshift.io/control-plane"
	HostedClusterNodeLabel  = "hypershift.openshift.io/cluster"

	// HyperShiftPriorityClass is the priority class of HyperShift's control-plane pods; the
	// HyperShift operator creates it on every management cluster.
	HyperShiftPriorityClass = "hypershift-control-plane"

	DefaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	InjectTrustedCABundleLabel    = "config.openshift.io/inject-trusted-cabundle"
	ServingCertAnnotation         = "service.beta.openshift.io/serving-cert-secret-name"

	// DefaultSnapshotClassAnnotation marks the default VolumeSnapshotClass of a driver.
	DefaultSnapshotClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

	// StableGenerationAnnotation records on the node DaemonSet the last generation that was
	// seen fully rolled out: pods missing at that generation (a node rebooted, added or
	// drained, a pod killed) are not a rollout. It is csi-operator's key, so that a switch in
	// either direction keeps the record's meaning.
	StableGenerationAnnotation = "storage.openshift.io/stable-generation"
)

// Field owners for server-side apply: one per manager, so that neither can erase what the
// other applied (most visibly their ClusterCSIDriver conditions).
const (
	FieldOwnerControlPlane = "cinder-csi-operator-controlplane"
	FieldOwnerGuest        = "cinder-csi-operator-guest"
	// FieldOwnerAttachments owns the attachment monitor's conditions, so that the controlplane
	// reconciler's status writes and the monitor's leave each other's conditions alone.
	FieldOwnerAttachments = "cinder-csi-operator-attachments"
	// FieldOwnerRollout owns the node DaemonSet's StableGenerationAnnotation, which the guest
	// manager's own apply leaves out: it records what the cluster did, not what is desired.
	FieldOwnerRollout = "cinder-csi-operator-rollout"
)

// LegacyFieldOwners are the field managers of csi-operator's writes, whose objects this operator
// adopts. csi-operator creates and updates through library-go's resourceapply without naming a
// field manager, so the API server records the prefix of its user agent: the name of its binary,
// openstack-cinder-csi-driver-operator. Their fields are taken over before the first apply, so
// that nothing csi-operator set and this operator does not (the credentials volume of the node
// plugin, for one) survives the switch.
var LegacyFieldOwners = []string{"openstack-cinder-csi-driver-operator"}

// Leader election lock names, one per manager.
const (
	LeaderElectionControlPlane = "cinder-csi-operator-controlplane-lock"
	LeaderElectionGuest        = "cinder-csi-operator-guest-lock"
	// CSIOperatorLeaderElection is csi-operator's lease (library-go's controller command names
	// it <component>-lock), which the start command holds instead of its manager's own: while
	// an image swap rolls out, the old and the new operator pod wait for each other.
	CSIOperatorLeaderElection = OperatorName + "-lock"
)

// ClusterCSIDriver condition types. Every type starts with OpenStackCinder and ends in a suffix
// cluster-storage-operator aggregates (Available, Progressing, Degraded, Upgradeable).
const (
	// Written by the controlplane manager.
	ConditionControllerAvailable   = "OpenStackCinderControllerAvailable"
	ConditionControllerProgressing = "OpenStackCinderControllerProgressing"
	ConditionControllerDegraded    = "OpenStackCinderControllerDegraded"
	ConditionConfigDegraded        = "OpenStackCinderConfigDegraded"
	ConditionTopologyDegraded      = "OpenStackCinderTopologyDegraded"

	// Written by the guest manager.
	ConditionNodeAvailable           = "OpenStackCinderNodeAvailable"
	ConditionNodeProgressing         = "OpenStackCinderNodeProgressing"
	ConditionNodeDegraded            = "OpenStackCinderNodeDegraded"
	ConditionStaticResourcesDegraded = "OpenStackCinderGuestStaticResourcesDegraded"
	ConditionStorageClassDegraded    = "OpenStackCinderStorageClassDegraded"
	ConditionGuestConfigDegraded     = "OpenStackCinderGuestConfigDegraded"
)

// Warning condition types: informational, True while their cause holds and False (reason
// AsExpected) otherwise. They end in Warning, a suffix cluster-storage-operator does not fold
// into the storage ClusterOperator, so a warning never makes the cluster Degraded.
const (
	// Written by the controlplane manager.
	// ConditionAttachLimitWarning: [BlockStorage] sets no node-volume-attach-limit, so the
	// driver reports none and the scheduler overfills nodes past what the guest can attach.
	ConditionAttachLimitWarning = "OpenStackCinderAttachLimitWarning"
	// ConditionConfigKeysWarning: the user's configuration holds [BlockStorage] keys the
	// installed driver does not know, or sections that are dropped.
	ConditionConfigKeysWarning = "OpenStackCinderConfigKeysWarning"
	// ConditionBackupWarning: the backup VolumeSnapshotClass is asked for, but Cinder has no
	// backup service up (in the asked availability zone), or it could not be checked.
	ConditionBackupWarning = "OpenStackCinderBackupWarning"

	// Written by the guest manager.
	// ConditionZoneWarning: nodes are in a compute zone where no claim of standard-csi can be
	// provisioned under the current topology decision, a per-zone class is kept because a
	// claim uses it after its zone went away, or a class asked for (per-zone, or the backup
	// VolumeSnapshotClass) has the name of one the operator did not make.
	ConditionZoneWarning = "OpenStackCinderZoneWarning"

	// Written by the controlplane manager's attachment monitor.
	// ConditionVolumeAttachmentWarning: VolumeAttachments of the driver have been attaching or
	// detaching for longer than attachment_warning_after; the message says what Cinder says of
	// each volume and what to do.
	ConditionVolumeAttachmentWarning = "OpenStackCinderVolumeAttachmentWarning"
	// ConditionNodeAttachLimitWarning: nodes have as many volumes of the driver as their node
	// plugin reports they can attach.
	ConditionNodeAttachLimitWarning = "OpenStackCinderNodeAttachLimitWarning"
)

// ControlPlaneConditions are the condition types the controlplane manager owns.
var ControlPlaneConditions = []string{
	ConditionControllerAvailable, ConditionControllerProgressing, ConditionControllerDegraded,
	ConditionConfigDegraded, ConditionTopologyDegraded,
	ConditionAttachLimitWarning, ConditionConfigKeysWarning, ConditionBackupWarning,
}

// AttachmentConditions are the condition types the controlplane manager's attachment monitor
// owns, under a field owner of its own.
var AttachmentConditions = []string{ConditionVolumeAttachmentWarning, ConditionNodeAttachLimitWarning}

// GuestConditions are the condition types the guest manager owns.
var GuestConditions = []string{
	ConditionNodeAvailable, ConditionNodeProgressing, ConditionNodeDegraded,
	ConditionStaticResourcesDegraded, ConditionStorageClassDegraded, ConditionGuestConfigDegraded,
	ConditionZoneWarning,
}

// CSIOperatorConditions are the ClusterCSIDriver condition types csi-operator writes for this
// driver. None is a type this operator writes (shared/conditions' tests check), and the guest
// manager removes every one it finds: they describe controllers that no longer run, and
// cluster-storage-operator folds every *Available, *Progressing and *Degraded condition of the
// ClusterCSIDriver into the storage ClusterOperator, so a leftover Degraded=True (or
// Available=False) would report csi-operator's last word as the cluster's state forever.
//
// Read from openshift/csi-operator at f7f9dc59603d190abbcda1ae818f489c9dc2f167 and the
// library-go it vendors (v0.0.0-20260721103755-0c9fbc9f043a): pkg/operator/starter.go starts the
// controllers, named with the prefix OpenStackCinder (pkg/driver/openstack-cinder/openstack_cinder.go,
// GetControllerName); a library-go controller built with WithSyncDegradedOnError also reports
// <its ToController name>Degraded (pkg/controller/factory/base_controller.go).
var CSIOperatorConditions = []string{
	// managementstatecontroller (csicontrollerset WithManagementStateController):
	// condition.ManagementStateDegradedConditionType.
	"ManagementStateDegraded",
	// staticresourcecontroller, once per side (WithConditionalStaticResourcesController):
	// <instance>Degraded.
	"OpenStackCinderDriverControlPlaneStaticResourcesControllerDegraded",
	"OpenStackCinderDriverGuestStaticResourcesControllerDegraded",
	// csiconfigobservercontroller -> configobserver, with no prefix:
	// condition.ConfigObservationDegradedConditionType.
	"ConfigObservationDegraded",
	// csidrivercontrollerservicecontroller -> deploymentcontroller: <instance>Available and
	// Progressing from its sync, Degraded from a failed sync.
	"OpenStackCinderDriverControllerServiceControllerAvailable",
	"OpenStackCinderDriverControllerServiceControllerProgressing",
	"OpenStackCinderDriverControllerServiceControllerDegraded",
	// csidrivernodeservicecontroller: the same three for the node DaemonSet.
	"OpenStackCinderDriverNodeServiceControllerAvailable",
	"OpenStackCinderDriverNodeServiceControllerProgressing",
	"OpenStackCinderDriverNodeServiceControllerDegraded",
	// csistorageclasscontroller: a failed sync of ToController("StorageClassController").
	"StorageClassControllerDegraded",
	// csi-operator's pkg/operator/volume_snapshot_class: ToController("VolumeSnapshotClassController").
	"VolumeSnapshotClassControllerDegraded",
	// csi-operator's pkg/openstack-cinder/config/configsync.go: ToController("ConfigSync").
	"ConfigSyncDegraded",
	// HyperShift only: library-go's hypershift/deploymentversion, named
	// OpenStackCinderDeploymentVersionController in openstack_cinder.go.
	"OpenStackCinderDeploymentVersionControllerDegraded",
	// The type openstack_cinder.go's StaleConditionsName has csi-operator remove itself, and the
	// Degraded type a static resource controller of that name writes: a cluster upgraded through
	// those releases may still carry either.
	"OpenStackCinderDriverConditionalStaticResourcesController",
	"OpenStackCinderDriverConditionalStaticResourcesControllerDegraded",
	// library-go's loglevel controller (WithLogLevelController) and csi-operator's stale
	// condition remover write no condition.
}

// Condition reasons (UpperCamel, stable).
const (
	ReasonAsExpected                = "AsExpected"
	ReasonDeploying                 = "Deploying"
	ReasonRollingOut                = "RollingOut"
	ReasonRolloutStuck              = "RolloutStuck"
	ReasonNotAvailable              = "NotAvailable"
	ReasonWaitingForConfig          = "WaitingForConfiguration"
	ReasonUnmanaged                 = "Unmanaged"
	ReasonRemoved                   = "Removed"
	ReasonInvalidConfig             = "InvalidConfiguration"
	ReasonMissingCredentials        = "MissingCredentials"
	ReasonInvalidCredentials        = "InvalidCredentials"
	ReasonUnknownLogLevel           = "UnknownLogLevel"
	ReasonOpenStackUnavailable      = "OpenStackUnavailable"
	ReasonTopologyOverridden        = "Overridden"
	ReasonMissingHostedControlPlane = "MissingHostedControlPlane"
	// ReasonRemoving is Progressing's while Removed waits for something to end before it
	// deletes the last objects (the controller's ServiceAccount and RBAC, standalone).
	ReasonRemoving = "Removing"
	// ReasonTLSProfileFallback is ConfigDegraded's reason, with status False, while the cluster's
	// TLS security profile cannot be served and Intermediate is used instead.
	ReasonTLSProfileFallback = "TLSProfileFallback"
	// ReasonAttachLimitNotSet: AttachLimitWarning's reason while [BlockStorage] sets no
	// positive node-volume-attach-limit.
	ReasonAttachLimitNotSet = "AttachLimitNotSet"
	// ReasonVolumeAttachmentsStuck: VolumeAttachmentWarning's reason while attachments are stuck.
	ReasonVolumeAttachmentsStuck = "VolumeAttachmentsStuck"
	// ReasonNodesAtAttachLimit: NodeAttachLimitWarning's reason while nodes are at their limit.
	ReasonNodesAtAttachLimit = "NodesAtAttachLimit"
	// ReasonVolumeAttachmentStuck and ReasonVolumeAttachmentFinished are the reasons of the
	// Events on a VolumeAttachment that passed the bound, and that finished after it did.
	ReasonVolumeAttachmentStuck    = "VolumeAttachmentStuck"
	ReasonVolumeAttachmentFinished = "VolumeAttachmentFinished"
	// ReasonIgnoredConfiguration: ConfigKeysWarning's reason while the user's configuration
	// holds keys or sections the driver never sees or does not know.
	ReasonIgnoredConfiguration = "IgnoredConfiguration"
	// BackupWarning's reasons: no cinder-backup service is up and enabled; none is in the
	// availability zone backup_availability_zone names; Cinder refused to list its services (its
	// default policy allows that to administrators only), so it could not be checked.
	// ReasonOpenStackUnavailable is the fourth: the listing failed before any succeeded.
	ReasonNoBackupService         = "NoBackupService"
	ReasonNoBackupServiceInZone   = "NoBackupServiceInZone"
	ReasonBackupServicesForbidden = "BackupServicesNotListable"
	// ReasonConfigSourceChanged is the reason of the Normal Event that says where the driver
	// settings come from, recorded when that source is not the one cloud-conf records.
	ReasonConfigSourceChanged = "ConfigSourceChanged"
	// ReasonLeaseReleased is the reason of the Normal Event recorded when the operator deletes a
	// sidecar lease still held under the name of a controller pod that no longer exists.
	ReasonLeaseReleased = "SidecarLeaseReleased"

	// Reasons of ConditionZoneWarning while it is True, in the order a message names its causes.
	// ReasonNodesOutsideVolumeZones: with topology on, nodes are in compute zones that are no
	// volume zone (and that no per-zone class covers).
	ReasonNodesOutsideVolumeZones = "NodesOutsideVolumeZones"
	// ReasonZoneClassInUse: a per-zone class whose zone went away is kept for the claims using it.
	ReasonZoneClassInUse = "ZoneClassInUse"
	// ReasonZoneClassNameTaken: a per-zone class asked for has the name of a StorageClass the
	// operator did not make, which it leaves alone.
	ReasonZoneClassNameTaken = "ZoneClassNameTaken"
	// ReasonBackupClassNameTaken: the backup VolumeSnapshotClass is asked for, and a
	// VolumeSnapshotClass the operator did not make has its name, which it leaves alone.
	ReasonBackupClassNameTaken = "BackupClassNameTaken"
	// ReasonZoneNameInvalid: a volume zone's name cannot name a StorageClass or a label value.
	ReasonZoneNameInvalid = "ZoneNameInvalid"
)
