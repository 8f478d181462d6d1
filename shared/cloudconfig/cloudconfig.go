// Package cloudconfig generates the cloud.conf files of the Cinder CSI driver from the user's
// optional cinder-csi-config ConfigMap or, standalone without it, from the installer's cloud
// provider config.
//
// The driver reads cloud.conf with gopkg.in/gcfg.v1, while the user's INI is parsed here with
// gopkg.in/ini.v1 (as openshift/csi-operator does). The two libraries disagree at the edges
// (ini.v1 accepts ':' delimiters, backtick and triple-quoted values, bare keys without "=" and
// strips single quotes; gcfg does none of that, and ini.v1's own writer quotes values with
// backticks gcfg rejects), so this package accepts only a subset both read alike and writes its
// output itself, in plain "key = value" lines that gcfg reads back to the same values.
//
// Decisions, so that callers and reviewers need not read the code:
//   - Section and key names are matched case-insensitively, like gcfg does; kept sections are
//     written as [BlockStorage] and [Metadata], keys in lower case.
//   - A section that appears twice is merged; a key that appears twice keeps its last value
//     (at the position of its first occurrence). That is what both ini.v1 and gcfg do, so the
//     driver sees what the user would expect from running it on the file directly.
//   - Key order within a kept section is the user's order; the operator's own [Global] keys come
//     in a fixed order. Identical input therefore gives byte-identical output, which keeps the
//     pod-template hash of cloud-conf stable.
//   - Keys before the first section header are dropped, like every section but the kept ones.
//   - The whole file must be well formed; only kept sections have their values checked (typed
//     keys, no control characters, no backslashes, whose escapes the two libraries read apart).
//   - Errors never quote the user's text: a malformed line in a dropped [Global] section could
//     hold a password, and errors end up in conditions and events.
//   - The installer's cloud provider config (Input.BlockStorageOnly) is read for [BlockStorage]
//     only: the lines of its other sections are blanked before parsing, so the cloud provider's
//     own settings, credentials included on old clusters, are never parsed, checked or quoted.
package cloudconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Input is everything the generated cloud.conf files depend on.
type Input struct {
	// UserConfig is the INI text of key "config" of the user's cinder-csi-config ConfigMap; it
	// may be empty.
	UserConfig string
	// CloudName is the entry of clouds.yaml the controller authenticates with: the
	// HostedControlPlane identityRef cloud name, or "openstack" in standalone mode. The node copy
	// ignores it.
	CloudName string
	// HasCA says whether an OpenStack CA bundle is mounted at names.CAFilePath.
	HasCA bool
	// BlockStorageOnly reads nothing of UserConfig but its [BlockStorage] section, for the
	// installer's cloud provider config: a file written for the cloud provider, whose other
	// sections are none of the driver's business, and of which csi-operator took [BlockStorage]
	// only (so no [Metadata] reaches the node copy either). That section is checked like
	// cinder-csi-config's: a typed value the driver would refuse is an error, since the driver
	// would otherwise crash on every node; an unknown key (the in-tree provider's bs-version,
	// say) passes through unchecked, as csi-operator passed it: the driver ignores it, and
	// refusing it would stop a cluster that works today.
	BlockStorageOnly bool
}

// ErrInvalidCloudName is returned by Controller when Input.CloudName is empty or holds control
// characters: the driver would fail at start with "cloud name ... not found", far from the cause.
var ErrInvalidCloudName = errors.New("cloud name for clouds.yaml is empty or contains control characters")

// ConfigError reports invalid content in the user's configuration: cinder-csi-config, or the
// installer's cloud provider config. Callers treat it as invalid user input (a Degraded
// condition, no hot retry); its message is stable for a given input and never contains the
// user's values.
type ConfigError struct {
	// ConfigMap is the name of the ConfigMap in openshift-config that holds the bad content;
	// empty means names.UserConfigMap. This package fills in Key only: the caller, which knows
	// where the text came from, sets ConfigMap (and Key, for another source than cinder-csi-config).
	ConfigMap string
	// Key is the ConfigMap key that holds the bad content (names.KeyUserConfig or
	// names.KeyEnableTopology).
	Key string
	// Line is the 1-based line of Key's text at fault, or 0 when no single line is.
	Line int
	// Reason says what is wrong and what is accepted.
	Reason string
	// Err is the parser error behind Reason, if any. It is kept for errors.Is/As but left out
	// of Error(), because parser errors quote the offending line, which may hold a secret.
	Err error
}

// Error formats the error as "cinder-csi-config: line 3: <reason>"; the ConfigMap key is named
// only when it is not the INI key "config", which is what users edit almost always.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.ConfigMap != "" {
		b.WriteString(e.ConfigMap)
	} else {
		b.WriteString(names.UserConfigMap)
	}
	if e.Key != "" && e.Key != names.KeyUserConfig {
		b.WriteString(": " + e.Key)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// Unwrap returns the underlying parser error, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// Section and key names written to cloud.conf.
const (
	sectionGlobal       = "Global"
	sectionBlockStorage = "BlockStorage"
	sectionMetadata     = "Metadata"
)

// Controller returns the controller copy of cloud.conf: a [Global] section that points the
// driver at the mounted clouds.yaml, plus the user's [BlockStorage] keys. Every other user
// section is dropped; in particular a user [Global] could otherwise inject credentials or
// endpoints that override clouds.yaml.
func Controller(in Input) (string, error) {
	if in.CloudName == "" || strings.ContainsFunc(in.CloudName, isForbiddenControl) {
		return "", ErrInvalidCloudName
	}
	user, err := parse(in.UserConfig, in.BlockStorageOnly)
	if err != nil {
		return "", err
	}
	global := []entry{
		{key: "use-clouds", value: "true"},
		{key: "clouds-file", value: names.CloudsFilePath},
		{key: "cloud", value: in.CloudName},
	}
	if in.HasCA {
		global = append(global, entry{key: "ca-file", value: names.CAFilePath})
	}
	return render([]section{
		{name: sectionGlobal, entries: global},
		{name: sectionBlockStorage, entries: user.blockStorage},
	}), nil
}

// Node returns the node copy of cloud.conf: the user's [BlockStorage] and [Metadata] keys and
// nothing else. The node service of cinder-csi-plugin >= v1.32 reads only these two sections, so
// the node plugin gets no [Global], no clouds-file and no credentials. A config with neither section gives an empty file, which the driver accepts.
func Node(in Input) (string, error) {
	user, err := parse(in.UserConfig, in.BlockStorageOnly)
	if err != nil {
		return "", err
	}
	return render([]section{
		{name: sectionBlockStorage, entries: user.blockStorage},
		{name: sectionMetadata, entries: user.metadata},
	}), nil
}

// ParseTopologyOverride parses the enable_topology key of the user's ConfigMap. An empty (or
// blank) value means "no override, detect"; otherwise only true and false are accepted, in any
// case, because the value ends up verbatim in --with-topology on two different pods and must
// mean the same thing to both.
func ParseTopologyOverride(s string) (*bool, error) {
	switch v := strings.TrimSpace(s); {
	case v == "":
		return nil, nil
	case strings.EqualFold(v, "true"):
		t := true
		return &t, nil
	case strings.EqualFold(v, "false"):
		f := false
		return &f, nil
	default:
		return nil, &ConfigError{
			Key:    names.KeyEnableTopology,
			Reason: `must be "true" or "false", or be left empty to detect topology support`,
		}
	}
}
