package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/errkind"
)

// The hashes below were made with `openssl passwd -apr1 -salt <salt>
// <password>`; the first is the one pulsar-client-go's integration tests
// configure (admin / 123456).
func TestAPR1(t *testing.T) {
	for _, c := range []struct{ password, salt, want string }{
		{"123456", "FG4AO6aX", "$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf."},
		{"", "abc", "$apr1$abc$BfqKdn9xFDWJPa3kcp/PH0"},
		{"a-much-longer-password-than-sixteen-bytes", "12345678", "$apr1$12345678$/Az/qRqc4UNrNHoqSr0bJ1"},
	} {
		if got := apr1(c.password, c.salt); got != c.want {
			t.Errorf("apr1(%q, %q) = %s, want %s", c.password, c.salt, got, c.want)
		}
		if !validAPR1(c.want) {
			t.Errorf("validAPR1(%s) = false", c.want)
		}
	}
}

func TestBasicUsersFile(t *testing.T) {
	good := "# users\nadmin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n\nempty:$apr1$abc$BfqKdn9xFDWJPa3kcp/PH0\n"
	u, err := parseBasicUsers("users", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data, role string
		ok         bool
	}{
		{"admin:123456", "admin", true},
		{"empty:", "empty", true},
		{"admin:1234567", "", false},
		{"admin:", "", false},
		{"nobody:123456", "", false},
		{"admin", "", false},
		{"", "", false},
	} {
		role, err := u.check(c.data)
		if c.ok != (err == nil) || role != c.role {
			t.Errorf("check(%q) = %q, %v; want role %q, ok %v", c.data, role, err, c.role, c.ok)
		}
		if err != nil && !errors.Is(err, errkind.ErrAuthentication) {
			t.Errorf("check(%q): %v is not an authentication error", c.data, err)
		}
		if err != nil && strings.Contains(err.Error(), "$apr1$") {
			t.Errorf("check(%q): the error shows a hash: %v", c.data, err)
		}
	}

	// Every bad line is named, at once.
	bad := "admin\nroot:{SHA}fEqNCco3Yq9h5ZUglD3CZJT4lBs=\nbob:$apr1$toolongsalt$KGYPuMoLUou3i6vUkPUUf.\nadmin:$apr1$abc$BfqKdn9xFDWJPa3kcp/PH0\nadmin:$apr1$abc$BfqKdn9xFDWJPa3kcp/PH0\n"
	_, err = parseBasicUsers("users", []byte(bad))
	if err == nil {
		t.Fatal("a bad file was read")
	}
	for _, want := range []string{"users:1: want user:hash", "users:2: user root", "users:3: user bob", "users:5: user admin appears twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := parseBasicUsers("users", []byte("# nobody\n")); err == nil || !strings.Contains(err.Error(), "no users") {
		t.Errorf("an empty file: %v", err)
	}
	if _, err := readBasicUsers(t.TempDir() + "/missing"); err == nil || !strings.Contains(err.Error(), "auth.basicAuthFile") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestBasicAndAnonymous: with a users file a client may authenticate by
// user and password (CONNECT's method "basic", HTTP Basic), and with an
// anonymous role a client that presents nothing is that role; wrong
// credentials are refused either way.
func TestBasicAndAnonymous(t *testing.T) {
	secret := NewSecretKey()
	users := writeFile(t, "users", []byte("admin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n"))
	srv, err := NewServer(Config{
		AuthenticationEnabled: true,
		Token:                 TokenConfig{SecretKey: writeFile(t, "secret.key", secret)},
		BasicAuthFile:         users,
		AnonymousUserRole:     "anonymous",
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Sign(HS256, secret, "app", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, data, role string
		ok                 bool
	}{
		{BasicMethod, "admin:123456", "admin", true},
		{BasicMethod, "admin:wrong", "", false},
		{"", "", "anonymous", true},
		{"none", "", "anonymous", true},
		{TokenMethod, tok, "app", true},
		{TokenMethod, "not-a-token", "", false},
		{"kerberos", "x", "", false},
	} {
		id, err := srv.Authenticate(c.method, []byte(c.data), nil)
		if c.ok != (err == nil) || id.Role != c.role {
			t.Errorf("Authenticate(%q, %q) = %+v, %v; want role %q, ok %v", c.method, c.data, id, err, c.role, c.ok)
		}
	}

	var seen Identity
	h := srv.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = IdentityFrom(r.Context())
	}))
	for _, c := range []struct {
		name   string
		set    func(*http.Request)
		status int
		role   string
	}{
		{"basic", func(r *http.Request) { r.SetBasicAuth("admin", "123456") }, 200, "admin"},
		{"basic, wrong password", func(r *http.Request) { r.SetBasicAuth("admin", "12345") }, 401, ""},
		{"nothing", func(*http.Request) {}, 200, "anonymous"},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }, 200, "app"},
		{"bearer, bad", func(r *http.Request) { r.Header.Set("Authorization", "Bearer x") }, 401, ""},
	} {
		seen = Identity{}
		req := httptest.NewRequest("GET", "/admin/v2/tenants", nil)
		c.set(req)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.status || seen.Role != c.role {
			t.Errorf("%s: status %d (%s), role %q; want %d, %q", c.name, w.Code, strings.TrimSpace(w.Body.String()), seen.Role, c.status, c.role)
		}
	}

	// Without a users file, HTTP Basic is refused with the methods that are
	// taken; without an anonymous role, nothing is refused.
	plain, err := NewServer(Config{AuthenticationEnabled: true, Token: TokenConfig{SecretKey: writeFile(t, "secret2.key", secret)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Authenticate("", nil, nil); !errors.Is(err, errkind.ErrAuthentication) {
		t.Errorf("no credentials without an anonymous role: %v", err)
	}
	if _, err := plain.Authenticate(BasicMethod, []byte("admin:123456"), nil); err == nil || !strings.Contains(err.Error(), "requires token") {
		t.Errorf("basic without a users file: %v", err)
	}
	req := httptest.NewRequest("GET", "/admin/v2/tenants", nil)
	req.SetBasicAuth("admin", "123456")
	w := httptest.NewRecorder()
	plain.HTTP(h).ServeHTTP(w, req)
	if w.Code != 401 || !strings.Contains(w.Body.String(), "does not take a user and password") {
		t.Errorf("HTTP Basic without a users file: %d %s", w.Code, w.Body)
	}
}

func TestBasicAndAnonymousConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{BasicAuthFile: "users"}, "auth.basicAuthFile needs auth.authenticationEnabled"},
		{Config{AnonymousUserRole: "anonymous"}, "auth.anonymousUserRole needs auth.authenticationEnabled"},
		{Config{AuthenticationEnabled: true, BasicAuthFile: "users", AnonymousUserRole: "two words"}, "auth.anonymousUserRole \"two words\""},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	// Basic alone needs no token key.
	if err := (Config{AuthenticationEnabled: true, BasicAuthFile: "users"}).Validate(); err != nil {
		t.Errorf("basic alone: %v", err)
	}
}

// FuzzBasicUsers: any file is read or refused with an error, and any
// credentials are checked or refused, without a panic.
func FuzzBasicUsers(f *testing.F) {
	f.Add([]byte("admin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n"), "admin:123456")
	f.Add([]byte("a:$apr1$$\n#x\n\nb:c"), "b:")
	f.Add([]byte("x:$apr1$12345678$/Az/qRqc4UNrNHoqSr0bJ1"), ":")
	f.Fuzz(func(t *testing.T, file []byte, data string) {
		u, err := parseBasicUsers("f", file)
		if err != nil {
			return
		}
		if role, err := u.check(data); err == nil && u[role] == "" {
			t.Fatalf("check(%q) let in %q, who is not in the file", data, role)
		}
	})
}
