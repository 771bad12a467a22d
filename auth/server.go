package auth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/errkind"
)

// Config is a server's authentication and authorization settings
// (Pulsar's names where it has them).
type Config struct {
	// AuthenticationEnabled makes every connection and admin request
	// authenticate (Pulsar's authenticationEnabled): a valid token, or a
	// client certificate, a user and password, or no credentials at all
	// where tlsAuthentication, basicAuthFile or anonymousUserRole allow
	// them; off, nothing is checked and every peer is anonymous.
	AuthenticationEnabled bool `yaml:"authenticationEnabled"`
	// Token says how tokens are checked.
	Token TokenConfig `yaml:"token"`
	// AuthorizationEnabled checks each operation against the role's
	// permissions (Pulsar's authorizationEnabled); it needs
	// AuthenticationEnabled.
	AuthorizationEnabled bool `yaml:"authorizationEnabled"`
	// SuperUserRoles may do anything, replication included (Pulsar's
	// superUserRoles).
	SuperUserRoles []string `yaml:"superUserRoles"`
	// ReplicatorRoles are the roles the region's replicator workers
	// authenticate with: only they (and superusers) may write replicated
	// entries or bypass a standby region's redirect.
	ReplicatorRoles []string `yaml:"replicatorRoles"`
	// ProxyRoles are the roles Isobar proxies authenticate with (Pulsar's
	// proxyRoles): only they may act for a client (CONNECT's
	// original_principal, HTTP's X-Original-Principal header), and they
	// must; what is then authorized is the client's role, not the proxy's.
	ProxyRoles []string `yaml:"proxyRoles"`
	// AuthenticateMetrics requires a token for /metrics as well (Pulsar's
	// authenticateMetricsEndpoint); /healthz and /readyz are always open.
	AuthenticateMetrics bool `yaml:"authenticateMetrics"`
	// TLSAuthentication also accepts a verified client certificate (mutual
	// TLS) as a credential, its subject's common name being the role
	// (Pulsar's AuthenticationProviderTls); the TLS listener must verify
	// client certificates (broker.tls.trustCertsFile).
	TLSAuthentication bool `yaml:"tlsAuthentication"`
	// BasicAuthFile also accepts a user and password (Pulsar's
	// AuthenticationProviderBasic; method "basic" in CONNECT, HTTP's
	// "Authorization: Basic"), the user being the role: an htpasswd-style
	// file of user:hash lines, each hash in Apache's MD5 scheme as
	// `htpasswd -m` writes it ($apr1$...). Read at start.
	BasicAuthFile string `yaml:"basicAuthFile"`
	// AnonymousUserRole is the role of a peer that presents no
	// credentials at all (Pulsar's anonymousUserRole): with it, such a
	// peer is let in as this role, and authorization decides what it may
	// do; without it, it is refused. A peer whose credentials are wrong
	// is refused either way.
	AnonymousUserRole string `yaml:"anonymousUserRole"`
}

// Validate checks the settings; every problem is named.
func (c Config) Validate() error {
	var errs []error
	otherMethod := c.TLSAuthentication || c.BasicAuthFile != ""
	if c.AuthenticationEnabled && (!otherMethod || c.Token.SecretKey != "" || c.Token.PublicKey != "") {
		if err := c.Token.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("auth.token: %w", err))
		}
	}
	if c.TLSAuthentication && !c.AuthenticationEnabled {
		errs = append(errs, errors.New("auth.tlsAuthentication needs auth.authenticationEnabled"))
	}
	if c.BasicAuthFile != "" && !c.AuthenticationEnabled {
		errs = append(errs, errors.New("auth.basicAuthFile needs auth.authenticationEnabled"))
	}
	if c.AnonymousUserRole != "" {
		if !c.AuthenticationEnabled {
			errs = append(errs, errors.New("auth.anonymousUserRole needs auth.authenticationEnabled (with it off every peer is let in anyway)"))
		}
		if err := ValidRole(c.AnonymousUserRole); err != nil {
			errs = append(errs, fmt.Errorf("auth.anonymousUserRole %q: %w", c.AnonymousUserRole, err))
		}
	}
	if c.AuthorizationEnabled && !c.AuthenticationEnabled {
		errs = append(errs, errors.New("auth.authorizationEnabled needs auth.authenticationEnabled"))
	}
	for _, r := range slices.Concat(c.SuperUserRoles, c.ReplicatorRoles, c.ProxyRoles) {
		if err := ValidRole(r); err != nil {
			errs = append(errs, fmt.Errorf("auth: role %q: %w", r, err))
		}
	}
	return errors.Join(errs...)
}

// ValidRole checks a role name: printable, no spaces, at most 256 bytes.
func ValidRole(r string) error {
	if r == "" || len(r) > 256 {
		return errors.New("a role is 1 to 256 bytes")
	}
	for _, c := range r {
		if c <= ' ' || c == 0x7f {
			return errors.New("a role has no spaces or control characters")
		}
	}
	return nil
}

// Identity is who a peer proved to be.
type Identity struct {
	// Role is the authenticated role; empty when authentication is off.
	Role string
	// Expires is when the credential stops being valid (zero: never).
	Expires time.Time
	// Proxy is the role of the proxy that acts for Role (Delegate); empty
	// for a client that connected directly.
	Proxy string
}

// Server checks credentials for one server (a broker). A nil *Server, or
// one with authentication off, lets every peer in as anonymous.
type Server struct {
	cfg        Config
	verifier   *Verifier
	super      map[string]bool
	replicator map[string]bool
	proxy      map[string]bool
	basic      basicUsers // nil without auth.basicAuthFile
}

// NewServer builds the checks from cfg, loading the token key.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, super: map[string]bool{}, replicator: map[string]bool{}, proxy: map[string]bool{}}
	for _, r := range cfg.ProxyRoles {
		s.proxy[r] = true
	}
	for _, r := range cfg.SuperUserRoles {
		s.super[r] = true
	}
	for _, r := range cfg.ReplicatorRoles {
		s.replicator[r] = true
	}
	if cfg.AuthenticationEnabled && (cfg.Token.SecretKey != "" || cfg.Token.PublicKey != "") {
		v, err := NewVerifier(cfg.Token)
		if err != nil {
			return nil, err
		}
		s.verifier = v
	}
	if cfg.AuthenticationEnabled && cfg.BasicAuthFile != "" {
		u, err := readBasicUsers(cfg.BasicAuthFile)
		if err != nil {
			return nil, err
		}
		s.basic = u
	}
	return s, nil
}

// Enabled reports whether peers must authenticate.
func (s *Server) Enabled() bool { return s != nil && s.cfg.AuthenticationEnabled }

// AuthorizationEnabled reports whether operations are checked against
// permissions.
func (s *Server) AuthorizationEnabled() bool { return s != nil && s.cfg.AuthorizationEnabled }

// IsSuperUser reports whether role is a superuser (always true with
// authorization off: every peer may do everything).
func (s *Server) IsSuperUser(role string) bool {
	return !s.AuthorizationEnabled() || s.super[role]
}

// IsReplicator reports whether role may act as a replicator: write
// replicated entries and reach a standby region's topics. With
// authentication off there is no role to check, and the caller falls
// back to what the peer says it is.
func (s *Server) IsReplicator(role string) bool {
	return !s.Enabled() || s.super[role] || s.replicator[role]
}

// OriginalPrincipalHeader carries, on an admin or lookup request a proxy
// forwards, the role of the client it acts for (Pulsar's header).
const OriginalPrincipalHeader = "X-Original-Principal"

// Delegate turns id, the identity a peer proved, into the identity to
// authorize when the peer says it acts for original (CONNECT's
// original_principal, the X-Original-Principal header): a proxy role must
// name a client that is not itself a proxy, anyone else may not name one
// (as Pulsar's isValidOriginalPrincipal, and a refusal where Pulsar 2.x
// only warns). The result is the client's role, with Proxy set. When the
// proxy forwards the client's token as well (originalMethod "token",
// originalData), it is checked too: it must be valid and for original,
// and its expiry becomes the identity's. With authentication off, id is
// returned as is.
func (s *Server) Delegate(id Identity, original, originalMethod, originalData string) (Identity, error) {
	if !s.Enabled() {
		return id, nil
	}
	switch {
	case original == "" && s.proxy[id.Role]:
		return Identity{}, fmt.Errorf("%w: role %q is a proxy role (auth.proxyRoles): it connects only on behalf of a client (original principal)", errkind.ErrAuthorization, id.Role)
	case original == "":
		return id, nil
	case !s.proxy[id.Role]:
		return Identity{}, fmt.Errorf("%w: role %q is not a proxy role (auth.proxyRoles), so it may not act for %q", errkind.ErrAuthorization, id.Role, truncate(original, 64))
	case s.proxy[original]:
		return Identity{}, fmt.Errorf("%w: the original principal %q is a proxy role", errkind.ErrAuthorization, original)
	}
	if err := ValidRole(original); err != nil {
		return Identity{}, fmt.Errorf("%w: original principal: %w", errkind.ErrAuthentication, err)
	}
	out := Identity{Role: original, Expires: id.Expires, Proxy: id.Role}
	if originalMethod == TokenMethod && originalData != "" && s.verifier != nil {
		c, err := s.verifier.Verify(originalData)
		if err != nil {
			return Identity{}, fmt.Errorf("original credentials: %w", err)
		}
		if c.Role != original {
			return Identity{}, fmt.Errorf("%w: the original credentials are for role %q, not the original principal %q", errkind.ErrAuthentication, c.Role, original)
		}
		out.Expires = c.Expires
	}
	return out, nil
}

// TokenMethod and TLSMethod are the auth_method_names of token and
// client-certificate credentials in CONNECT (pulsar-client-go's
// AuthenticationToken and AuthenticationTLS).
const (
	TokenMethod = "token"
	TLSMethod   = "tls"
)

// methods names the accepted auth methods, for refusals.
func (s *Server) methods() string {
	var m []string
	if s.verifier != nil {
		m = append(m, TokenMethod)
	}
	if s.cfg.TLSAuthentication {
		m = append(m, TLSMethod)
	}
	if s.basic != nil {
		m = append(m, BasicMethod)
	}
	return strings.Join(m, " or ")
}

// Authenticate checks the credentials of a binary-protocol CONNECT (or
// AUTH_RESPONSE); peer is the connection's TLS state (nil on a plaintext
// connection). With authentication off it accepts anything.
func (s *Server) Authenticate(method string, data []byte, peer *tls.ConnectionState) (Identity, error) {
	if !s.Enabled() {
		return Identity{}, nil
	}
	switch {
	case method == TokenMethod && s.verifier != nil:
	case method == TLSMethod && s.cfg.TLSAuthentication:
		return s.certificateIdentity(peer)
	case method == BasicMethod && s.basic != nil:
		user, err := s.basic.check(string(data))
		return Identity{Role: user}, err
	case (method == "" || method == "none") && s.cfg.AnonymousUserRole != "":
		return Identity{Role: s.cfg.AnonymousUserRole}, nil
	case method == "" || method == "none":
		return Identity{}, fmt.Errorf("%w: no credentials; this server requires auth method %s", errkind.ErrAuthentication, s.methods())
	default:
		return Identity{}, fmt.Errorf("%w: auth method %q is not accepted; this server requires %s", errkind.ErrAuthentication, truncate(method, 64), s.methods())
	}
	c, err := s.verifier.Verify(string(data))
	if err != nil {
		return Identity{}, err
	}
	return Identity{Role: c.Role, Expires: c.Expires}, nil
}

// certificateIdentity is the role of a verified client certificate: its
// subject's common name.
func (s *Server) certificateIdentity(peer *tls.ConnectionState) (Identity, error) {
	if peer == nil {
		return Identity{}, fmt.Errorf("%w: certificate authentication needs a TLS connection", errkind.ErrAuthentication)
	}
	if len(peer.VerifiedChains) == 0 || len(peer.PeerCertificates) == 0 {
		return Identity{}, fmt.Errorf("%w: no verified client certificate (the TLS listener needs broker.tls.trustCertsFile)", errkind.ErrAuthentication)
	}
	leaf := peer.PeerCertificates[0]
	role := leaf.Subject.CommonName
	if err := ValidRole(role); err != nil {
		return Identity{}, fmt.Errorf("%w: client certificate's common name: %w", errkind.ErrAuthentication, err)
	}
	// No expiry: the certificate was checked at the handshake, as Pulsar's
	// TLS provider does, and is not challenged on an open connection.
	return Identity{Role: role}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity HTTP or WithIdentity put in ctx.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// HTTP wraps next: every request but /healthz, /readyz and (unless
// AuthenticateMetrics) /metrics must carry "Authorization: Bearer
// <token>"; one that does not gets 401 with the reason, in the admin
// API's JSON error shape. A proxy role's request names the client it
// acts for in the X-Original-Principal header (Delegate; 403 when the
// pair is not allowed). The identity is in the request's context.
func (s *Server) HTTP(next http.Handler) http.Handler {
	if !s.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz":
			next.ServeHTTP(w, r)
			return
		case "/metrics":
			if !s.cfg.AuthenticateMetrics {
				next.ServeHTTP(w, r)
				return
			}
		}
		status := http.StatusUnauthorized
		id, err := s.authenticateHTTP(r)
		if err == nil {
			if id, err = s.Delegate(id, r.Header.Get(OriginalPrincipalHeader), "", ""); err != nil {
				status = errkind.HTTPStatusOf(err) // 403 for a pair not allowed
			}
		}
		if err != nil {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="isobar"`)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(struct {
				Reason string `json:"reason"`
			}{errkind.MessageOf(err)})
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}

func (s *Server) authenticateHTTP(r *http.Request) (Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" && s.cfg.TLSAuthentication && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return s.certificateIdentity(r.TLS)
	}
	if h == "" && s.cfg.AnonymousUserRole != "" {
		return Identity{Role: s.cfg.AnonymousUserRole}, nil
	}
	if h == "" {
		return Identity{}, fmt.Errorf("%w: no credentials; send Authorization: Bearer <token>", errkind.ErrAuthentication)
	}
	if user, password, ok := r.BasicAuth(); ok {
		if s.basic == nil {
			return Identity{}, fmt.Errorf("%w: this server does not take a user and password (auth.basicAuthFile); it requires %s", errkind.ErrAuthentication, s.methods())
		}
		role, err := s.basic.check(user + ":" + password)
		return Identity{Role: role}, err
	}
	if s.verifier == nil {
		return Identity{}, fmt.Errorf("%w: this server does not take tokens; it requires %s", errkind.ErrAuthentication, s.methods())
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Identity{}, fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", errkind.ErrAuthentication)
	}
	c, err := s.verifier.Verify(tok)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Role: c.Role, Expires: c.Expires}, nil
}
