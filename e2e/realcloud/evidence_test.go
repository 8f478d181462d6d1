package realcloud

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestLinesAbout(t *testing.T) {
	g := NewWithT(t)
	const server, request = "5b6d1bf8-975c-4df0-9a10-c7a945b147ee", "req-d1edccf7-d98e-4b6f-9c3b-cfc41b2e2ff1"
	log := strings.Join([]string{
		"2026-11-29 07:58:35.573 26852 INFO nova.service [-] Starting compute node (version 26.2.2)",
		"2026-11-29 07:58:40.100 26852 INFO nova.compute.manager [req-1 - -] [instance: " + server + "] Starting instance...",
		"2026-11-29 07:58:41.200 31000 ERROR cinder.api.v3.attachments [" + request + " - -] Unable to update the attachment.: oslo_db.exception.DBError",
		"2026-11-29 07:58:41.200 31000 ERROR cinder.api.v3.attachments Traceback (most recent call last):",
		"2026-11-29 07:58:41.200 31000 ERROR cinder.api.v3.attachments sqlite3.OperationalError: database is locked",
		"2026-11-29 07:58:41.300 31000 INFO cinder.api.openstack.wsgi [" + request + " - -] HTTP exception thrown: Unable to update the attachment.",
		"2026-11-29 07:58:41.400 31000 ERROR cinder.api.v3.attachments an unrelated error of the same process",
		"2026-11-29 07:58:42.000 26852 ERROR nova.compute.manager [instance: " + server + "] Build of instance " + server + " aborted",
		"2026-11-29 07:58:42.000 26852 ERROR nova.compute.manager Traceback (most recent call last):",
		"2026-11-29 07:58:42.100 26853 ERROR nova.compute.manager another process's error",
	}, "\n")
	path := filepath.Join(t.TempDir(), "service.log")
	g.Expect(os.WriteFile(path, []byte(log), 0o644)).To(Succeed())

	lines := linesAbout(path, []string{server, request})
	g.Expect(lines).To(Equal([]string{
		"2026-11-29 07:58:40.100 26852 INFO nova.compute.manager [req-1 - -] [instance: " + server + "] Starting instance...",
		"2026-11-29 07:58:41.200 31000 ERROR cinder.api.v3.attachments [" + request + " - -] Unable to update the attachment.: oslo_db.exception.DBError",
		"2026-11-29 07:58:41.200 31000 ERROR cinder.api.v3.attachments Traceback (most recent call last):",
		"2026-11-29 07:58:41.200 31000 ERROR cinder.api.v3.attachments sqlite3.OperationalError: database is locked",
		"2026-11-29 07:58:41.300 31000 INFO cinder.api.openstack.wsgi [" + request + " - -] HTTP exception thrown: Unable to update the attachment.",
		"2026-11-29 07:58:42.000 26852 ERROR nova.compute.manager [instance: " + server + "] Build of instance " + server + " aborted",
		"2026-11-29 07:58:42.000 26852 ERROR nova.compute.manager Traceback (most recent call last):",
	}), "the lines naming the IDs, each ERROR one with its traceback, and nothing else")

	g.Expect(linesAbout(path, []string{"req-00000000-0000-0000-0000-000000000000"})).To(BeEmpty())
	g.Expect(linesAbout(filepath.Join(t.TempDir(), "missing.log"), []string{server})).To(BeEmpty())
	g.Expect(requestIDPattern.FindAllString("aborted: Unable to update the attachment. (HTTP 500) (Request-ID: "+request+")", -1)).To(Equal([]string{request}))
}
