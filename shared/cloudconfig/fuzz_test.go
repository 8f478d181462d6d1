package cloudconfig

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gopkg.in/gcfg.v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// FuzzCloudConf checks the promises of the package documentation on arbitrary user configs:
//
//   - Node and Controller never panic and refuse a user config alike, with a *ConfigError whose
//     text holds no user text but the name of a kept key (checkConfigError);
//   - gcfg, the driver's parser, reads what they write without a fatal error (so the driver
//     starts) and to exactly the values parse kept;
//   - the controller copy's [Global] holds the operator's keys only, whatever the user wrote,
//     and the node copy has no [Global];
//   - the node copy given back as the user config comes out byte for byte the same, unless a
//     value holds a tab: that is written as gcfg's "\t" escape, and the input side refuses
//     backslashes. (Not so the controller copy: its cloud name is written for gcfg only, and may
//     start with a backtick, which the input side refuses in any section.)
//
// Its seeds are under testdata/fuzz/FuzzCloudConf; `make fuzz` explores further.
func FuzzCloudConf(f *testing.F) {
	f.Fuzz(func(t *testing.T, userConfig, cloudName string, hasCA bool) {
		// ConfigMap data and the HostedControlPlane's cloud name are Kubernetes strings, which
		// are UTF-8; gcfg refuses anything else, and so would the API server.
		if !utf8.ValidString(userConfig) || !utf8.ValidString(cloudName) {
			t.Skip()
		}
		in := Input{UserConfig: userConfig, CloudName: cloudName, HasCA: hasCA}
		node, nodeErr := Node(in)
		ctrl, ctrlErr := Controller(in)

		validName := cloudName != "" && !strings.ContainsFunc(cloudName, isForbiddenControl)
		switch {
		case !validName:
			if !errors.Is(ctrlErr, ErrInvalidCloudName) {
				t.Fatalf("Controller with cloud name %q: got error %v, want ErrInvalidCloudName", cloudName, ctrlErr)
			}
		case fmt.Sprint(ctrlErr) != fmt.Sprint(nodeErr):
			t.Fatalf("Controller and Node disagree on the same user config: %v vs %v", ctrlErr, nodeErr)
		}
		if err := checkBlockStorageOnly(userConfig, nodeErr); err != nil {
			t.Fatal(err)
		}
		if nodeErr != nil {
			if err := checkConfigError(userConfig, nodeErr); err != nil {
				t.Fatal(err)
			}
			return
		}

		user, err := parse(userConfig, false)
		if err != nil {
			t.Fatalf("parse fails where Node succeeds: %v", err)
		}
		hasTab := false
		for _, e := range append(append([]entry(nil), user.blockStorage...), user.metadata...) {
			hasTab = hasTab || strings.Contains(e.value, "\t")
		}

		if err := checkDriverReads(node, nil, user.blockStorage, user.metadata); err != nil {
			t.Fatal(err)
		}
		again, err := Node(Input{UserConfig: node})
		switch {
		case hasTab:
		case err != nil:
			t.Fatalf("Node refuses its own output %q: %v", node, err)
		case again != node:
			t.Fatalf("Node output changes when given back:\nfirst:  %q\nsecond: %q", node, again)
		}

		if !validName {
			return
		}
		global := []entry{
			{key: "use-clouds", value: "true"},
			{key: "clouds-file", value: names.CloudsFilePath},
			{key: "cloud", value: cloudName},
		}
		if hasCA {
			global = append(global, entry{key: "ca-file", value: names.CAFilePath})
		}
		if err := checkDriverReads(ctrl, global, user.blockStorage, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// checkBlockStorageOnly checks the reading of userConfig as the installer's cloud provider
// config (BlockStorageOnly), given nodeErr, Node's verdict on it as cinder-csi-config: it refuses
// nothing cinder-csi-config accepts, refuses only with an error checkConfigError accepts, keeps
// the same [BlockStorage] and no [Metadata], and gcfg reads it back to those values.
func checkBlockStorageOnly(userConfig string, nodeErr error) error {
	out, err := Node(Input{UserConfig: userConfig, BlockStorageOnly: true})
	if err != nil {
		if nodeErr == nil {
			return fmt.Errorf("BlockStorageOnly refuses a config that cinder-csi-config may hold: %w", err)
		}
		return checkConfigError(userConfig, err)
	}
	only, err := parse(userConfig, true)
	if err != nil {
		return fmt.Errorf("parse with BlockStorageOnly fails where Node succeeds: %w", err)
	}
	if len(only.metadata) > 0 {
		return fmt.Errorf("BlockStorageOnly keeps [Metadata]: %v", only.metadata)
	}
	if nodeErr == nil {
		full, err := parse(userConfig, false)
		if err != nil {
			return fmt.Errorf("parse fails where Node succeeds: %w", err)
		}
		if !slices.Equal(only.blockStorage, full.blockStorage) {
			return fmt.Errorf("BlockStorageOnly keeps [BlockStorage] %v, cinder-csi-config %v", only.blockStorage, full.blockStorage)
		}
	}
	return checkDriverReads(out, nil, only.blockStorage, nil)
}

// checkDriverReads reads out with gcfg twice: into string fields named after every key written,
// which must hold exactly the values given (a nil section must be absent), and into the typed
// fields of the driver, which must not fail.
func checkDriverReads(out string, global, blockStorage, metadata []entry) error {
	sections := []struct {
		name    string
		entries []entry
	}{
		{sectionGlobal, global},
		{sectionBlockStorage, blockStorage},
		{sectionMetadata, metadata},
	}
	var fields []reflect.StructField
	var want []map[string]string
	for i, s := range sections {
		if s.entries == nil {
			// A header is a line of its own; values hold no newline.
			if slices.Contains(strings.Split(out, "\n"), "["+s.name+"]") {
				return fmt.Errorf("output has a [%s] section it must not have:\n%s", s.name, out)
			}
			continue
		}
		typ, values := stringSection(s.entries)
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("S%d", i), Type: typ,
			Tag: reflect.StructTag(`gcfg:"` + s.name + `"`)})
		want = append(want, values)
	}

	got := reflect.New(reflect.StructOf(fields))
	if err := gcfg.ReadStringInto(got.Interface(), out); err != nil {
		return fmt.Errorf("gcfg cannot read the output as strings: %w\n%s", err, out)
	}
	for i := range want {
		sec := got.Elem().Field(i)
		for j := range sec.NumField() {
			key := sec.Type().Field(j).Tag.Get("gcfg")
			if v := sec.Field(j).String(); v != want[i][key] {
				return fmt.Errorf("gcfg reads %s = %q, want %q, from:\n%s", key, v, want[i][key], out)
			}
		}
	}

	var driver driverConf
	if err := gcfg.FatalOnly(gcfg.ReadStringInto(&driver, out)); err != nil {
		return fmt.Errorf("the driver would not start with this cloud.conf: %w\n%s", err, out)
	}
	return nil
}

// stringSection returns a struct type with one string field per key of entries, as gcfg matches
// them (case-insensitively, with Unicode folding: keys that fold alike are one field, set by the
// last of them), and the value each field must get.
func stringSection(entries []entry) (reflect.Type, map[string]string) {
	var fields []reflect.StructField
	values := map[string]string{}
	for _, e := range entries {
		key := e.key
		for _, f := range fields {
			if k := f.Tag.Get("gcfg"); strings.EqualFold(k, e.key) {
				key = k
			}
		}
		if _, ok := values[key]; !ok {
			fields = append(fields, reflect.StructField{Name: fmt.Sprintf("V%d", len(fields)),
				Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`gcfg:"` + key + `"`)})
		}
		values[key] = e.value
	}
	return reflect.StructOf(fields), values
}

// driverConf mirrors the typed keys cinder-csi-plugin reads from cloud.conf with gcfg: a value
// these fields refuse makes the driver exit at start.
type driverConf struct {
	Global struct {
		UseClouds  bool   `gcfg:"use-clouds"`
		CloudsFile string `gcfg:"clouds-file"`
		Cloud      string `gcfg:"cloud"`
		CAFile     string `gcfg:"ca-file"`
	}
	BlockStorage struct {
		NodeVolumeAttachLimit    int64 `gcfg:"node-volume-attach-limit"`
		RescanOnResize           bool  `gcfg:"rescan-on-resize"`
		IgnoreVolumeAZ           bool  `gcfg:"ignore-volume-az"`
		IgnoreVolumeMicroversion bool  `gcfg:"ignore-volume-microversion"`
	}
	Metadata struct {
		SearchOrder    string   `gcfg:"search-order"`
		RequestTimeout duration `gcfg:"request-timeout"`
	}
}

// duration reads a value the way the driver's duration type does.
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	d.Duration = v
	return err
}

// scanReasons are the reasons scan gives, each for a whole line.
var scanReasons = []string{
	`section header is missing its closing "]"`,
	"unexpected text after section header",
	"section name is empty",
	`expected "key = value" or a [section] header`,
	`key name is missing before "="`,
	"invalid key name: keys start with a letter and contain only letters, digits and hyphens",
	"backtick and triple-quoted values are not supported by the driver",
	"quoted value is missing its closing quote",
}

// keyReason matches the reasons keep gives for one value: the only user text they hold is the
// key's name.
var keyReason = regexp.MustCompile(`^\[(` + sectionBlockStorage + `|` + sectionMetadata + `)\] (\S+) (.+)$`)

// checkConfigError checks that err is a *ConfigError about the user config whose text is made
// of the fixed reasons, a line number within the config and at most the name of a key set on
// that line.
func checkConfigError(userConfig string, err error) error {
	var cfgErr *ConfigError
	if !errors.As(err, &cfgErr) {
		return fmt.Errorf("error %w (%T) is not a *ConfigError", err, err)
	}
	if cfgErr.Key != names.KeyUserConfig {
		return fmt.Errorf("error %w names ConfigMap key %q, want %q", err, cfgErr.Key, names.KeyUserConfig)
	}
	want := names.UserConfigMap + ": " + cfgErr.Reason
	if cfgErr.Line > 0 {
		want = fmt.Sprintf("%s: line %d: %s", names.UserConfigMap, cfgErr.Line, cfgErr.Reason)
	}
	if err.Error() != want {
		return fmt.Errorf("error text %q, want %q", err.Error(), want)
	}

	lines := strings.Split(strings.TrimPrefix(userConfig, "\ufeff"), "\n")
	switch {
	case cfgErr.Line == 0:
		// The safety net behind scan: a fixed text, the parser's error left out.
		if cfgErr.Reason != "not a valid INI file" {
			return fmt.Errorf("error without a line has reason %q", cfgErr.Reason)
		}
		return nil
	case cfgErr.Line > len(lines):
		return fmt.Errorf("error names line %d of a %d-line config", cfgErr.Line, len(lines))
	}
	for _, r := range scanReasons {
		if cfgErr.Reason == r {
			return nil
		}
	}

	m := keyReason.FindStringSubmatch(cfgErr.Reason)
	if m == nil {
		return fmt.Errorf("error reason %q is neither a line reason nor a key reason", cfgErr.Reason)
	}
	key, why := m[2], m[3]
	if !validKeyName(key) || key != strings.ToLower(key) {
		return fmt.Errorf("error reason %q names %q, which is not a key as ini.v1 reports it", cfgErr.Reason, key)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(lines[cfgErr.Line-1]), "=")
	if !strings.EqualFold(strings.TrimSpace(line), key) {
		return fmt.Errorf("error reason %q names key %q, but line %d sets %q", cfgErr.Reason, key, cfgErr.Line, line)
	}
	if why == "contains a control character" || why == "contains a backslash" {
		return nil
	}
	for _, validators := range []map[string]validator{blockStorageValidators, metadataValidators} {
		for _, validate := range validators {
			// Every validator refuses the empty value, with the one reason it has
			// (TestFuzzCheckers checks that).
			if why == validate("") {
				return nil
			}
		}
	}
	return fmt.Errorf("error reason %q says %q, which no check says", cfgErr.Reason, why)
}

// TestFuzzCheckers checks that the fuzz target's checks catch what they are meant to catch, so
// that a passing fuzz run means something.
func TestFuzzCheckers(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name string
		err  error
	}{
		{
			name: "When gcfg reads a value other than the one kept, it should report it",
			err:  checkDriverReads("[BlockStorage]\nfuture-key = b\n", nil, []entry{{key: "future-key", value: "a"}}, nil),
		},
		{
			name: "When the driver would refuse a typed value, it should report it",
			err:  checkDriverReads("[BlockStorage]\nrescan-on-resize = maybe\n", nil, []entry{{key: "rescan-on-resize", value: "maybe"}}, nil),
		},
		{
			name: "When a section must be absent but is written, it should report it",
			err:  checkDriverReads("[Global]\ncloud = x\n", nil, []entry{}, nil),
		},
		{
			name: "When an error quotes a value, it should report it",
			err: checkConfigError("[BlockStorage]\nx = hunter2\n",
				&ConfigError{Key: names.KeyUserConfig, Line: 2, Reason: "[BlockStorage] x is hunter2"}),
		},
		{
			name: "When an error names a key that is not on its line, it should report it",
			err: checkConfigError("[BlockStorage]\nx = 1\n",
				&ConfigError{Key: names.KeyUserConfig, Line: 1, Reason: "[BlockStorage] x contains a backslash"}),
		},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.err == nil {
				t.Fatal("Not reported")
			}
		})
	}
	t.Run("When every validator refuses the empty value, it should know their reasons", func(t *testing.T) {
		t.Parallel()
		for _, validators := range []map[string]validator{blockStorageValidators, metadataValidators} {
			for key, validate := range validators {
				if validate("") == "" {
					t.Fatalf("The validator of %s accepts the empty value; checkConfigError relies on it refusing it", key)
				}
			}
		}
	})
	t.Run("When the output is right, it should report nothing", func(t *testing.T) {
		t.Parallel()
		err := checkDriverReads("[BlockStorage]\nrescan-on-resize = yes\n", nil, []entry{{key: "rescan-on-resize", value: "yes"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	})
}
