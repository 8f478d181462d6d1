package imagetars

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBuildOperator(t *testing.T) {
	bin := t.TempDir()
	binary := filepath.Join(t.TempDir(), "cinder-csi-operator")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(binary, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("first build")
	first, err := BuildOperator(bin, binary)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("When the binary is packed, it should be the non-root entrypoint of the Dockerfile's image", func(t *testing.T) {
		l := readLayout(t, first.Tar)
		if got := string(l.contents["usr/bin/cinder-csi-operator"]); got != "first build" {
			t.Errorf("/usr/bin/cinder-csi-operator holds %q", got)
		}
		if hdr := l.files["usr/bin/cinder-csi-operator"]; hdr == nil || hdr.Mode&0o111 == 0 {
			t.Errorf("the binary is not executable: %+v", hdr)
		}
		if got := l.config.Config.Entrypoint; !slices.Equal(got, []string{"/usr/bin/cinder-csi-operator"}) {
			t.Errorf("entrypoint %v", got)
		}
		if got := l.config.Config.User; got != OperatorUser {
			t.Errorf("user %q, want %q", got, OperatorUser)
		}
		if _, ok := l.files["tmp"]; !ok {
			t.Error("no /tmp")
		}
		if !strings.HasPrefix(first.Ref, Prefix+Operator+":dev-") {
			t.Errorf("ref %s", first.Ref)
		}
	})

	t.Run("When the binary is unchanged, it should reuse the tar and the reference", func(t *testing.T) {
		again, err := BuildOperator(bin, binary)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Errorf("rebuilt: %+v, was %+v", again, first)
		}
	})

	t.Run("When the binary changes, it should get a new reference and drop the old tar", func(t *testing.T) {
		write("second build")
		second, err := BuildOperator(bin, binary)
		if err != nil {
			t.Fatal(err)
		}
		if second.Ref == first.Ref {
			t.Errorf("the same reference %s for a different binary", second.Ref)
		}
		if _, err := os.Stat(first.Tar); !os.IsNotExist(err) {
			t.Errorf("the old tar is still there: %v", err)
		}
		if got := string(readLayout(t, second.Tar).contents["usr/bin/cinder-csi-operator"]); got != "second build" {
			t.Errorf("the new image holds %q", got)
		}
	})
}
