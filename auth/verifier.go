package auth

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/internal/filewatch"
)

// TokenConfig says how tokens are checked: by a secret key (HS256) or a
// public key (RS256, ES256), each given as ReadKey takes it. Keys read
// from files are read again when the file changes, so a key is rotated
// by replacing its file.
type TokenConfig struct {
	// SecretKey verifies HS256 tokens (Pulsar's tokenSecretKey).
	SecretKey string `yaml:"secretKey"`
	// PublicKey verifies RS256 or ES256 tokens (Pulsar's tokenPublicKey).
	PublicKey string `yaml:"publicKey"`
	// RoleClaim is the claim holding the role; empty means "sub"
	// (Pulsar's tokenAuthClaim).
	RoleClaim string `yaml:"roleClaim"`
	// Audience, when set, must be among the token's "aud" values
	// (Pulsar's tokenAudience).
	Audience string `yaml:"audience"`
}

// Validate checks that exactly one key is given.
func (c TokenConfig) Validate() error {
	switch {
	case c.SecretKey == "" && c.PublicKey == "":
		return errors.New("one of secretKey and publicKey is required")
	case c.SecretKey != "" && c.PublicKey != "":
		return errors.New("secretKey and publicKey are exclusive: tokens are checked with one key")
	}
	return nil
}

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	cfg    TokenConfig
	source string // the key's source
	key    *filewatch.Value[verifyKey]
}

// verifyKey is a loaded key and the signing methods it checks.
type verifyKey struct {
	key     any // []byte, *rsa.PublicKey or *ecdsa.PublicKey
	methods []string
}

// NewVerifier loads the key; a missing or unreadable key is an error now,
// not at the first token.
func NewVerifier(cfg TokenConfig) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	v := &Verifier{cfg: cfg, source: cfg.SecretKey}
	if v.source == "" {
		v.source = cfg.PublicKey
	}
	var files []string // the key's file, when it has one
	switch {
	case strings.HasPrefix(v.source, "file://"):
		if u, err := url.Parse(v.source); err == nil {
			files = []string{u.Path}
		}
	case strings.HasPrefix(v.source, "data:"), strings.HasPrefix(v.source, "env:"):
	default:
		files = []string{v.source}
	}
	if v.cfg.RoleClaim == "" {
		v.cfg.RoleClaim = DefaultRoleClaim
	}
	var err error
	if v.key, err = filewatch.New(files, v.load); err != nil {
		return nil, err
	}
	return v, nil
}

// load reads and parses the key. Its file is read again when it changes
// (package filewatch); one that does not hold a valid key (half written,
// say) leaves the previous key in use until it does.
func (v *Verifier) load() (verifyKey, error) {
	b, err := ReadKey(v.source)
	if err != nil {
		return verifyKey{}, fmt.Errorf("auth: token key: %w", err)
	}
	if v.cfg.SecretKey != "" {
		if len(b) == 0 {
			return verifyKey{}, errors.New("auth: token secret key is empty")
		}
		return verifyKey{b, []string{"HS256", "HS384", "HS512"}}, nil
	}
	pk, err := ParsePublicKey(b)
	if err != nil {
		return verifyKey{}, fmt.Errorf("auth: token public key: %w", err)
	}
	switch pk.(type) {
	case *rsa.PublicKey:
		return verifyKey{pk, []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}}, nil
	default: // *ecdsa.PublicKey (ParsePublicKey returns no other)
		return verifyKey{pk, []string{"ES256", "ES384", "ES512"}}, nil
	}
}

// Verify checks a token's signature, expiry (and audience, when
// configured) and returns its claims. Every refusal wraps
// errkind.ErrAuthentication and says why, without echoing the token.
func (v *Verifier) Verify(token string) (Claims, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return Claims{}, fmt.Errorf("%w: no token", errkind.ErrAuthentication)
	}
	if len(token) > MaxTokenBytes {
		return Claims{}, fmt.Errorf("%w: token of %d bytes, more than %d", errkind.ErrAuthentication, len(token), MaxTokenBytes)
	}
	k := v.key.Get()
	key := k.key
	opts := []jwt.ParserOption{jwt.WithValidMethods(k.methods)}
	if v.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.cfg.Audience))
	}
	var mc jwt.MapClaims
	_, err := jwt.ParseWithClaims(token, &mc, func(*jwt.Token) (any, error) { return key, nil }, opts...)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", errkind.ErrAuthentication, reasonOf(err))
	}
	role, ok := mc[v.cfg.RoleClaim].(string)
	if !ok || role == "" {
		return Claims{}, fmt.Errorf("%w: the token has no %q claim naming a role", errkind.ErrAuthentication, v.cfg.RoleClaim)
	}
	c := Claims{Role: role}
	if exp, err := mc.GetExpirationTime(); err == nil && exp != nil {
		c.Expires = exp.Time
	}
	return c, nil
}

// reasonOf words a parse failure for the peer.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "token signature invalid"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "token signed with an algorithm this server does not accept"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "token not meant for this audience"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	}
	return "invalid token: " + err.Error()
}
