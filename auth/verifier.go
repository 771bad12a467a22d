package auth

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/isobar-mq/isobar/wire"
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
	file   string // its file, when it has one

	mu      sync.Mutex
	key     any // []byte, *rsa.PublicKey or *ecdsa.PublicKey
	methods []string
	stamp   fileStamp
	checked time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// keyRecheck is how often a key file is looked at for a change.
const keyRecheck = time.Second

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
	switch {
	case strings.HasPrefix(v.source, "file://"):
		if u, err := url.Parse(v.source); err == nil {
			v.file = u.Path
		}
	case strings.HasPrefix(v.source, "data:"), strings.HasPrefix(v.source, "env:"):
	default:
		v.file = v.source
	}
	if v.cfg.RoleClaim == "" {
		v.cfg.RoleClaim = DefaultRoleClaim
	}
	if err := v.load(); err != nil {
		return nil, err
	}
	return v, nil
}

// load reads and parses the key.
func (v *Verifier) load() error {
	var st fileStamp
	if v.file != "" {
		fi, err := os.Stat(v.file)
		if err != nil {
			return fmt.Errorf("auth: token key: %w", err)
		}
		st = fileStamp{fi.ModTime(), fi.Size()}
	}
	b, err := ReadKey(v.source)
	if err != nil {
		return fmt.Errorf("auth: token key: %w", err)
	}
	var key any
	var methods []string
	if v.cfg.SecretKey != "" {
		if len(b) == 0 {
			return errors.New("auth: token secret key is empty")
		}
		key, methods = b, []string{"HS256", "HS384", "HS512"}
	} else {
		pk, err := ParsePublicKey(b)
		if err != nil {
			return fmt.Errorf("auth: token public key: %w", err)
		}
		switch pk.(type) {
		case *rsa.PublicKey:
			methods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
		case *ecdsa.PublicKey:
			methods = []string{"ES256", "ES384", "ES512"}
		}
		key = pk
	}
	v.mu.Lock()
	v.key, v.methods, v.stamp, v.checked = key, methods, st, time.Now()
	v.mu.Unlock()
	return nil
}

// current returns the key, reading its file again when it has changed.
// A changed file that does not hold a valid key (half written, say)
// leaves the previous key in use until it does.
func (v *Verifier) current() (any, []string) {
	v.mu.Lock()
	key, methods := v.key, v.methods
	due := v.file != "" && time.Since(v.checked) >= keyRecheck
	if due {
		v.checked = time.Now()
	}
	stamp := v.stamp
	v.mu.Unlock()
	if !due {
		return key, methods
	}
	fi, err := os.Stat(v.file)
	if err != nil || (fi.ModTime().Equal(stamp.mod) && fi.Size() == stamp.size) {
		return key, methods
	}
	if v.load() != nil {
		return key, methods
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.key, v.methods
}

// Verify checks a token's signature, expiry (and audience, when
// configured) and returns its claims. Every refusal wraps
// wire.ErrAuthentication and says why, without echoing the token.
func (v *Verifier) Verify(token string) (Claims, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return Claims{}, fmt.Errorf("%w: no token", wire.ErrAuthentication)
	}
	if len(token) > MaxTokenBytes {
		return Claims{}, fmt.Errorf("%w: token of %d bytes, more than %d", wire.ErrAuthentication, len(token), MaxTokenBytes)
	}
	key, methods := v.current()
	opts := []jwt.ParserOption{jwt.WithValidMethods(methods)}
	if v.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.cfg.Audience))
	}
	var mc jwt.MapClaims
	_, err := jwt.ParseWithClaims(token, &mc, func(*jwt.Token) (any, error) { return key, nil }, opts...)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", wire.ErrAuthentication, reasonOf(err))
	}
	role, ok := mc[v.cfg.RoleClaim].(string)
	if !ok || role == "" {
		return Claims{}, fmt.Errorf("%w: the token has no %q claim naming a role", wire.ErrAuthentication, v.cfg.RoleClaim)
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
