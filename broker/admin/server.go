package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/topic"
)

// Config configures the admin server.
type Config struct {
	// Policies is the configuration store. Required: without it every
	// policy endpoint answers 503.
	Policies *policy.Store
	// Broker is the broker's side of the API: the parts it serves (a
	// topic service, its view of the region, bundles, compaction, ...).
	// A part left nil makes its endpoints answer as its field's comment
	// says (mostly 503).
	Broker adminapi.Broker
	// Cluster is the local cluster name. Required.
	Cluster string
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
	// AutoTopicCreation is the broker's default for namespaces without an
	// autoTopicCreationOverride; it decides whether
	// GET .../partitions?checkAllowAutoCreation=true creates a
	// partitioned topic. The zero value creates none.
	AutoTopicCreation policy.AutoTopicCreation
	// Decompress expands compressed entries for GET .../ledger/{l}/entry/{e};
	// nil handles NONE and ZLIB and serves other codecs as stored, with
	// X-Pulsar-Compression and X-Pulsar-Uncompressed-Size headers.
	Decompress Decompressor
	// Health checks the broker for GET /admin/v2/brokers/health; nil
	// checks that the configuration store answers.
	Health func(ctx context.Context) error
	// MaxRequestBytes bounds a request's body: a larger one is answered
	// 413 without being read. Zero means DefaultMaxRequestBytes.
	MaxRequestBytes int
	// Authz checks each request's role (authz.go); nil allows every
	// request (authorization off).
	Authz *auth.Authorizer
	// TopicDefaults are the broker's values of topic policies
	// (topicpolicies.go).
	TopicDefaults adminapi.TopicDefaults
	// Schemas is the schema registry; nil makes the schema endpoints
	// answer 503.
	Schemas *schema.Store
	// Bookies is the region's bookie rack and group assignments
	// (bookies.go); nil makes the bookies endpoints answer 503.
	Bookies *racks.Store
	// Recovery is the region's automatic recovery (recovery.go): bookie
	// decommissions and the under-replicated ledgers; nil makes its
	// endpoints answer 503.
	Recovery BookieRecovery
	// PeerClient calls the region's other brokers: namespace operations
	// forward each bundle's part to the broker owning it (nsops.go),
	// with the caller's Authorization header. Nil: http.DefaultClient.
	PeerClient *http.Client
}

// DefaultMaxRequestBytes is Config.MaxRequestBytes when zero.
const DefaultMaxRequestBytes = 1 << 20

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.Policies == nil {
		errs = append(errs, errors.New("admin.policies: required"))
	}
	if c.Cluster == "" {
		errs = append(errs, errors.New("admin.cluster: required"))
	} else if err := topic.ValidTenant(c.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("admin.cluster: %q is not a valid cluster name", c.Cluster))
	}
	if a := c.AutoTopicCreation; a.AllowAutoTopicCreation {
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("admin.autoTopicCreation: %w", err))
		}
	}
	if c.MaxRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("admin.maxRequestBytes: %d is negative", c.MaxRequestBytes))
	}
	return errors.Join(errs...)
}

// Server serves the Pulsar v2 admin REST API subset; see docs/admin.md.
type Server struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	topics adminapi.Topics
}

// New returns a server for cfg. It does not validate cfg (see
// Config.Validate). Routes are registered by the parts cfg has: a route
// whose part is missing gets a handler that answers 503 (405 for
// compaction and subscription properties) with the reason.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	s := &Server{cfg: cfg, log: log, mux: http.NewServeMux(), topics: cfg.Broker.Topics}
	s.routes()
	return s
}

// ServeHTTP serves one request. Unknown paths and methods get Pulsar's
// JSON error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Bodies are bounded before any handler runs: one announced as too
	// large is refused unread, and reading past the bound fails (413).
	limit := int64(s.cfg.MaxRequestBytes)
	if r.ContentLength > limit {
		s.writeError(w, r, fmt.Errorf("%w: a body of %d bytes, more than %d (broker.limits.maxAdminRequestBytes)", adminapi.ErrTooLarge, r.ContentLength, limit))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	// Serve unclean paths ("a//b", a trailing slash) in place: the mux
	// would answer with a 301, which clients follow as a GET.
	if ep := r.URL.EscapedPath(); ep != "/" && path.Clean(ep) != ep {
		clean := path.Clean(ep)
		if p, err := url.PathUnescape(clean); err == nil {
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = p, clean
			r = r2
		}
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// Not found, method not allowed or a redirect to the clean path:
		// let the mux decide, then answer in JSON.
		cw := &captureWriter{header: http.Header{}}
		h.ServeHTTP(cw, r)
		for _, k := range []string{"Allow", "Location"} {
			if v := cw.header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		status := cw.status
		if status == 0 {
			status = http.StatusNotFound
		}
		reason := http.StatusText(status)
		if status == http.StatusNotFound {
			reason = "Not found: " + r.URL.Path
		}
		writeJSON(w, status, errorBody{Reason: reason})
		return
	}
	s.mux.ServeHTTP(w, r)
}

type captureWriter struct {
	header http.Header
	status int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return len(b), nil
}
func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

type errorBody struct {
	Reason string `json:"reason"`
	// PendingRegions, on a delete's 503, are the regions that have not
	// applied it yet (PendingError).
	PendingRegions []string `json:"pendingRegions,omitempty"`
}

// handlerFunc is a handler that reports failure by error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, pattern); err != nil {
			s.writeError(w, r, err)
			return
		}
		auth, err := authoritative(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if auth {
			r = r.WithContext(adminapi.WithAuthoritative(r.Context()))
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func badRequestf(format string, args ...any) error {
	return fmt.Errorf("%w: %w", adminapi.ErrBadRequest, fmt.Errorf(format, args...))
}

// badRequest marks err, an error in the request itself, as a 400.
func badRequest(err error) error {
	return fmt.Errorf("%w: %w", adminapi.ErrBadRequest, err)
}

// writeError answers err as its kind in errkind's table says (see
// docs/admin.md); an error of no kind is a 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := errkind.HTTPStatusOf(err)
	var no *adminapi.NotOwnerError
	if errors.As(err, &no) {
		to := no.URL
		if r.TLS != nil && no.URLTLS != "" {
			to = no.URLTLS
		}
		loc := to + r.URL.EscapedPath()
		q := r.URL.Query()
		if no.Placed {
			q.Set("authoritative", "true")
		}
		if len(q) > 0 {
			loc += "?" + q.Encode()
		}
		w.Header().Set("Location", loc)
	}
	if status >= 500 {
		s.log.Warn("admin request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	} else {
		s.log.Debug("admin request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	body := errorBody{Reason: errkind.MessageOf(err)}
	var pe *adminapi.PendingError
	if errors.As(err, &pe) {
		body.PendingRegions = pe.Regions
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Reason: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func ok(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readBody reads a request's body, which ServeHTTP bounded.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%w: a body of more than %d bytes (broker.limits.maxAdminRequestBytes)", adminapi.ErrTooLarge, tooLarge.Limit)
	}
	if err != nil {
		return nil, badRequest(fmt.Errorf("read body: %w", err))
	}
	return b, nil
}

// decodeBody decodes a JSON body into v; empty and null bodies leave v
// alone and report false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) (bool, error) {
	b, err := readBody(w, r)
	if err != nil {
		return false, err
	}
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, badRequest(fmt.Errorf("body: %w", err))
	}
	return true, nil
}

func boolParam(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

var errNoPolicies = fmt.Errorf("%w: the configuration store is not available", adminapi.ErrUnavailable)
var errNoTopics = fmt.Errorf("%w: topics are not served by this broker", adminapi.ErrUnavailable)

// need is h when the server was given what h needs (present), else a
// handler that answers missing: a route's handler is chosen when the
// route is registered, by whether its dependency is there, so handlers
// check no dependency per request.
func need(present bool, missing error, h handlerFunc) handlerFunc {
	if present {
		return h
	}
	return absent(missing)
}

// needT is need for a topic handler.
func needT(present bool, missing error, h topicHandlerFunc) topicHandlerFunc {
	if present {
		return h
	}
	return func(http.ResponseWriter, *http.Request, topic.Name) error { return missing }
}

// absent is the handler of a route whose dependency the server was not
// given: it answers err.
func absent(err error) handlerFunc {
	return func(http.ResponseWriter, *http.Request) error { return err }
}

// The server's dependencies, as routes need them.
func (s *Server) withPolicies(h handlerFunc) handlerFunc {
	return need(s.cfg.Policies != nil, errNoPolicies, h)
}
func (s *Server) withTopics(h handlerFunc) handlerFunc { return need(s.topics != nil, errNoTopics, h) }
func (s *Server) withBrokers(h handlerFunc) handlerFunc {
	return need(s.cfg.Broker.Brokers != nil, errNoBrokers, h)
}
func (s *Server) withBookies(h handlerFunc) handlerFunc {
	return need(s.cfg.Bookies != nil, errNoBookies, h)
}
func (s *Server) withRecovery(h handlerFunc) handlerFunc {
	return need(s.cfg.Recovery != nil, errNoRecovery, h)
}

func (s *Server) routes() {
	const v2 = "/admin/v2"
	// Clusters.
	s.handle("GET "+v2+"/clusters", s.withPolicies(s.listClusters))
	s.handle("GET "+v2+"/clusters/{cluster}", s.withPolicies(s.getCluster))
	s.handle("PUT "+v2+"/clusters/{cluster}", s.withPolicies(s.createCluster))
	s.handle("POST "+v2+"/clusters/{cluster}", s.withPolicies(s.updateCluster))
	s.handle("DELETE "+v2+"/clusters/{cluster}", s.withPolicies(s.deleteCluster))
	// Tenants.
	s.handle("GET "+v2+"/tenants", s.withPolicies(s.listTenants))
	s.handle("GET "+v2+"/tenants/{tenant}", s.withPolicies(s.getTenant))
	s.handle("PUT "+v2+"/tenants/{tenant}", s.withPolicies(s.createTenant))
	s.handle("POST "+v2+"/tenants/{tenant}", s.withPolicies(s.updateTenant))
	s.handle("DELETE "+v2+"/tenants/{tenant}", s.withPolicies(s.deleteTenant))
	// Namespaces.
	ns := v2 + "/namespaces/{tenant}/{namespace}"
	s.nsRateRoutes(ns)
	s.handle("GET "+v2+"/namespaces/{tenant}", s.withPolicies(s.listNamespaces))
	s.handle("GET "+ns, s.withPolicies(s.getNamespace))
	s.handle("PUT "+ns, s.withPolicies(s.createNamespace))
	s.handle("DELETE "+ns, s.withPolicies(s.deleteNamespace))
	s.handle("GET "+ns+"/topics", s.withPolicies(s.namespaceTopics))
	for _, p := range slices.Concat(namespacePolicies, s.settingsPolicies(), schemaSecurityPolicies) {
		s.handle("GET "+ns+"/"+p.path, s.getNSPolicy(p))
		if p.set != nil {
			method := p.setMethod
			if method == "" {
				method = http.MethodPost
			}
			s.handle(method+" "+ns+"/"+p.path, s.setNSPolicy(p))
		}
		if p.remove != nil {
			s.handle("DELETE "+ns+"/"+p.path, s.removeNSPolicy(p))
		}
	}
	s.handle("GET "+ns+"/backlogQuotaMap", s.getNSPolicy(backlogQuotaPolicy))
	s.handle("GET "+ns+"/property/{key}", s.getNamespaceProperty)
	s.handle("PUT "+ns+"/property/{key}/{value}", s.setNamespaceProperty)
	s.handle("DELETE "+ns+"/property/{key}", s.removeNamespaceProperty)
	s.handle("GET "+ns+"/permissions", s.withPolicies(s.namespacePermissions))
	s.handle("POST "+ns+"/permissions/{role}", s.withPolicies(s.grantNamespacePermission))
	s.handle("DELETE "+ns+"/permissions/{role}", s.withPolicies(s.revokeNamespacePermission))
	s.handle("GET "+ns+"/permissions/subscription", s.withPolicies(s.subscriptionPermissions))
	s.handle("POST "+ns+"/permissions/subscription/{subscription}", s.withPolicies(s.grantSubscriptionPermission))
	s.handle("DELETE "+ns+"/permissions/{subscription}/{role}", s.withPolicies(s.revokeSubscriptionPermission))
	s.nsOpRoutes(ns)
	// Topics, in both domains.
	for _, d := range []topic.Domain{topic.Persistent, topic.NonPersistent} {
		base := v2 + "/" + string(d) + "/{tenant}/{namespace}"
		t := base + "/{topic}"
		s.handle("GET "+base, s.listTopics(d))
		s.handle("GET "+base+"/partitioned", s.listPartitioned(d))
		s.handle("PUT "+t, s.topicHandler(d, s.createTopic))
		s.handle("DELETE "+t, s.topicHandler(d, s.deleteTopic))
		s.handle("PUT "+t+"/partitions", s.topicHandler(d, s.createPartitioned))
		s.handle("POST "+t+"/partitions", s.topicHandler(d, s.updatePartitioned))
		s.handle("GET "+t+"/partitions", s.topicHandler(d, s.getPartitions))
		s.handle("DELETE "+t+"/partitions", s.topicHandler(d, s.deletePartitioned))
		s.handle("GET "+t+"/stats", s.topicHandler(d, s.stats))
		s.handle("GET "+t+"/partitioned-stats", s.topicHandler(d, s.partitionedStats))
		s.handle("GET "+t+"/internalStats", s.topicHandler(d, s.internalStats))
		s.handle("GET "+t+"/internal-info", s.topicHandler(d, s.internalInfo))
		s.handle("GET "+t+"/subscriptions", s.topicHandler(d, s.subscriptions))
		s.handle("PUT "+t+"/subscription/{sub}", s.topicHandler(d, s.createSubscription))
		s.handle("DELETE "+t+"/subscription/{sub}", s.topicHandler(d, s.deleteSubscription))
		hasSP := s.cfg.Broker.SubscriptionProperties != nil
		s.handle("GET "+t+"/subscription/{sub}/properties", s.topicHandler(d, needT(hasSP, errNoSubscriptionProperties, s.subscriptionProperties)))
		s.handle("PUT "+t+"/subscription/{sub}/properties", s.topicHandler(d, needT(hasSP, errNoSubscriptionProperties, s.setSubscriptionProperties)))
		s.handle("POST "+t+"/subscription/{sub}/skip/{n}", s.topicHandler(d, s.skip))
		s.handle("POST "+t+"/subscription/{sub}/skip_all", s.topicHandler(d, s.skipAll))
		s.handle("POST "+t+"/subscription/{sub}/resetcursor/{timestamp}", s.topicHandler(d, s.resetCursorToTime))
		s.handle("POST "+t+"/subscription/{sub}/resetcursor", s.topicHandler(d, s.resetCursor))
		s.handle("PUT "+t+"/unload", s.topicHandler(d, s.unload))
		s.handle("POST "+t+"/terminate", s.topicHandler(d, s.terminate))
		s.handle("POST "+t+"/terminate/partitions", s.topicHandler(d, s.terminatePartitions))
		s.handle("GET "+t+"/lastMessageId", s.topicHandler(d, s.lastMessageID))
		s.topicPolicyRoutes(t, d)
		s.handle("GET "+t+"/ledger/{ledger}/entry/{entry}", s.topicHandler(d, s.entry))
		s.handle("GET "+t+"/subscription/{sub}/position/{n}", s.topicHandler(d, s.peek))
		s.handle("GET "+t+"/examinemessage", s.topicHandler(d, s.examineMessage))
		s.handle("GET "+t+"/messageid/{timestamp}", s.topicHandler(d, s.messageIDByTime))
		s.handle("GET "+t+"/properties", s.topicHandler(d, s.getProperties))
		s.handle("PUT "+t+"/properties", s.topicHandler(d, s.updateProperties))
		s.handle("DELETE "+t+"/properties", s.topicHandler(d, s.removeProperty))
		s.handle("GET "+t+"/permissions", s.permissionTopic(d, s.topicPermissions))
		s.handle("POST "+t+"/permissions/{role}", s.permissionTopic(d, s.grantTopicPermission))
		s.handle("DELETE "+t+"/permissions/{role}", s.permissionTopic(d, s.revokeTopicPermission))
		if d == topic.Persistent {
			s.compactionRoutes(t)
			s.handle("GET "+t+"/primary", s.topicHandler(d, s.getTopicPrimary))
			s.handle("POST "+t+"/primary", s.topicHandler(d, s.setTopicPrimary))
			s.handle("DELETE "+t+"/primary", s.topicHandler(d, s.removeTopicPrimary))
		}
		s.handle("GET /lookup/v2/topic/"+string(d)+"/{tenant}/{namespace}/{topic}", s.topicHandler(d, s.lookup))
		s.handle("GET /lookup/v2/topic/"+string(d)+"/{tenant}/{namespace}/{topic}/bundle", s.topicHandler(d, s.bundleOfTopic))
	}
	// Schemas (schemas.go).
	sc := v2 + "/schemas/{tenant}/{namespace}/{topic}"
	s.handle("GET "+sc+"/schema", s.schemaHandler(s.getSchema))
	s.handle("GET "+sc+"/schema/{version}", s.schemaHandler(s.getSchemaVersion))
	s.handle("GET "+sc+"/schemas", s.schemaHandler(s.getAllSchemas))
	s.handle("POST "+sc+"/schema", s.schemaHandler(s.postSchema))
	s.handle("DELETE "+sc+"/schema", s.schemaHandler(s.deleteSchema))
	s.handle("POST "+sc+"/compatibility", s.schemaHandler(s.testCompatibility))
	s.handle("POST "+sc+"/version", s.schemaHandler(s.schemaVersionOf))
	// Transactions (transactions.go).
	s.transactionRoutes()
	// Brokers.
	s.handle("GET "+v2+"/broker-stats/load-report", need(s.cfg.Broker.LoadReporter != nil, errNoLoadReport, s.loadReport))
	s.handle("GET "+v2+"/brokers/health", s.health)
	s.handle("GET "+v2+"/brokers/ready", s.ready)
	s.handle("GET "+v2+"/brokers", s.withTopics(s.listActiveBrokers))
	s.handle("GET "+v2+"/brokers/{cluster}", s.withPolicies(s.brokers))
	s.handle("GET "+v2+"/brokers/leaderBroker", s.withBrokers(s.leaderBroker))
	s.handle("GET "+v2+"/brokers/configuration", s.withBrokers(s.dynamicConfigNames))
	s.handle("GET "+v2+"/brokers/configuration/values", s.withBrokers(s.dynamicConfigValues))
	s.handle("GET "+v2+"/brokers/configuration/runtime", s.withBrokers(s.runtimeConfig))
	s.handle("POST "+v2+"/brokers/configuration/{name}/{value}", s.withBrokers(s.setDynamicConfig))
	s.handle("DELETE "+v2+"/brokers/configuration/{name}", s.withBrokers(s.deleteDynamicConfig))
	s.bookieRoutes(v2)
}

// isKind reports whether err is of kind k: whether the server answers it
// as k.
func isKind(err error, k *errkind.Error) bool {
	return err != nil && errkind.KindOf(err) == k
}
