package cloudconfig

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name             string
		ini              string
		blockStorageOnly bool
		want             Report
	}{
		{name: "When the configuration is empty, it should report nothing ignored and no attach limit", ini: ""},
		{
			name: "When [BlockStorage] sets only known keys and an attach limit, it should report the limit and nothing ignored",
			ini:  "[BlockStorage]\nnode-volume-attach-limit = 25\nignore-volume-az = true\n[Metadata]\nsearch-order = configDrive\n",
			want: Report{AttachLimit: 25, AttachLimitSet: true},
		},
		{
			name: "When the attach limit is hexadecimal, it should read it as the driver does",
			ini:  "[blockstorage]\nNode-Volume-Attach-Limit = 0x1a\n",
			want: Report{AttachLimit: 26, AttachLimitSet: true},
		},
		{
			name: "When the attach limit is 0, it should report it set to 0",
			ini:  "[BlockStorage]\nnode-volume-attach-limit = 0\n",
			want: Report{AttachLimitSet: true},
		},
		{
			name: "When [BlockStorage] holds misspelt and legacy keys, it should name them, lower-cased and sorted, and trust-device-path as dropped",
			ini:  "[BlockStorage]\nnode-volume-attach-limits = 25\nBS-Version = v3\ntrust-device-path = false\nbs-version = v2\n",
			want: Report{UnknownBlockStorageKeys: []string{"bs-version", "node-volume-attach-limits"}, DroppedBlockStorageKeys: []string{"trust-device-path"}},
		},
		{
			name: "When the user writes [Global] and other sections, it should report [Global] apart and the others once each, as first spelt",
			ini: "[Global]\npassword = s3cret\n[Global \"other\"]\nauth-url = https://x\n[LoadBalancer]\nsubnet-id = 1\n" +
				"[loadbalancer]\nx = 1\n[Networking]\n[Metadata]\nsearch-order = configDrive\n",
			want: Report{Global: true, DroppedSections: []string{"LoadBalancer", "Networking"}},
		},
		{
			name: "When keys precede the first section header, it should report them dropped",
			ini:  "orphan = 1\n[BlockStorage]\nnode-volume-attach-limit = 20\n",
			want: Report{KeysBeforeSections: true, AttachLimit: 20, AttachLimitSet: true},
		},
		{
			name: "When a value continues on the next line, it should not read the continuation as a key",
			ini:  "[Networking]\nnote = a \\\n b = c\n[BlockStorage]\nrescan-on-resize = true\n",
			want: Report{DroppedSections: []string{"Networking"}},
		},
		{
			name: "When a section name is unusual, it should not quote it",
			ini:  "[Weird/Name:with*chars]\nx = 1\n",
			want: Report{DroppedSections: []string{"(a section with an unusual name)"}},
		},
		{
			name:             "When reading the installer's cloud provider config, it should report neither its other sections nor their keys, only [BlockStorage]",
			ini:              "top = 1\n[Global]\npassword = s3cret\n[LoadBalancer]\nuse-octavia = true\n[BlockStorage]\nbs-version = v3\n",
			blockStorageOnly: true,
			want:             Report{UnknownBlockStorageKeys: []string{"bs-version"}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := Inspect(Input{UserConfig: tt.ini, CloudName: "openstack", BlockStorageOnly: tt.blockStorageOnly})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got.Ignored()).To(Equal(len(tt.want.UnknownBlockStorageKeys)+len(tt.want.DroppedBlockStorageKeys)+len(tt.want.DroppedSections) > 0 ||
				tt.want.Global || tt.want.KeysBeforeSections))
		})
	}

	t.Run("When the configuration is invalid, it should return the same error as Node", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		in := Input{UserConfig: "[BlockStorage]\nrescan-on-resize = maybe\n"}
		_, want := Node(in)
		_, err := Inspect(in)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err).To(Equal(want))
	})

	t.Run("When the driver's known keys are listed, they should be the gcfg tags of BlockStorageOpts that have validators", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		for _, k := range KnownBlockStorageKeys {
			g.Expect(blockStorageValidators).To(HaveKey(k))
		}
		g.Expect(blockStorageValidators).To(HaveLen(len(KnownBlockStorageKeys)))
	})
}
