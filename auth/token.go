// Package auth is Isobar's authentication: JSON Web Tokens compatible with
// Pulsar's token authentication (the role is the "sub" claim, "exp" is
// honoured, keys in Pulsar's file formats), the keys that sign and verify
// them, and the checks a server runs on a credential. Refusals wrap
// errkind.ErrAuthentication, so every server answers them the same way
// (AuthenticationError on the binary protocol, 401 over HTTP).
package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/isobar-mq/isobar/errkind"
)

// Algorithms that sign tokens: HS256 with a secret key, RS256 and ES256
// with a key pair (Pulsar's defaults and its --sign-algorithm choices).
const (
	HS256 = "HS256"
	RS256 = "RS256"
	ES256 = "ES256"
)

// MaxTokenBytes bounds a token; anything longer is refused unparsed.
const MaxTokenBytes = 16 << 10

// DefaultRoleClaim is the claim that names the role (Pulsar's
// tokenAuthClaim default).
const DefaultRoleClaim = "sub"

// NewSecretKey makes a random 256-bit key for HS256 (Pulsar's
// create-secret-key: the raw bytes).
func NewSecretKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// NewKeyPair makes a key pair for RS256 (2048-bit RSA) or ES256 (P-256)
// and returns the private key in PKCS #8 DER and the public key in X.509
// SubjectPublicKeyInfo DER: the binary files Pulsar's create-key-pair
// writes.
func NewKeyPair(alg string) (private, public []byte, err error) {
	var key crypto.Signer
	switch alg {
	case RS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case ES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, nil, fmt.Errorf("auth: key pair algorithm %q: want RS256 or ES256", alg)
	}
	if err != nil {
		return nil, nil, err
	}
	if private, err = x509.MarshalPKCS8PrivateKey(key); err != nil {
		return nil, nil, err
	}
	if public, err = x509.MarshalPKIXPublicKey(key.Public()); err != nil {
		return nil, nil, err
	}
	return private, public, nil
}

// ReadKey reads key material given the way Pulsar's settings give it:
// "file:///path", "data:;base64,<base64>", "env:NAME" (the variable holds
// the key, base64 or PEM), or a plain file path.
func ReadKey(source string) ([]byte, error) {
	switch {
	case strings.HasPrefix(source, "data:"):
		i := strings.IndexByte(source, ',')
		if i < 0 {
			return nil, fmt.Errorf("auth: key %q: a data: URL needs a comma before its data", redact(source))
		}
		meta, data := source[5:i], source[i+1:]
		if strings.HasSuffix(meta, ";base64") {
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, fmt.Errorf("auth: key data: URL: %w", err)
			}
			return b, nil
		}
		s, err := url.PathUnescape(data)
		if err != nil {
			return nil, fmt.Errorf("auth: key data: URL: %w", err)
		}
		return []byte(s), nil
	case strings.HasPrefix(source, "env:"):
		v, ok := os.LookupEnv(source[4:])
		if !ok || v == "" {
			return nil, fmt.Errorf("auth: key %s: the environment variable is not set", source)
		}
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v)); err == nil && !strings.Contains(v, "-----BEGIN") {
			return b, nil
		}
		return []byte(v), nil
	case strings.HasPrefix(source, "file://"):
		u, err := url.Parse(source)
		if err != nil {
			return nil, fmt.Errorf("auth: key %q: %w", source, err)
		}
		return os.ReadFile(u.Path)
	case source == "":
		return nil, errors.New("auth: no key given")
	default:
		return os.ReadFile(source)
	}
}

// redact keeps key material out of error messages.
func redact(s string) string {
	if len(s) > 12 {
		return s[:12] + "..."
	}
	return s
}

// ParsePrivateKey reads an RSA or ECDSA private key: PKCS #8 DER (Pulsar's
// format), or PEM holding PKCS #8, PKCS #1 or SEC 1.
func ParsePrivateKey(b []byte) (crypto.Signer, error) {
	der := b
	if p, _ := pem.Decode(b); p != nil {
		der = p.Bytes
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			switch s.(type) {
			case *rsa.PrivateKey, *ecdsa.PrivateKey:
				return s, nil
			}
		}
		return nil, fmt.Errorf("auth: private key of type %T: want RSA or ECDSA", k)
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("auth: not an RSA or ECDSA private key (PKCS #8 DER, or PEM)")
}

// ParsePublicKey reads an RSA or ECDSA public key: X.509
// SubjectPublicKeyInfo DER (Pulsar's format) or PEM.
func ParsePublicKey(b []byte) (crypto.PublicKey, error) {
	der := b
	if p, _ := pem.Decode(b); p != nil {
		der = p.Bytes
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		if r, err1 := x509.ParsePKCS1PublicKey(der); err1 == nil {
			return r, nil
		}
		return nil, fmt.Errorf("auth: not a public key (X.509 DER or PEM): %w", err)
	}
	switch k.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("auth: public key of type %T: want RSA or ECDSA", k)
}

// Claims are what a token says: the role, and when it expires (zero: never).
type Claims struct {
	Role    string
	Expires time.Time
}

// Sign makes a token for role, signed with key: a secret key's bytes for
// HS256, or a private key (ParsePrivateKey's input) for RS256 and ES256.
// A zero expiry makes a token that does not expire. Like Pulsar's tokens,
// it carries the role in "sub" and, when it expires, "exp".
func Sign(alg string, key []byte, role string, expires time.Time) (string, error) {
	if role == "" {
		return "", errors.New("auth: a token needs a subject (the role)")
	}
	claims := jwt.MapClaims{DefaultRoleClaim: role}
	if !expires.IsZero() {
		claims["exp"] = expires.Unix()
	}
	var method jwt.SigningMethod
	var signKey any
	switch alg {
	case HS256:
		if len(key) == 0 {
			return "", errors.New("auth: empty secret key")
		}
		method, signKey = jwt.SigningMethodHS256, key
	case RS256, ES256:
		k, err := ParsePrivateKey(key)
		if err != nil {
			return "", err
		}
		switch k.(type) {
		case *rsa.PrivateKey:
			if alg != RS256 {
				return "", fmt.Errorf("auth: an RSA key signs RS256, not %s", alg)
			}
			method = jwt.SigningMethodRS256
		case *ecdsa.PrivateKey:
			if alg != ES256 {
				return "", fmt.Errorf("auth: an ECDSA key signs ES256, not %s", alg)
			}
			method = jwt.SigningMethodES256
		}
		signKey = k
	default:
		return "", fmt.Errorf("auth: algorithm %q: want HS256, RS256 or ES256", alg)
	}
	t := jwt.NewWithClaims(method, claims)
	// Pulsar's tokens carry no "typ" header; neither do these.
	delete(t.Header, "typ")
	return t.SignedString(signKey)
}

// Unverified decodes a token's header and claims without checking its
// signature: for showing a token (isobar tokens show), never for deciding.
func Unverified(token string) (header, claims map[string]any, err error) {
	if len(token) > MaxTokenBytes {
		return nil, nil, fmt.Errorf("%w: token of %d bytes, more than %d", errkind.ErrAuthentication, len(token), MaxTokenBytes)
	}
	var mc jwt.MapClaims
	t, _, err := jwt.NewParser().ParseUnverified(strings.TrimSpace(token), &mc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: malformed token: %w", errkind.ErrAuthentication, err)
	}
	return t.Header, mc, nil
}
