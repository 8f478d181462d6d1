package fakeopenstack

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Authentication methods as Keystone names them in auth.identity.methods; they appear in
// Request.AuthMethod.
const (
	// AuthMethodPassword is a user name or ID with a password.
	AuthMethodPassword = "password"
	// AuthMethodApplicationCredential is an application credential ID, or name plus user, with its
	// secret.
	AuthMethodApplicationCredential = "application_credential"
	// AuthMethodToken is an existing token exchanged for a new one.
	AuthMethodToken = "token"
)

// keystoneTime is the layout Keystone uses for expires_at and issued_at; gophercloud parses it as
// RFC 3339.
const keystoneTime = "2006-01-02T15:04:05.000000Z"

// tokenInfo is what the fake remembers about an issued token.
type tokenInfo struct {
	expires time.Time
	body    map[string]any
}

// authRequest is the subset of a v3 token request gophercloud sends (openstack.md section 4.1).
type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password *struct {
				User userRef `json:"user"`
			} `json:"password"`
			ApplicationCredential *struct {
				ID     string   `json:"id"`
				Name   string   `json:"name"`
				Secret string   `json:"secret"`
				User   *userRef `json:"user"`
			} `json:"application_credential"`
			Token *struct {
				ID string `json:"id"`
			} `json:"token"`
		} `json:"identity"`
		Scope *scopeRef `json:"scope"`
	} `json:"auth"`
}

type userRef struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	Password string     `json:"password"`
	Domain   *domainRef `json:"domain"`
}

type domainRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type scopeRef struct {
	Project *struct {
		ID     string     `json:"id"`
		Name   string     `json:"name"`
		Domain *domainRef `json:"domain"`
	} `json:"project"`
	Domain *domainRef `json:"domain"`
}

// serveIdentity answers version discovery and token requests, and returns the authentication
// method of a token request for the request log.
func (s *Server) serveIdentity(w *statusWriter, r *http.Request) string {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodGet && (path == "" || path == "/identity"):
		// Keystone answers its versionless root with 300 Multiple Choices; gophercloud accepts 200 or
		// 300 and takes the v3 "self" link as the endpoint.
		writeJSON(w, http.StatusMultipleChoices, map[string]any{
			"versions": map[string]any{"values": []any{s.v3Version(s.requestBase(r))}},
		})
	case r.Method == http.MethodGet && path == "/identity/v3":
		writeJSON(w, http.StatusOK, map[string]any{"version": s.v3Version(s.requestBase(r))})
	case r.Method == http.MethodPost && path == "/identity/v3/auth/tokens":
		return s.issueToken(w, r)
	case r.Method == http.MethodGet && path == "/identity/v3/auth/tokens":
		// Token validation, which gophercloud uses when clouds.yaml carries a bare token.
		if !s.validToken(r.Header.Get("X-Auth-Token")) {
			writeUnauthorized(w)
			return ""
		}
		s.mu.Lock()
		info, ok := s.tokens[r.Header.Get("X-Subject-Token")]
		s.mu.Unlock()
		if !ok || time.Now().After(info.expires) {
			writeJSON(w, http.StatusNotFound, keystoneError(http.StatusNotFound, "Not Found", "Could not find token."))
			return ""
		}
		w.Header().Set("X-Subject-Token", r.Header.Get("X-Subject-Token"))
		writeJSON(w, http.StatusOK, map[string]any{"token": info.body})
	default:
		writeNotFound(w)
	}
	return ""
}

// v3Version is the identity v3 version document; its self link is the base the client used.
func (s *Server) v3Version(base string) map[string]any {
	return map[string]any{
		"id":      "v3.14",
		"status":  "stable",
		"updated": "2020-04-07T00:00:00Z",
		"links":   []any{map[string]any{"rel": "self", "href": base + "/identity/v3/"}},
		"media-types": []any{map[string]any{
			"base": "application/json", "type": "application/vnd.openstack.identity-v3+json",
		}},
	}
}

// issueToken checks the credentials and answers 201 with X-Subject-Token (a 200 would make
// gophercloud fail: it only accepts 201 and 202 here).
func (s *Server) issueToken(w *statusWriter, r *http.Request) string {
	var req authRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeBadRequest(w, "Malformed request body.")
		return ""
	}
	id := req.Auth.Identity
	if len(id.Methods) == 0 {
		writeBadRequest(w, "No authentication method.")
		return ""
	}
	method := id.Methods[0]

	var user *User
	scoped := req.Auth.Scope != nil
	switch {
	case method == AuthMethodPassword && id.Password != nil:
		user = s.checkPassword(id.Password.User)
	case method == AuthMethodApplicationCredential && id.ApplicationCredential != nil:
		ac := id.ApplicationCredential
		user = s.checkAppCredential(ac.ID, ac.Name, ac.Secret, ac.User)
		// An application credential is always bound to its project; clients send no scope
		// (gophercloud since v2.14.0, GH-3917).
		scoped = true
	case method == AuthMethodToken && id.Token != nil:
		if s.validToken(id.Token.ID) {
			user = &s.opts.Users[0]
		}
	}
	if user == nil || !s.scopeAllowed(req.Auth.Scope) {
		writeUnauthorized(w)
		return method
	}

	token, body := s.newToken(method, user, scoped, s.requestBase(r))
	w.Header().Set("X-Subject-Token", token)
	writeJSON(w, http.StatusCreated, map[string]any{"token": body})
	return method
}

// checkPassword returns the matching user, or nil. Users by name must name their domain, as in
// Keystone, where user names are unique per domain only.
func (s *Server) checkPassword(ref userRef) *User {
	for i := range s.opts.Users {
		u := &s.opts.Users[i]
		byID := ref.ID != "" && ref.ID == u.ID
		byName := ref.Name != "" && ref.Name == u.Name && domainMatches(ref.Domain, u)
		if (byID || byName) && secretEqual(ref.Password, u.Password) {
			return u
		}
	}
	return nil
}

// checkAppCredential returns the owning user, or nil. A credential named (not by ID) must also
// name its owner, since credential names are unique per user only.
func (s *Server) checkAppCredential(id, name, secret string, owner *userRef) *User {
	for _, ac := range s.opts.AppCredentials {
		u := s.userNamed(ac.UserName)
		byID := id != "" && id == ac.ID
		byName := id == "" && name != "" && name == ac.Name && owner != nil &&
			((owner.ID != "" && owner.ID == u.ID) || (owner.Name != "" && owner.Name == u.Name))
		if (byID || byName) && secretEqual(secret, ac.Secret) {
			return u
		}
	}
	return nil
}

// userNamed returns the configured user with that name, or a synthetic one in domain Default so
// that an application credential may belong to a user who has no password here.
func (s *Server) userNamed(name string) *User {
	for i := range s.opts.Users {
		if s.opts.Users[i].Name == name {
			return &s.opts.Users[i]
		}
	}
	return &User{Name: name, ID: "u-" + name, DomainName: "Default", DomainID: "default"}
}

func domainMatches(ref *domainRef, u *User) bool {
	if ref == nil {
		return false
	}
	return (ref.ID != "" && ref.ID == u.DomainID) || (ref.Name != "" && ref.Name == u.DomainName)
}

// scopeAllowed rejects a project scope for any project but the fake's one; Keystone answers 401
// for a project the user has no role on.
func (s *Server) scopeAllowed(scope *scopeRef) bool {
	if scope == nil || scope.Project == nil {
		return true
	}
	p := scope.Project
	return (p.ID != "" && p.ID == s.opts.ProjectID) || (p.ID == "" && p.Name == s.opts.ProjectName)
}

func secretEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// newToken mints and remembers a token. An unscoped token has no catalog, as in Keystone, so a
// clouds.yaml without project gets an endpoint-not-found error later, not a silent success. The
// catalog's URLs start with base, the address the client used to reach Keystone.
func (s *Server) newToken(method string, user *User, scoped bool, base string) (string, map[string]any) {
	var raw [24]byte
	_, _ = rand.Read(raw[:])
	token := "fake-" + hex.EncodeToString(raw[:])

	now := time.Now().UTC()
	expires := now.Add(s.opts.TokenTTL)
	body := map[string]any{
		"methods":    []string{method},
		"issued_at":  now.Format(keystoneTime),
		"expires_at": expires.Format(keystoneTime),
		"user": map[string]any{
			"id": user.ID, "name": user.Name,
			"domain": map[string]any{"id": user.DomainID, "name": user.DomainName},
		},
	}
	if scoped {
		body["project"] = map[string]any{
			"id": s.opts.ProjectID, "name": s.opts.ProjectName,
			"domain": map[string]any{"id": "default", "name": "Default"},
		}
		body["roles"] = []any{map[string]any{"id": "r-member", "name": "member"}}
		body["catalog"] = s.catalog(base)
	}

	s.mu.Lock()
	s.tokens[token] = tokenInfo{expires: expires, body: body}
	s.mu.Unlock()
	return token, body
}

// catalog lists compute as type "compute" and block storage as "volumev3" (the only type every
// gophercloud v2 release finds), both with a version in the URL so gophercloud does no version
// discovery. Every interface is listed so clouds.yaml "interface: internal" works too. URLs start
// with base, so a client that reached Keystone through a listener inside a network namespace
// gets Nova and Cinder URLs on that same listener.
func (s *Server) catalog(base string) []any {
	entry := func(id, typ, name, url string) map[string]any {
		var endpoints []any
		for _, iface := range []string{"public", "internal", "admin"} {
			endpoints = append(endpoints, map[string]any{
				"id": id + "-" + iface, "interface": iface, "url": url,
				"region": s.opts.Region, "region_id": s.opts.Region,
			})
		}
		return map[string]any{"id": id, "type": typ, "name": name, "endpoints": endpoints}
	}
	return []any{
		entry("c-compute", "compute", "nova", base+"/compute/v2.1"),
		entry("c-volumev3", "volumev3", "cinderv3", base+"/volume/v3/"+s.opts.ProjectID),
		entry("c-identity", "identity", "keystone", base+"/identity"),
	}
}

// validToken reports whether token was issued and has neither expired nor been revoked by
// ExpireTokens.
func (s *Server) validToken(token string) bool {
	if token == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.tokens[token]
	return ok && time.Now().Before(info.expires)
}

func keystoneError(code int, title, message string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "title": title, "message": message}}
}

func writeUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Keystone uri="/identity"`)
	writeJSON(w, http.StatusUnauthorized, keystoneError(http.StatusUnauthorized, "Unauthorized",
		"The request you have made requires authentication."))
}

func writeBadRequest(w http.ResponseWriter, message string) {
	writeJSON(w, http.StatusBadRequest, keystoneError(http.StatusBadRequest, "Bad Request", message))
}

func writeNotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{
		"itemNotFound": map[string]any{"code": 404, "message": "The resource could not be found."},
	})
}

// writeJSON always sets Content-Type: gophercloud's pager treats a body without
// application/json as raw bytes and extraction then fails.
func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
