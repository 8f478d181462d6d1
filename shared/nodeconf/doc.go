// Package nodeconf is the contract between the two managers: the node copy of the cloud-conf
// ConfigMap, in the guest namespace. The controlplane manager, which holds the credentials and
// lists the OpenStack zones, writes it; the guest manager, which never talks to OpenStack, mounts
// its cloud.conf into the node plugin and reads from it what it applies beside standard-csi. The
// managers never import each other, so what crosses is defined here, once: the ConfigMap's name
// (Name), every key (Key*), the typed Contents, its encoding (Encode) and decoding (Decode), and
// the data hash that tells a node copy the controlplane manager wrote from one it did not (Seal,
// Usable).
//
// The layout is csi-operator's cloud-conf (cloud.conf, enable_topology, ca-bundle.pem), which the
// controller copy shares, plus the keys that carry the controlplane manager's decisions for the
// guest manager: the zones of the last listing that succeeded, the per-zone StorageClasses and
// the snapshot class settings. The wire format is the one clusters hold today: a key is written
// only when it says something its absence does not (snapshot_force_create only as "false"), and
// a value written by an earlier release decodes to the same meaning. Where a key carries a
// setting of the user's cinder-csi-config under the same name, its constant is the user key's,
// so that the spelling has one definition.
//
// The name is "node conf": the configuration the node side of the operator runs from.
package nodeconf
