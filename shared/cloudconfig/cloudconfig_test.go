package cloudconfig

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// globalNoCA is the [Global] section every controller copy starts with for cloud "openstack".
const globalNoCA = "[Global]\n" +
	"use-clouds = true\n" +
	"clouds-file = " + names.CloudsFilePath + "\n" +
	"cloud = openstack\n"

func TestController(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      Input
		want    string
		wantErr string
	}{
		{
			name: "When the user config is unset, it should write only [Global]",
			in:   Input{CloudName: "openstack"},
			want: globalNoCA,
		},
		{
			name: "When the user config is blank lines and comments, it should write only [Global]",
			in:   Input{CloudName: "openstack", UserConfig: "\n  \n# nothing\n; here\n"},
			want: globalNoCA,
		},
		{
			name: "When [BlockStorage] sets ignore-volume-az = True, it should keep the key and its spelling",
			in:   Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nignore-volume-az = True\n"},
			want: globalNoCA + "\n[BlockStorage]\nignore-volume-az = True\n",
		},
		{
			name: "When a CA bundle exists, it should add ca-file",
			in:   Input{CloudName: "openstack", HasCA: true},
			want: globalNoCA + "ca-file = " + names.CAFilePath + "\n",
		},
		{
			name: "When [BlockStorage] holds only trust-device-path, it should drop the key and the empty section",
			in:   Input{CloudName: "openstack", UserConfig: "[BlockStorage]\ntrust-device-path = true\n"},
			want: globalNoCA,
		},
		{
			name: "When [BlockStorage] holds trust-device-path and other keys, it should drop only trust-device-path",
			in: Input{CloudName: "openstack",
				UserConfig: "[BlockStorage]\nrescan-on-resize = yes\nTrust-Device-Path = false\nnode-volume-attach-limit = 26\n"},
			want: globalNoCA + "\n[BlockStorage]\nrescan-on-resize = yes\nnode-volume-attach-limit = 26\n",
		},
		{
			name: "When the cloud name comes from the HostedControlPlane, it should name that cloud",
			in:   Input{CloudName: "my-cloud"},
			want: "[Global]\nuse-clouds = true\nclouds-file = " + names.CloudsFilePath + "\ncloud = my-cloud\n",
		},
		{
			name:    "When the cloud name is empty, it should fail",
			in:      Input{},
			wantErr: ErrInvalidCloudName.Error(),
		},
		{
			name:    "When the cloud name holds a newline, it should fail",
			in:      Input{CloudName: "openstack\n[Global]"},
			wantErr: ErrInvalidCloudName.Error(),
		},
		{
			name: "When the cloud name holds a quote, it should quote it",
			in:   Input{CloudName: `my "cloud"`},
			want: "[Global]\nuse-clouds = true\nclouds-file = " + names.CloudsFilePath + "\ncloud = \"my \\\"cloud\\\"\"\n",
		},
		{
			name: "When the user config has its own [Global], it should drop it",
			in: Input{CloudName: "openstack",
				UserConfig: "[Global]\nauth-url = https://evil.example.com\npassword = hunter2\n[BlockStorage]\nignore-volume-az = false\n"},
			want: globalNoCA + "\n[BlockStorage]\nignore-volume-az = false\n",
		},
		{
			name: "When the user config has a [Global \"name\"] subsection, it should drop it",
			in:   Input{CloudName: "openstack", UserConfig: "[Global \"other\"]\ncloud = other\n"},
			want: globalNoCA,
		},
		{
			name: "When the user config has [Metadata] and [LoadBalancer], it should drop both",
			in: Input{CloudName: "openstack",
				UserConfig: "[Metadata]\nsearch-order = configDrive\n[LoadBalancer]\nuse-octavia = true\n"},
			want: globalNoCA,
		},
		{
			name: "When keys appear before any section, it should drop them",
			in:   Input{CloudName: "openstack", UserConfig: "auth-url = https://x\n[BlockStorage]\nrescan-on-resize = on\n"},
			want: globalNoCA + "\n[BlockStorage]\nrescan-on-resize = on\n",
		},
		{
			name: "When names differ in case, it should match them like the driver and write canonical names",
			in:   Input{CloudName: "openstack", UserConfig: "[blockstorage]\nIGNORE-VOLUME-AZ = TRUE\n"},
			want: globalNoCA + "\n[BlockStorage]\nignore-volume-az = TRUE\n",
		},
		{
			name: "When a section and a key repeat, it should merge the sections and keep the last value in the first position",
			in: Input{CloudName: "openstack",
				UserConfig: "[BlockStorage]\nignore-volume-az = true\nrescan-on-resize = no\n[Global]\n[BlockStorage]\nignore-volume-az = false\n"},
			want: globalNoCA + "\n[BlockStorage]\nignore-volume-az = false\nrescan-on-resize = no\n",
		},
		{
			name: "When values carry comments, quotes, CRLF and a BOM, it should write the plain values",
			in: Input{CloudName: "openstack",
				UserConfig: "\ufeff[ BlockStorage ] ; the [only] kept section\r\nignore-volume-az = \"true\" ; quoted\r\nnode-volume-attach-limit = 0x1a # hex\r\n"},
			want: globalNoCA + "\n[BlockStorage]\nignore-volume-az = true\nnode-volume-attach-limit = 0x1a\n",
		},
		{
			name: "When an unknown key holds characters special to gcfg, it should quote and escape them",
			in: Input{CloudName: "openstack",
				UserConfig: "[BlockStorage]\nfuture-key = \"a;b#c \\\"d\\\" e\tf \"\nempty-key =\n"},
			want: globalNoCA + "\n[BlockStorage]\nfuture-key = \"a;b#c \\\"d\\\" e\\tf \"\nempty-key = \"\"\n",
		},
		{
			name:    "When a kept value holds a backslash, it should fail naming key and line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nfuture-key = \"a\\\\b\"\n"},
			wantErr: "cinder-csi-config: line 2: [BlockStorage] future-key contains a backslash",
		},
		{
			name: "When a dropped section holds a backslash, it should not care",
			in:   Input{CloudName: "openstack", UserConfig: "[Global]\npassword = \"a\\\\b\"\n"},
			want: globalNoCA,
		},
		{
			name:    "When a kept value holds a control character, it should fail naming key and line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nfuture-key = a\x01b\n"},
			wantErr: "cinder-csi-config: line 2: [BlockStorage] future-key contains a control character",
		},
		{
			name: "When a value continues over lines, it should join them",
			in:   Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nnode-volume-attach-limit = 2\\\n  6\nrescan-on-resize = 1\n"},
			want: globalNoCA + "\n[BlockStorage]\nnode-volume-attach-limit = 26\nrescan-on-resize = 1\n",
		},
		{
			name:    "When a section header is not closed, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "# cinder\n\n[BlockStorage\nignore-volume-az = true\n"},
			wantErr: `cinder-csi-config: line 3: section header is missing its closing "]"`,
		},
		{
			name:    "When a line has no \"=\", it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[Global]\npassword = x\nhunter2\n"},
			wantErr: `cinder-csi-config: line 3: expected "key = value" or a [section] header`,
		},
		{
			name:    "When a key name is missing, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\n= true\n"},
			wantErr: `cinder-csi-config: line 2: key name is missing before "="`,
		},
		{
			name:    "When a key name is not a gcfg name, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nignore_volume_az = true\n"},
			wantErr: "cinder-csi-config: line 2: invalid key name: keys start with a letter and contain only letters, digits and hyphens",
		},
		{
			name:    "When a section name is empty, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[ ]\n"},
			wantErr: "cinder-csi-config: line 1: section name is empty",
		},
		{
			name:    "When text follows a section header, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage] x\n"},
			wantErr: "cinder-csi-config: line 1: unexpected text after section header",
		},
		{
			name:    "When a quoted value is not closed, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[Global]\npassword = \"abc\n\"\n"},
			wantErr: "cinder-csi-config: line 2: quoted value is missing its closing quote",
		},
		{
			name:    "When a value is backtick-quoted, it should fail naming the line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nx = `abc`\n"},
			wantErr: "cinder-csi-config: line 2: backtick and triple-quoted values are not supported by the driver",
		},
		{
			name:    "When a line follows a continued value, it should count lines correctly",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nx = a\\\nb\\\nc\nbroken\n"},
			wantErr: `cinder-csi-config: line 5: expected "key = value" or a [section] header`,
		},
		{
			name:    "When node-volume-attach-limit is not an integer, it should fail naming key and line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\n\nnode-volume-attach-limit = many\n"},
			wantErr: "cinder-csi-config: line 3: [BlockStorage] node-volume-attach-limit must be an integer",
		},
		{
			name:    "When node-volume-attach-limit uses an underscore, it should fail like gcfg",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nnode-volume-attach-limit = 1_000\n"},
			wantErr: "cinder-csi-config: line 2: [BlockStorage] node-volume-attach-limit must be an integer",
		},
		{
			name:    "When a bool key is not a gcfg bool, it should fail naming key and line",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nignore-volume-az = true\nrescan-on-resize = enabled\n"},
			wantErr: "cinder-csi-config: line 3: [BlockStorage] rescan-on-resize must be a boolean: true, false, yes, no, on, off, 1 or 0",
		},
		{
			name:    "When a typed key is spelt with a character gcfg folds into it, it should check the value all the same",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nre\u017fcan-on-resize = maybe\n"},
			wantErr: "cinder-csi-config: line 2: [BlockStorage] re\u017fcan-on-resize must be a boolean: true, false, yes, no, on, off, 1 or 0",
		},
		{
			name:    "When a bool key is single-quoted, it should fail because gcfg keeps the quotes",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nignore-volume-microversion = 'true'\n"},
			wantErr: "cinder-csi-config: line 2: [BlockStorage] ignore-volume-microversion must be a boolean: true, false, yes, no, on, off, 1 or 0",
		},
		{
			name:    "When a key repeats with a bad last value, it should name the line of the last one",
			in:      Input{CloudName: "openstack", UserConfig: "[BlockStorage]\nignore-volume-az = true\nignore-volume-az = maybe\n"},
			wantErr: "cinder-csi-config: line 3: [BlockStorage] ignore-volume-az must be a boolean: true, false, yes, no, on, off, 1 or 0",
		},
		{
			name:    "When [Metadata] is invalid, it should fail even though the controller drops it",
			in:      Input{CloudName: "openstack", UserConfig: "[Metadata]\nsearch-order = configDrive,metadataService,other\n"},
			wantErr: `cinder-csi-config: line 2: [Metadata] search-order must be "configDrive", "metadataService" or both, comma separated`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := Controller(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))

			again, err := Controller(tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(got), "output must be byte-identical for identical input")
		})
	}
}

func TestNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      Input
		want    string
		wantErr string
	}{
		{
			name: "When the user config is unset, it should write an empty file",
			in:   Input{CloudName: "openstack", HasCA: true},
			want: "",
		},
		{
			name: "When [BlockStorage] is set, it should keep it without [Global], credentials or clouds-file",
			in: Input{CloudName: "openstack", HasCA: true,
				UserConfig: "[Global]\nuse-clouds = true\nclouds-file = /x\npassword = hunter2\n[BlockStorage]\nnode-volume-attach-limit = 26\ntrust-device-path = true\n"},
			want: "[BlockStorage]\nnode-volume-attach-limit = 26\n",
		},
		{
			name: "When [Metadata] is set, it should keep it after [BlockStorage]",
			in: Input{
				UserConfig: "[Metadata]\nsearch-order = metadataService, configDrive\nrequest-timeout = 30s\n[BlockStorage]\nrescan-on-resize = true\n"},
			want: "[BlockStorage]\nrescan-on-resize = true\n\n[Metadata]\nsearch-order = metadataService, configDrive\nrequest-timeout = 30s\n",
		},
		{
			name: "When only [Metadata] is set, it should write only [Metadata]",
			in:   Input{UserConfig: "[metadata]\nSearch-Order = configDrive\n"},
			want: "[Metadata]\nsearch-order = configDrive\n",
		},
		{
			name: "When only trust-device-path is set, it should write an empty file",
			in:   Input{UserConfig: "[BlockStorage]\ntrust-device-path = false\n"},
			want: "",
		},
		{
			name: "When the cloud name is empty, it should not care",
			in:   Input{UserConfig: "[BlockStorage]\nignore-volume-az = yes\n"},
			want: "[BlockStorage]\nignore-volume-az = yes\n",
		},
		{
			name:    "When request-timeout is not a duration, it should fail naming key and line",
			in:      Input{UserConfig: "[Metadata]\nrequest-timeout = 30\n"},
			wantErr: `cinder-csi-config: line 2: [Metadata] request-timeout must be a duration such as "30s" or "1m"`,
		},
		{
			name:    "When search-order is empty, it should fail naming key and line",
			in:      Input{UserConfig: "[Metadata]\nsearch-order =\n"},
			wantErr: `cinder-csi-config: line 2: [Metadata] search-order must be "configDrive", "metadataService" or both, comma separated`,
		},
		{
			name:    "When search-order has the wrong case, it should fail like the driver",
			in:      Input{UserConfig: "[Metadata]\nsearch-order = configdrive\n"},
			wantErr: `cinder-csi-config: line 2: [Metadata] search-order must be "configDrive", "metadataService" or both, comma separated`,
		},
		{
			name:    "When the INI is malformed, it should fail naming the line",
			in:      Input{UserConfig: "[BlockStorage]\nignore-volume-az = true\n[Metadata\n"},
			wantErr: `cinder-csi-config: line 3: section header is missing its closing "]"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := Node(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				var cfgErr *ConfigError
				g.Expect(errors.As(err, &cfgErr)).To(BeTrue(), "invalid user input must be recognisable")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got).NotTo(ContainSubstring("Global"))
			g.Expect(got).NotTo(ContainSubstring("clouds"))
			g.Expect(got).NotTo(ContainSubstring("hunter2"))
		})
	}
}

// installerConfig is a cloud provider config as an installer before 4.14 left it, with what older
// clusters and hand edits add: credentials, sections of the cloud provider, a line gcfg reads as
// a boolean and this package would refuse in cinder-csi-config, and [BlockStorage] settings.
const installerConfig = "# written by the installer\n" +
	"[Global]\n" +
	"secret-name = openstack-credentials\n" +
	"secret-namespace = kube-system\n" +
	"password = `hunter2\n" +
	"insecure\n" +
	"[LoadBalancer]\n" +
	"use-octavia = True\n" +
	"[Metadata]\n" +
	"search-order = configDrive,elsewhere\n" +
	"[BlockStorage]\n" +
	"bs-version = v3\n" +
	"ignore-volume-az = yes\n" +
	"trust-device-path = true\n"

func TestBlockStorageOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		config   string
		wantCtrl string
		wantNode string
		wantErr  string
	}{
		{
			name:     "When the installer's file has other sections, it should keep only [BlockStorage], unknown keys included, without trust-device-path",
			config:   installerConfig,
			wantCtrl: globalNoCA + "\n[BlockStorage]\nbs-version = v3\nignore-volume-az = yes\n",
			wantNode: "[BlockStorage]\nbs-version = v3\nignore-volume-az = yes\n",
		},
		{
			name:     "When [BlockStorage] holds only trust-device-path, it should drop the emptied section",
			config:   "[Global]\nsecret-name = openstack-credentials\n[BlockStorage]\ntrust-device-path = false\n",
			wantCtrl: globalNoCA,
			wantNode: "",
		},
		{
			name:     "When the file has no [BlockStorage], it should keep nothing",
			config:   "[Global]\nsecret-name = openstack-credentials\n[Metadata]\nsearch-order = configDrive\n",
			wantCtrl: globalNoCA,
			wantNode: "",
		},
		{
			name:     "When [BlockStorage] is spelt in another case and repeats, it should merge it like the driver",
			config:   "[blockstorage]\nrescan-on-resize = on\n[Global]\npassword = \"a\\\\b\"\n[BlockStorage]\nignore-volume-az = no\n",
			wantCtrl: globalNoCA + "\n[BlockStorage]\nrescan-on-resize = on\nignore-volume-az = no\n",
			wantNode: "[BlockStorage]\nrescan-on-resize = on\nignore-volume-az = no\n",
		},
		{
			name:     "When a value of another section continues over lines, it should skip all of them, as cinder-csi-config reads them",
			config:   "[Global]\nfuture = a\\\n  b = c\\\n[BlockStorage]\nrescan-on-resize = maybe\n",
			wantCtrl: globalNoCA,
			wantNode: "",
		},
		{
			name:    "When a typed [BlockStorage] value is one the driver refuses, it should fail naming key and line",
			config:  "[Global]\npassword = hunter2\n[BlockStorage]\nignore-volume-az = maybe\n",
			wantErr: "cinder-csi-config: line 4: [BlockStorage] ignore-volume-az must be a boolean: true, false, yes, no, on, off, 1 or 0",
		},
		{
			name:    "When a [BlockStorage] line is malformed, it should fail naming the line",
			config:  "[Global]\npassword = hunter2\n[BlockStorage]\nhunter2\n",
			wantErr: `cinder-csi-config: line 4: expected "key = value" or a [section] header`,
		},
		{
			name:    "When a section header is not closed, it should fail naming the line: it decides where [BlockStorage] is",
			config:  "[Global\npassword = hunter2\n",
			wantErr: `cinder-csi-config: line 1: section header is missing its closing "]"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			in := Input{CloudName: "openstack", UserConfig: tt.config, BlockStorageOnly: true}
			ctrl, ctrlErr := Controller(in)
			node, nodeErr := Node(in)
			if tt.wantErr != "" {
				g.Expect(ctrlErr).To(MatchError(tt.wantErr))
				g.Expect(nodeErr).To(MatchError(tt.wantErr))
				g.Expect(ctrlErr.Error()).NotTo(ContainSubstring("hunter2"))
				return
			}
			g.Expect(ctrlErr).NotTo(HaveOccurred())
			g.Expect(nodeErr).NotTo(HaveOccurred())
			g.Expect(ctrl).To(Equal(tt.wantCtrl))
			g.Expect(node).To(Equal(tt.wantNode))
		})
	}

	t.Run("When the same file is cinder-csi-config, it should be refused for the lines of other sections", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		_, err := Controller(Input{CloudName: "openstack", UserConfig: installerConfig})
		g.Expect(err).To(MatchError("cinder-csi-config: line 5: backtick and triple-quoted values are not supported by the driver"))
	})
}

func TestParseTopologyOverride(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	tests := []struct {
		name    string
		in      string
		want    *bool
		wantErr string
	}{
		{name: "When the value is empty, it should return no override", in: "", want: nil},
		{name: "When the value is blank, it should return no override", in: " \n", want: nil},
		{name: "When the value is true, it should return true", in: "true", want: &yes},
		{name: "When the value is FALSE with spaces, it should return false", in: "  FALSE\n", want: &no},
		{name: "When the value is True, it should return true", in: "True", want: &yes},
		{
			name:    "When the value is yes, it should fail naming the accepted values",
			in:      "yes",
			wantErr: `cinder-csi-config: enable_topology: must be "true" or "false", or be left empty to detect topology support`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := ParseTopologyOverride(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestConfigError_Error(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *ConfigError
		want string
	}{
		{
			name: "When the error is on a line of the INI, it should name the line only",
			err:  &ConfigError{Key: names.KeyUserConfig, Line: 3, Reason: "bad"},
			want: "cinder-csi-config: line 3: bad",
		},
		{
			name: "When the error is in another key, it should name the key",
			err:  &ConfigError{Key: names.KeyEnableTopology, Reason: "bad"},
			want: "cinder-csi-config: enable_topology: bad",
		},
		{
			name: "When the error is in another ConfigMap, it should name that ConfigMap",
			err:  &ConfigError{ConfigMap: "cloud-provider-config", Key: "cloud.conf", Line: 2, Reason: "bad"},
			want: "cloud-provider-config: cloud.conf: line 2: bad",
		},
		{
			name: "When a parser error is attached, it should leave its text out",
			err:  &ConfigError{Key: names.KeyUserConfig, Reason: "not a valid INI file", Err: errors.New("unclosed section: [password=hunter2")},
			want: "cinder-csi-config: not a valid INI file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(tt.err.Error()).To(Equal(tt.want))
		})
	}
}

func TestConfigError_Unwrap(t *testing.T) {
	t.Parallel()
	t.Run("When a parser error is attached, it should be reachable with errors.Is", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		cause := errors.New("cause")
		g.Expect(errors.Is(&ConfigError{Reason: "r", Err: cause}, cause)).To(BeTrue())
		g.Expect((&ConfigError{Reason: "r"}).Unwrap()).To(BeNil())
	})
}
