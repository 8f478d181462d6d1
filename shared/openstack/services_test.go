package openstack

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"
	. "github.com/onsi/gomega"
)

// fakeCinder serves a token with a catalog and Cinder's os-services, answering the services list
// with status (and body, when 200).
func fakeCinder(t *testing.T, status int, body string) (*httptest.Server, *[]string) {
	t.Helper()
	var queries []string
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/identity/v3/auth/tokens":
			w.Header().Set("X-Subject-Token", "tok")
			w.WriteHeader(http.StatusCreated)
			endpoint := func(typ, path string) map[string]any {
				return map[string]any{"type": typ, "endpoints": []map[string]any{{"interface": "public", "region": "RegionOne", "url": srv.URL + path}}}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{
				"expires_at": "2099-01-01T00:00:00.000000Z",
				"catalog":    []any{endpoint("compute", "/compute/v2.1"), endpoint("volumev3", "/volume/v3/p1")},
			}})
		case r.Method == http.MethodGet && r.URL.Path == "/volume/v3/p1/os-services":
			queries = append(queries, r.URL.RawQuery)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"itemNotFound":{"code":404,"message":"no"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &queries
}

func newTestClient(t *testing.T, srv *httptest.Server) *Client {
	t.Helper()
	yaml := "clouds:\n  openstack:\n    auth:\n      auth_url: " + srv.URL + "/identity/v3\n      username: demo\n      password: secret\n" +
		"      project_id: p1\n      user_domain_name: Default\n    region_name: RegionOne\n"
	c, err := NewClient(t.Context(), Config{CloudsYAML: []byte(yaml), CloudName: "openstack"})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestBackupServices(t *testing.T) {
	t.Parallel()

	t.Run("When Cinder lists its services, it should ask for cinder-backup and keep the backup services, usable when up and enabled", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		srv, queries := fakeCinder(t, http.StatusOK, `{"services":[
			{"binary":"cinder-backup","host":"b1","zone":"az2","state":"up","status":"enabled","updated_at":"2026-01-02T03:04:05.000000"},
			{"binary":"cinder-backup","host":"b2","zone":"az1","state":"down","status":"enabled","updated_at":"2026-01-02T03:04:05.000000"},
			{"binary":"cinder-backup","host":"b3","zone":"az1","state":"up","status":"disabled","updated_at":null},
			{"binary":"cinder-volume","host":"v1","zone":"az3","state":"up","status":"enabled","updated_at":"2026-01-02T03:04:05.000000"}]}`)
		got, err := newTestClient(t, srv).BackupServices(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(*queries).To(Equal([]string{"binary=cinder-backup"}))
		g.Expect(got).To(Equal([]BackupService{{Zone: "az1"}, {Zone: "az1"}, {Zone: "az2", Usable: true}}))
	})

	t.Run("When Cinder's policy refuses the listing, it should fail with PermissionDenied", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		srv, _ := fakeCinder(t, http.StatusForbidden, `{"forbidden":{"code":403,"message":"Policy doesn't allow volume_extension:services:index to be performed."}}`)
		_, err := newTestClient(t, srv).BackupServices(t.Context())
		g.Expect(Classify(err)).To(Equal(ReasonPermissionDenied))
		g.Expect(err.Error()).NotTo(ContainSubstring("secret"))
	})

	t.Run("When no backup service exists, it should return none", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		srv, _ := fakeCinder(t, http.StatusOK, `{"services":[]}`)
		got, err := newTestClient(t, srv).BackupServices(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeEmpty())
	})
}

func TestBackupServicesOrder(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	got := backupServices([]services.Service{
		{Binary: "cinder-backup", Zone: "b", State: "down", Status: "enabled"},
		{Binary: "cinder-backup", Zone: "a", State: "UP", Status: "Enabled"},
		{Binary: "cinder-backup", Zone: "b", State: "up", Status: "enabled"},
	})
	g.Expect(got).To(Equal([]BackupService{{Zone: "a", Usable: true}, {Zone: "b", Usable: true}, {Zone: "b"}}))
}
