package realcloud

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
)

// counterScript runs read-then-write writer transactions through oslo.db's enginefacade, as
// Cinder's and Nova's database APIs do: each reads a counter, then writes it plus one. It prints
// how many failed and, last, the counter.
const counterScript = `
import sys
import sqlalchemy
from oslo_db.sqlalchemy import enginefacade

url, n = sys.argv[1], int(sys.argv[2])
facade = enginefacade.transaction_context()
facade.configure(connection=url, sqlite_synchronous=False)

@enginefacade.transaction_context_provider
class Context:
    pass

@facade.writer
def create(ctx):
    ctx.session.execute(sqlalchemy.text("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER)"))
    ctx.session.execute(sqlalchemy.text("INSERT OR IGNORE INTO counter VALUES (1, 0)"))

@facade.writer
def bump(ctx):
    n = ctx.session.execute(sqlalchemy.text("SELECT n FROM counter WHERE id = 1")).scalar()
    ctx.session.execute(sqlalchemy.text("UPDATE counter SET n = :n WHERE id = 1"), {"n": n + 1})

@facade.reader
def read(ctx):
    return ctx.session.execute(sqlalchemy.text("SELECT n FROM counter WHERE id = 1")).scalar()

if n == 0:
    create(Context())
failed = 0
for _ in range(n):
    try:
        bump(Context())
    except Exception as e:
        failed += 1
        print("failed:", str(e).splitlines()[0], file=sys.stderr)
print(failed, read(Context()))
`

// requireOsloDB skips a test where Debian's oslo.db is not installed (make test installs it
// where real nodes can run), loudly, and fails it under CI=true.
func requireOsloDB(t *testing.T) {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import oslo_db.sqlalchemy.enginefacade").Run(); err != nil {
		if localcluster.InCI() {
			t.Fatalf("%s cannot import oslo.db (%v): the OpenStack packages are missing", debianPython, err)
		}
		t.Skipf("*** SKIPPED: %s cannot import oslo.db (%v); e2e/hack/openstack-packages.sh installs it (with CI=true this is a failure) ***", debianPython, err)
	}
}

func TestSitecustomize(t *testing.T) {
	requireOsloDB(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "counter.py")
	if err := os.WriteFile(script, []byte(counterScript), 0o644); err != nil {
		t.Fatal(err)
	}
	python := func(args ...string) (string, error) {
		cmd := exec.Command(debianPython, args...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
		out, err := cmd.Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return strings.TrimSpace(string(out)), err
	}

	t.Run("When Python starts with the shim on its path, it should load it and import nothing else of its own, so that a service can still monkey-patch threading first", func(t *testing.T) {
		g := NewWithT(t)
		out, err := python("-c", "import sys; print(*(m in sys.modules for m in ('sitecustomize', 'threading', 'oslo_db', 'sqlalchemy')))")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("True False False False"))
	})

	t.Run("When three processes run read-then-write writer transactions on one SQLite database in WAL mode, none should fail and none be lost", func(t *testing.T) {
		g := NewWithT(t)
		db := filepath.Join(dir, "counter.sqlite")
		g.Expect(exec.Command("sqlite3", db, "PRAGMA journal_mode=WAL;").Run()).To(Succeed())
		url := "sqlite:///" + db + "?timeout=60"
		out, err := python(script, url, "0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("0 0"))

		const procs, each = 3, 40
		var wg sync.WaitGroup
		outs := make([]string, procs)
		errs := make([]error, procs)
		for i := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = python(script, url, fmt.Sprint(each))
			}()
		}
		wg.Wait()
		for i := range procs {
			g.Expect(errs[i]).NotTo(HaveOccurred())
			g.Expect(strings.Fields(outs[i])[0]).To(Equal("0"), "failed transactions of process %d", i)
		}
		out, err = python("-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT n FROM counter').fetchone()[0])", db)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(fmt.Sprint(procs*each)), "the counter after every transaction")
	})
}
