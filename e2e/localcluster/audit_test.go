package localcluster

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// auditLine is one audit log line of the given request and stage.
func auditLine(id, stage, verb, resource string) string {
	return `{"auditID":"` + id + `","stage":"` + stage + `","verb":"` + verb + `","userAgent":"ua",` +
		`"objectRef":{"resource":"` + resource + `","namespace":"ns","name":"n"},` +
		`"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z"}` + "\n"
}

func appendFile(g Gomega, path, s string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteString(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
}

func verbs(events []AuditEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.AuditID+":"+e.Verb)
	}
	return out
}

func TestAuditLog(t *testing.T) {
	t.Run("When a watch is logged as it starts and as it ends, it should be read once, when it starts", func(t *testing.T) {
		g := NewWithT(t)
		path := filepath.Join(t.TempDir(), "audit.log")
		appendFile(g, path, auditLine("1", "ResponseStarted", "watch", "pods")+auditLine("2", "ResponseComplete", "get", "pods"))
		l := OpenAuditLog(path)
		defer func() { _ = l.Close() }()
		events, err := l.Next()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verbs(events)).To(Equal([]string{"1:watch", "2:get"}))
		g.Expect(events[0].ObjectRef.Namespace).To(Equal("ns"))
		g.Expect(events[0].RequestReceivedTimestamp.Nanosecond()).To(Equal(123456000))

		appendFile(g, path, auditLine("1", "ResponseComplete", "watch", "pods")+auditLine("3", "ResponseComplete", "create", "pods"))
		events, err = l.Next()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verbs(events)).To(Equal([]string{"3:create"}))
		g.Expect(events[0].Mutating()).To(BeTrue())
	})

	t.Run("When a line is still being written, it should be read once it is complete", func(t *testing.T) {
		g := NewWithT(t)
		path := filepath.Join(t.TempDir(), "audit.log")
		line := auditLine("1", "ResponseComplete", "get", "pods")
		appendFile(g, path, line[:20])
		l := OpenAuditLog(path)
		defer func() { _ = l.Close() }()
		events, err := l.Next()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(events).To(BeEmpty())
		appendFile(g, path, line[20:])
		events, err = l.Next()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verbs(events)).To(Equal([]string{"1:get"}))
	})

	t.Run("When the log is rotated, the rest of the old file and then the new one should be read", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		path := filepath.Join(dir, "audit.log")
		appendFile(g, path, auditLine("1", "ResponseComplete", "get", "pods"))
		l := OpenAuditLog(path)
		defer func() { _ = l.Close() }()
		events, err := l.Next()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verbs(events)).To(Equal([]string{"1:get"}))

		// As the API server's log rotation does: a last write, a rename, a new file.
		appendFile(g, path, auditLine("2", "ResponseComplete", "update", "leases"))
		g.Expect(os.Rename(path, filepath.Join(dir, "audit-2026-01-02T03-04-05.000.log"))).To(Succeed())
		appendFile(g, path, auditLine("3", "ResponseComplete", "list", "pods"))
		events, err = l.Next()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verbs(events)).To(Equal([]string{"2:update", "3:list"}))
	})

	t.Run("When the cluster has no audit log, reading it should fail", func(t *testing.T) {
		_, err := ReadAuditLog("")
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("start it with Audit")))
	})
}
