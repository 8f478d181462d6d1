// Package secretvolume writes files as the kubelet fills a Secret volume, for the tests of code
// that reads mounted certificates. It imports nothing of the product, so that any package's own
// tests may use it.
package secretvolume

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Write writes files into dir as the kubelet's atomic writer fills a Secret volume: a
// new timestamped directory, a ..data symlink swapped to it by rename, and per file a symlink
// through ..data (made once). The previous timestamped directory is removed. A reader that holds
// on to a file's inode, or checks only its name, sees the change the way it would in a pod.
func Write(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts := fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), time.Now().UnixNano())
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
