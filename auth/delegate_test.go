package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestHTTPOriginalPrincipal: a proxy role's request acts for the role in
// X-Original-Principal; another role may not name one, a proxy must,
// and the named role may not be a proxy (403 with the reason).
func TestHTTPOriginalPrincipal(t *testing.T) {
	secret := NewSecretKey()
	srv, err := NewServer(Config{
		AuthenticationEnabled: true,
		Token:                 TokenConfig{SecretKey: writeFile(t, "secret.key", secret)},
		ProxyRoles:            []string{"proxy", "proxy2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen Identity
	h := srv.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = IdentityFrom(r.Context())
	}))
	tok := func(role string) string {
		s, err := Sign(HS256, secret, role, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name, role, original string
		status               int
		want                 Identity
	}{
		{"client", "app", "", 200, Identity{Role: "app"}},
		{"proxy for a client", "proxy", "app", 200, Identity{Role: "app", Proxy: "proxy"}},
		{"client naming another", "app", "root", 403, Identity{}},
		{"proxy naming nobody", "proxy", "", 403, Identity{}},
		{"proxy for a proxy", "proxy", "proxy2", 403, Identity{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen = Identity{}
			req := httptest.NewRequest("GET", "/admin/v2/tenants", nil)
			req.Header.Set("Authorization", "Bearer "+tok(c.role))
			if c.original != "" {
				req.Header.Set(OriginalPrincipalHeader, c.original)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != c.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, c.status)
			}
			seen.Expires = time.Time{}
			if seen != c.want {
				t.Fatalf("identity %+v, want %+v", seen, c.want)
			}
		})
	}
	// With authentication off the header changes nothing.
	off, _ := NewServer(Config{})
	if id, err := off.Delegate(Identity{}, "root", "", ""); err != nil || id.Role != "" {
		t.Fatalf("authentication off: %+v, %v", id, err)
	}
}
