package auth

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/internal/filewatch"
)

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustVerifier(t *testing.T, cfg TokenConfig) *Verifier {
	t.Helper()
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSignVerifyEachAlgorithmAndKeyForm(t *testing.T) {
	secret := NewSecretKey()
	cases := []struct {
		name   string
		alg    string
		sign   []byte
		verify TokenConfig
	}{
		{"HS256 raw file", HS256, secret, TokenConfig{SecretKey: writeFile(t, "secret.key", secret)}},
		{"HS256 file URL", HS256, secret, TokenConfig{SecretKey: "file://" + writeFile(t, "secret.key", secret)}},
		{"HS256 data URL", HS256, secret, TokenConfig{SecretKey: "data:;base64," + base64.StdEncoding.EncodeToString(secret)}},
	}
	for _, alg := range []string{RS256, ES256} {
		priv, pub, err := NewKeyPair(alg)
		if err != nil {
			t.Fatal(err)
		}
		pemPub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
		cases = append(cases,
			struct {
				name   string
				alg    string
				sign   []byte
				verify TokenConfig
			}{alg + " DER", alg, priv, TokenConfig{PublicKey: writeFile(t, "public.key", pub)}},
			struct {
				name   string
				alg    string
				sign   []byte
				verify TokenConfig
			}{alg + " PEM", alg, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}), TokenConfig{PublicKey: writeFile(t, "public.pem", pemPub)}},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exp := time.Now().Add(time.Hour).Truncate(time.Second)
			tok, err := Sign(c.alg, c.sign, "app-1", exp)
			if err != nil {
				t.Fatal(err)
			}
			h, _, err := Unverified(tok)
			if err != nil || h["alg"] != c.alg || h["typ"] != nil {
				t.Fatalf("header %v, %v", h, err)
			}
			got, err := mustVerifier(t, c.verify).Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			if got.Role != "app-1" || !got.Expires.Equal(exp) {
				t.Fatalf("claims %+v", got)
			}
		})
	}
}

func TestVerifyRefusals(t *testing.T) {
	secret := NewSecretKey()
	v := mustVerifier(t, TokenConfig{SecretKey: writeFile(t, "s", secret)})
	good, _ := Sign(HS256, secret, "r", time.Time{})
	expired, _ := Sign(HS256, secret, "r", time.Now().Add(-time.Minute))
	other, _ := Sign(HS256, NewSecretKey(), "r", time.Time{})
	noSub := signClaims(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"name": "x"})
	notYet := signClaims(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "r", "nbf": time.Now().Add(time.Hour).Unix()})
	none := signClaims(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "r"})
	hs384 := signClaims(t, jwt.SigningMethodHS384, secret, jwt.MapClaims{"sub": "r"})

	if c, err := v.Verify(good); err != nil || c.Role != "r" || !c.Expires.IsZero() {
		t.Fatalf("good token: %+v, %v", c, err)
	}
	if _, err := v.Verify(hs384); err != nil {
		t.Fatalf("HS384 with the secret key: %v", err)
	}
	for name, c := range map[string]struct{ tok, want string }{
		"expired":         {expired, "token expired"},
		"other key":       {other, "signature invalid"},
		"no sub":          {noSub, `no "sub" claim`},
		"not valid yet":   {notYet, "not valid yet"},
		"alg none":        {none, "token"},
		"malformed":       {"abc.def", "malformed"},
		"garbage":         {"not a token at all", "malformed"},
		"empty":           {"", "no token"},
		"too long":        {strings.Repeat("a", MaxTokenBytes+1), "more than"},
		"truncated":       {good[:len(good)-5], "signature invalid"},
		"header tampered": {"eyJhbGciOiJub25lIn0" + good[strings.IndexByte(good, '.'):], "token"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.Verify(c.tok)
			if !errors.Is(err, errkind.ErrAuthentication) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrAuthentication saying %q", err, c.want)
			}
			if len(c.tok) > 20 && strings.Contains(err.Error(), c.tok) {
				t.Fatal("the error echoes the token")
			}
		})
	}
}

func signClaims(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A token signed with HS256 using the RSA public key's bytes as the secret
// (the classic algorithm confusion) must not pass a public-key verifier.
func TestPublicKeyVerifierRefusesHMAC(t *testing.T) {
	priv, pub, _ := NewKeyPair(RS256)
	v := mustVerifier(t, TokenConfig{PublicKey: writeFile(t, "pub", pub)})
	forged := signClaims(t, jwt.SigningMethodHS256, pub, jwt.MapClaims{"sub": "admin"})
	if _, err := v.Verify(forged); !errors.Is(err, errkind.ErrAuthentication) {
		t.Fatalf("HS256 token against an RSA key: %v", err)
	}
	// An ES256 token against an RSA key is refused too.
	epriv, _, _ := NewKeyPair(ES256)
	es, _ := Sign(ES256, epriv, "admin", time.Time{})
	if _, err := v.Verify(es); !errors.Is(err, errkind.ErrAuthentication) {
		t.Fatalf("ES256 token against an RSA key: %v", err)
	}
	good, _ := Sign(RS256, priv, "admin", time.Time{})
	if _, err := v.Verify(good); err != nil {
		t.Fatal(err)
	}
}

func TestRoleClaimAndAudience(t *testing.T) {
	secret := NewSecretKey()
	src := "data:;base64," + base64.StdEncoding.EncodeToString(secret)
	v := mustVerifier(t, TokenConfig{SecretKey: src, RoleClaim: "role", Audience: "isobar"})
	ok := signClaims(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"role": "ops", "aud": []string{"x", "isobar"}})
	if c, err := v.Verify(ok); err != nil || c.Role != "ops" {
		t.Fatalf("%+v %v", c, err)
	}
	wrongAud := signClaims(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"role": "ops", "aud": "other"})
	if _, err := v.Verify(wrongAud); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("wrong audience: %v", err)
	}
	subOnly, _ := Sign(HS256, secret, "ops", time.Time{})
	if _, err := v.Verify(subOnly); err == nil {
		t.Fatal("a token without the configured role claim passed")
	}
}

func TestBadKeys(t *testing.T) {
	for name, cfg := range map[string]TokenConfig{
		"none":            {},
		"both":            {SecretKey: "data:;base64,AAAA", PublicKey: "data:;base64,AAAA"},
		"missing file":    {SecretKey: filepath.Join(t.TempDir(), "absent")},
		"empty secret":    {SecretKey: writeFile(t, "empty", nil)},
		"garbage public":  {PublicKey: writeFile(t, "garbage", []byte("not a key"))},
		"bad data URL":    {SecretKey: "data:;base64,!!!"},
		"unset variable":  {SecretKey: "env:ISOBAR_TEST_SURELY_UNSET"},
		"private as pub":  {PublicKey: writeFile(t, "priv", func() []byte { p, _, _ := NewKeyPair(ES256); return p }())},
		"data without ,":  {SecretKey: "data:abc"},
		"file URL absent": {PublicKey: "file:///nonexistent/key"},
	} {
		if _, err := NewVerifier(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Sign("HS999", []byte("k"), "r", time.Time{}); err == nil {
		t.Error("unknown algorithm signed")
	}
	if _, err := Sign(HS256, []byte("k"), "", time.Time{}); err == nil {
		t.Error("a token without a role was signed")
	}
	rsaPriv, _, _ := NewKeyPair(RS256)
	if _, err := Sign(ES256, rsaPriv, "r", time.Time{}); err == nil {
		t.Error("an RSA key signed ES256")
	}
	if _, _, err := NewKeyPair(HS256); err == nil {
		t.Error("a key pair for HS256")
	}
}

// Replacing the key file rotates the key without a restart; a file that
// does not hold a key (half written) keeps the previous key in use.
func TestKeyFileRotation(t *testing.T) {
	k1, k2 := NewSecretKey(), NewSecretKey()
	path := writeFile(t, "secret.key", k1)
	v := mustVerifier(t, TokenConfig{SecretKey: path})
	t1, _ := Sign(HS256, k1, "r", time.Time{})
	t2, _ := Sign(HS256, k2, "r", time.Time{})
	if _, err := v.Verify(t1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil { // half written: empty
		t.Fatal(err)
	}
	// Over two look-at periods (so the change is seen), the old key
	// still verifies every time.
	for start := time.Now(); time.Since(start) < 2*filewatch.Interval; time.Sleep(20 * time.Millisecond) {
		if _, err := v.Verify(t1); err != nil {
			t.Fatalf("an empty key file replaced the key in use: %v", err)
		}
	}
	if err := os.WriteFile(path, k2, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { _, err := v.Verify(t2); return err == nil })
	if _, err := v.Verify(t1); err == nil {
		t.Fatal("the old key still verifies after rotation")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReadKeyEnv(t *testing.T) {
	k := NewSecretKey()
	t.Setenv("ISOBAR_TEST_KEY", base64.StdEncoding.EncodeToString(k))
	b, err := ReadKey("env:ISOBAR_TEST_KEY")
	if err != nil || string(b) != string(k) {
		t.Fatalf("%v", err)
	}
}

// FuzzVerify: no input panics the verifier, and only the tokens it signed
// pass.
func FuzzVerify(f *testing.F) {
	secret := []byte("fuzz-secret-key-0123456789abcdef")
	good, _ := Sign(HS256, secret, "role", time.Time{})
	f.Add(good)
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")
	f.Add("a.b.c")
	f.Add("")
	v, err := NewVerifier(TokenConfig{SecretKey: "data:;base64," + base64.StdEncoding.EncodeToString(secret)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		if err == nil && strings.TrimSpace(tok) != good {
			// Another encoding of a validly signed token would need the key.
			if _, _, err := Unverified(tok); err != nil || c.Role == "" {
				t.Fatalf("%q verified as %+v", tok, c)
			}
		}
		Unverified(tok)
	})
}
