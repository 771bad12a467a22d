// Package broker is Isobar's stateless broker: it serves the Pulsar binary
// protocol (package wire) on a listener, owns the topics of the namespace
// bundles placed on it, appends what producers send to each topic's managed
// ledger (package mledger) and dispatches entries to the consumers of each
// subscription (Exclusive, Failover, Shared, Key_Shared). It keeps no state
// that is not in the metadata store or on the bookies: a topic is loaded on
// first use by the broker that owns its bundle and unloaded when the bundle
// goes elsewhere. The design is in docs/broker.md.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/dispatch"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/deletes"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
)

// Version is the server version sent in CONNECTED.
const Version = "Isobar 0.1"

// Errors returned by the broker's Go API. Each is of one kind of wire's
// error table, which decides the server error code and the HTTP status a
// client gets (docs/admin.md lists them).
var (
	ErrClosed          = errkind.Sentinel(errkind.ErrServiceNotReady, "broker: closed")
	ErrNotOwner        = errkind.Sentinel(errkind.ErrServiceNotReady, "broker: topic not served by this broker")
	ErrTopicNotFound   = errkind.Sentinel(errkind.ErrTopicNotFound, "broker: topic not found")
	ErrSubNotFound     = errkind.Sentinel(errkind.ErrSubscriptionNotFound, "broker: subscription not found")
	ErrNamespace       = errkind.Sentinel(errkind.ErrNotFound, "broker: namespace not found")
	ErrInvalidArgument = errkind.Sentinel(errkind.ErrBadRequest, "broker: invalid argument")
	ErrBusy            = errkind.Sentinel(errkind.ErrConsumerBusy, "broker: in use")
)

// LookupResult says which broker serves a topic.
type LookupResult struct {
	// ServiceURL and HTTPURL are the serving broker's advertised URLs,
	// ServiceURLTLS and HTTPURLTLS the same over TLS (empty without).
	ServiceURL, HTTPURL       string
	ServiceURLTLS, HTTPURLTLS string
	// Self is true when this broker serves it.
	Self bool
	// Authoritative tells the client that the answer comes from the broker
	// that decided the placement (sent with redirects).
	Authoritative bool
}

// Placement decides which broker serves a topic: the bundle ownership
// registry in a region, or Self in a single-broker setup. It is the one
// place where lookup policy lives.
type Placement interface {
	// Lookup returns the broker that serves name, taking ownership of its
	// bundle when this broker is chosen.
	Lookup(ctx context.Context, name topic.Name, authoritative bool) (LookupResult, error)
	// Owns reports, without blocking, whether this broker serves name now.
	Owns(name topic.Name) bool
	// OwnedEpoch identifies, without blocking, this broker's current
	// ownership of name's bundle: it differs after the bundle was released
	// and acquired again. ok is false when name is not served here now.
	OwnedEpoch(name topic.Name) (epoch int64, ok bool)
}

// NamespacePolicy is what the broker needs to know about a namespace.
type NamespacePolicy struct {
	// AutoCreate allows topics to be created on first use.
	AutoCreate bool
	// AutoCreatePartitions is the partition count of auto-created topics;
	// 0 creates non-partitioned topics.
	AutoCreatePartitions int
	// Deduplication turns on de-duplication by producer name and sequence id.
	Deduplication bool
	// Retention keeps consumed ledgers (mledger.Retention).
	Retention mledger.Retention
	// MessageTTL acknowledges, on every subscription, messages older than
	// it; zero is no TTL.
	MessageTTL time.Duration
	// BacklogLimit bounds a subscription's backlog in bytes (zero or less:
	// none); BacklogPolicy says what happens beyond it.
	BacklogLimit  int64
	BacklogPolicy BacklogPolicy
	// BacklogAge bounds the age of a subscription's oldest unacknowledged
	// message (the message_age quota; zero: none); BacklogAgePolicy says
	// what happens beyond it.
	BacklogAge       time.Duration
	BacklogAgePolicy BacklogPolicy
	// MaxProducers and MaxConsumers bound the producers and consumers of
	// a topic, MaxConsumersPerSubscription those of one subscription and
	// MaxTopics the namespace's topics in the region; 0 is no limit, nil:
	// the region's dynamic setting of the same name applies
	// (nslimits.go). The namespace's policies set them; a topic's own
	// (TopicPolicies) override the first three.
	MaxProducers, MaxConsumers, MaxConsumersPerSubscription, MaxTopics *int
	// MaxSubscriptions bounds a topic's subscriptions (the broker's own
	// cursors not counted) and MaxMessageSize its messages, in bytes,
	// below the broker's Config.MaxMessageSize; zero is no limit. They
	// come from the topic's own policies.
	MaxSubscriptions, MaxMessageSize int
	// AutoSubscriptionCreation, when set, says whether consumers may
	// create subscriptions (the topic's own override, else the
	// namespace's); nil: the region's dynamic setting
	// allowAutoSubscriptionCreation.
	AutoSubscriptionCreation *bool
	// SubscriptionExpiration deletes a subscription that has had no
	// consumer for this long (Pulsar's
	// subscription_expiration_time_minutes); zero never does.
	SubscriptionExpiration time.Duration
	// MaxUnackedPerConsumer and MaxUnackedPerSubscription replace
	// Limits.MaxUnackedPerConsumer and Limits.MaxUnackedPerSubscription
	// for the topic (the topic's maxUnackedMessagesOnConsumer and
	// maxUnackedMessagesOnSubscription, else the namespace's
	// max_unacked_messages_per_consumer and
	// max_unacked_messages_per_subscription): zero keeps the broker's,
	// negative is no limit (a policy's 0).
	MaxUnackedPerConsumer, MaxUnackedPerSubscription int
	// DedupSnapshotInterval, when set, replaces
	// Config.DeduplicationSnapshotInterval for the topic, in seconds (0:
	// no timed snapshots): the topic's deduplicationSnapshotInterval,
	// else the namespace's.
	DedupSnapshotInterval *int
	// DelayedDelivery, when set, replaces the broker's delayed delivery
	// (on, no tick, Limits.MaxDeliveryDelay): the topic's delayedDelivery,
	// else the namespace's delayed_delivery_policies.
	DelayedDelivery *policy.DelayedDeliveryPolicies
	// SyncReplication, when set, holds the acknowledgement of a client's
	// publish until other regions hold the entry too (syncrepl.go): the
	// topic's syncReplication, else the namespace's.
	SyncReplication *policy.SyncReplication
	// Rates are the topic's rate limits (rates.go).
	Rates Rates
	// ReplicationClusters are the clusters the namespace's topics live
	// in; the broker keeps a replication cursor for each one but its own.
	ReplicationClusters []string
	// Failover is the replication mode and primary region
	// (docs/failover.md).
	Failover policy.Failover
	// PrimaryServiceURL is the primary region's broker service URL, set
	// when the namespace is active-standby and this region is not its
	// primary: lookups are redirected there.
	PrimaryServiceURL string
	// PrimaryWebServiceURL is the primary region's admin and lookup HTTP
	// URL, under the same condition: HTTP lookups are redirected there.
	PrimaryWebServiceURL string
	// PrimaryServiceURLTLS and PrimaryWebServiceURLTLS are the same over
	// TLS, for clients that came over TLS ("" when the primary serves none).
	PrimaryServiceURLTLS, PrimaryWebServiceURLTLS string
	// TopicFailover are the failover policies of the namespace's topics
	// that have their own, by base local name, and TopicPrimaryURLs the
	// broker service and web service URLs of their primaries other than
	// this region (then the same over TLS); ForTopic applies them.
	TopicFailover    map[string]policy.Failover
	TopicPrimaryURLs map[string][4]string
	// Persistence, when set, gives the topic's new ledgers their
	// ensemble size and quorums instead of broker.ledger's: the topic's
	// own persistence policy, else its namespace's.
	Persistence *policy.PersistencePolicies
	// Affinity confines the namespace's new ledgers to bookie groups: its
	// bookie affinity in this cluster (zero: any bookie).
	Affinity ledger.Affinity
	// EncryptionRequired refuses producers that declare they do not
	// encrypt and messages without encryption keys (encryption.go).
	EncryptionRequired bool
	// Inactive is the topic's own inactive topic policy, else its
	// namespace's; nil: the region's dynamic settings (inactive.go).
	Inactive *policy.InactiveTopicPolicies
	// CompactionThreshold compacts a topic once the backlog its compactor
	// has not read exceeds this many bytes (the topic's own
	// compactionThreshold, else the namespace's); zero never does.
	CompactionThreshold int64
}

// sharedPolicy returns a policy equal to pol for a topic of namespace
// ns, shared with the namespace's topics that have the same: a million
// idle topics of a few namespaces do not each keep a copy. A policy
// returned is never modified (a topic's changes replace it).
func (b *Broker) sharedPolicy(ns string, pol NamespacePolicy) *NamespacePolicy {
	if cur, ok := b.nsPolicies.Load(ns); ok && reflect.DeepEqual(cur.(*NamespacePolicy), &pol) {
		return cur.(*NamespacePolicy)
	}
	b.nsPolicies.Store(ns, &pol)
	return &pol
}

// ForTopic is the policy of the topic name: the namespace's, with the
// topic's own failover policy (and its primary's URLs) when it has one.
func (p NamespacePolicy) ForTopic(name topic.Name) NamespacePolicy {
	if name.Domain != topic.Persistent {
		return p
	}
	f, ok := p.TopicFailover[name.Base().Local]
	if !ok {
		return p
	}
	p.Failover = f
	urls := p.TopicPrimaryURLs[f.Primary]
	p.PrimaryServiceURL, p.PrimaryWebServiceURL, p.PrimaryServiceURLTLS, p.PrimaryWebServiceURLTLS = urls[0], urls[1], urls[2], urls[3]
	return p
}

// BacklogPolicy is what a broker does about a backlog over its quota.
type BacklogPolicy int

const (
	// BacklogProducerException refuses new producers and sends.
	BacklogProducerException BacklogPolicy = iota
	// BacklogProducerHold is Pulsar's producer_request_hold; Isobar
	// refuses, as for BacklogProducerException (no held sends).
	BacklogProducerHold
	// BacklogConsumerEviction moves the slowest subscriptions forward,
	// dropping their oldest backlog.
	BacklogConsumerEviction
)

// Namespaces answers questions about namespaces and partitioned topics
// (the policy store behind an adapter).
type Namespaces interface {
	// Policy returns the namespace's policy; an error wrapping ErrNamespace
	// when it does not exist.
	Policy(ctx context.Context, ns string) (NamespacePolicy, error)
	// Partitions returns a topic's partition count, ok false when it is not
	// a partitioned topic.
	Partitions(ctx context.Context, name topic.Name) (n int, ok bool, err error)
	// CreatePartitioned records a partitioned topic.
	CreatePartitioned(ctx context.Context, name topic.Name, n int) error
}

// Primary says whether this broker may write for a topic of a namespace
// now (*primary.Gates). local is the topic's base local name (a
// partitioned topic's for its partitions): a topic may have its own
// failover policy.
type Primary interface {
	// Check answers at once: nil when it may.
	Check(ns, local string) error
	// Wait waits until it may, or it is definitely not the primary, or
	// ctx ends.
	Wait(ctx context.Context, ns, local string) error
	// Failover is the topic's replication mode as last seen (false when
	// the namespace is not tracked yet).
	Failover(ns, local string) (policy.Failover, bool)
	// ReachedSince reports whether the broker reached the global store
	// after t and still does.
	ReachedSince(t time.Time) bool
	// Absent reports whether region has no broker present in the global
	// store (false when it cannot tell).
	Absent(region string) bool
	// Unrenewed reports whether region's brokers are still present in
	// the global store but none has renewed its lease there for over a
	// second (false when it cannot tell).
	Unrenewed(region string) bool
	// GoneSince is since when region has been unreachable, as far as the
	// global store shows: absent, from a lease TTL before its presence
	// ended (ok false while it is not absent).
	GoneSince(region string) (time.Time, bool)
}

// Config configures a broker. It holds settings only (live dependencies
// are Deps); zero values of optional fields mean the documented defaults.
type Config struct {
	// Region names the region (metadata key prefix). Required.
	Region string `yaml:"region"`
	// Cluster is the cluster name reported to clients and in stats;
	// empty means Region.
	Cluster string `yaml:"cluster"`
	// ServiceURL is this broker's advertised pulsar:// URL. Required.
	ServiceURL string `yaml:"serviceUrl"`
	// HTTPURL is this broker's advertised http:// URL.
	HTTPURL string `yaml:"httpUrl"`
	// ServiceURLTLS and HTTPURLTLS are this broker's advertised
	// pulsar+ssl:// and https:// URLs, when it serves TLS; lookups from
	// TLS clients are answered with them.
	ServiceURLTLS string `yaml:"serviceUrlTls"`
	HTTPURLTLS    string `yaml:"httpUrlTls"`
	// MaxMessageSize is the largest message accepted and advertised in
	// CONNECTED. Zero means 5 MiB.
	MaxMessageSize int `yaml:"maxMessageSize"`
	// KeepAlive is the ping interval; a connection silent for two
	// intervals is closed. Zero means 30s.
	KeepAlive time.Duration `yaml:"keepAlive"`
	// Ledger tunes the managed ledgers of topics.
	Ledger mledger.Config `yaml:"ledger"`
	// BacklogReads paces dispatch reads behind a topic's tail cache (a
	// consumer catching up) so that they do not raise the tail latency of
	// the broker's other clients by more than its targetRise
	// (docs/broker.md, "Backlog reads and the tail").
	BacklogReads dispatch.BacklogConfig `yaml:"backlogReads"`
	// MaintenanceInterval is how often loaded topics are checked for
	// message TTL, backlog quotas and retention, and their namespace
	// policies re-read. Zero means one minute.
	MaintenanceInterval time.Duration `yaml:"maintenanceInterval"`
	// TopicMetrics labels message counters, backlogs and storage sizes
	// with the topic (and subscription); off, series are per namespace and
	// their number does not grow with topics.
	TopicMetrics bool `yaml:"topicMetrics"`
	// ReplicationStallAfter is how long a replication cursor with a
	// backlog may stay still before stats call it stalled and the
	// maintenance loop logs it; zero means 30s.
	ReplicationStallAfter time.Duration `yaml:"replicationStallAfter"`
	// DeduplicationSnapshotInterval snapshots a de-duplicated topic's
	// state at least this often while entries are written (besides every
	// 1000 entries), so a topic loaded again replays less of its log; a
	// namespace's or topic's deduplicationSnapshotInterval replaces it.
	// Zero means 120s (Pulsar's
	// brokerDeduplicationSnapshotIntervalSeconds); negative turns the
	// timed snapshots off.
	DeduplicationSnapshotInterval time.Duration `yaml:"deduplicationSnapshotInterval"`
	// Limits bound what clients may ask (docs/limits.md).
	Limits Limits `yaml:"limits"`
	// Auth turns on token authentication and authorization
	// (docs/security.md).
	Auth auth.Config `yaml:"auth"`
	// Transactions turns on Pulsar's transactions
	// (docs/transactions.md).
	Transactions TransactionsConfig `yaml:"transactions"`
}

// Deps are a broker's live dependencies.
type Deps struct {
	// Meta is the region's metadata store. Required.
	Meta metastore.Meta
	// Ledgers is the ledger client. Required.
	Ledgers *ledger.Client
	// Placement decides topic ownership; nil means this broker serves
	// every topic (a single-broker region).
	Placement Placement
	// Namespaces answers namespace policy questions; nil allows every
	// namespace with auto-creation of non-partitioned topics.
	Namespaces Namespaces
	// Primary fences active-standby namespaces (package broker/primary):
	// publishes and acknowledgements are accepted only while it allows
	// them. Nil allows every namespace (no global store).
	Primary Primary
	// AuthPolicies are the tenants' admin roles and the permissions
	// granted, which authorization checks (Config.Auth); required with
	// authorization on.
	AuthPolicies auth.PolicySource
	// Deletes are the federation's delete records (package deletes):
	// deletes of topics and namespaces through the admin API reach every
	// region. Nil: a delete removes this region's copy only.
	Deletes *deletes.Store
	// Schemas is the schema registry (docs/schemas.md); nil: clients'
	// schemas are taken unchecked and unstored, and none are served.
	Schemas *schema.Store
	// SchemaSettings returns the schema settings that apply to a topic
	// (its namespace's); nil means Pulsar's defaults (FULL, validation
	// not enforced, auto-update allowed).
	SchemaSettings func(ctx context.Context, name topic.Name) (schema.Settings, error)
	// OnDrained runs during Shutdown once every topic is unloaded and
	// before connections close: the place to give up bundle ownership so
	// that clients reconnect elsewhere.
	OnDrained func(ctx context.Context)
	// Logger receives connection and topic events; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MeterProvider and TracerProvider come from package observability;
	// nil means no-op providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Region) == "" {
		errs = append(errs, errors.New("broker.region: required"))
	}
	if !strings.HasPrefix(c.ServiceURL, "pulsar://") {
		errs = append(errs, fmt.Errorf("broker.serviceUrl: %q must be a pulsar:// URL", c.ServiceURL))
	}
	if c.MaxMessageSize < 0 || c.MaxMessageSize > 100<<20 {
		errs = append(errs, fmt.Errorf("broker.maxMessageSize: %d must be between 0 and 100 MiB", c.MaxMessageSize))
	}
	if c.MaintenanceInterval < 0 {
		errs = append(errs, fmt.Errorf("broker.maintenanceInterval: %v is negative", c.MaintenanceInterval))
	}
	if c.KeepAlive < 0 {
		errs = append(errs, fmt.Errorf("broker.keepAlive: %v is negative", c.KeepAlive))
	}
	errs = append(errs, c.Ledger.Problems("broker.ledger.")...)
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.BacklogReads.Validate("broker.backlogReads"); err != nil {
		errs = append(errs, err)
	}
	if err := c.Auth.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("broker.%w", err))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = c.Region
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = wire.MaxMessageSize
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 30 * time.Second
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = time.Minute
	}
	if c.ReplicationStallAfter <= 0 {
		c.ReplicationStallAfter = 30 * time.Second
	}
	if c.DeduplicationSnapshotInterval == 0 {
		c.DeduplicationSnapshotInterval = DefaultDeduplicationSnapshotInterval
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

func (d Deps) validate() error {
	var errs []error
	if d.Meta == nil {
		errs = append(errs, errors.New("broker: metadata store: required"))
	}
	if d.Ledgers == nil {
		errs = append(errs, errors.New("broker: ledger client: required"))
	}
	return errors.Join(errs...)
}

func (d Deps) withDefaults(c Config) Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.MeterProvider == nil {
		d.MeterProvider = noopmetric.NewMeterProvider()
	}
	if d.TracerProvider == nil {
		d.TracerProvider = nooptrace.NewTracerProvider()
	}
	if d.Placement == nil {
		d.Placement = Self{ServiceURL: c.ServiceURL, HTTPURL: c.HTTPURL, ServiceURLTLS: c.ServiceURLTLS, HTTPURLTLS: c.HTTPURLTLS}
	}
	if d.Namespaces == nil {
		d.Namespaces = openNamespaces{}
	}
	return d
}

// ledgerDeps are the managed ledgers' dependencies.
func (b *Broker) ledgerDeps() *mledger.Deps {
	b.mlDepsOnce.Do(func() {
		b.mlDeps = mledger.Deps{Meta: b.deps.Meta, Ledgers: ledgers.OnBookies(b.deps.Ledgers), Region: b.cfg.Region, Logger: b.deps.Logger, Now: b.deps.Now, Changed: b.mlChanged}.Shared()
	})
	return b.mlDeps
}

// Self is the Placement of a broker that serves every topic itself.
type Self struct{ ServiceURL, HTTPURL, ServiceURLTLS, HTTPURLTLS string }

// Lookup implements Placement.
func (s Self) Lookup(context.Context, topic.Name, bool) (LookupResult, error) {
	return LookupResult{ServiceURL: s.ServiceURL, HTTPURL: s.HTTPURL, ServiceURLTLS: s.ServiceURLTLS, HTTPURLTLS: s.HTTPURLTLS, Self: true, Authoritative: true}, nil
}

// Owns implements Placement.
func (Self) Owns(topic.Name) bool { return true }

// OwnedEpoch implements Placement: one ownership, for ever.
func (Self) OwnedEpoch(topic.Name) (int64, bool) { return 1, true }

type openNamespaces struct{}

func (openNamespaces) Policy(context.Context, string) (NamespacePolicy, error) {
	return NamespacePolicy{AutoCreate: true}, nil
}
func (openNamespaces) Partitions(context.Context, topic.Name) (int, bool, error) {
	return 0, false, nil
}
func (openNamespaces) CreatePartitioned(context.Context, topic.Name, int) error {
	return fmt.Errorf("%w: no namespace store to record partitioned topics", ErrInvalidArgument)
}

// Broker serves the Pulsar protocol for the topics it owns.
type Broker struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	// refused remembers which primary regions' brokers refuse
	// connections (awaitPrimaryBack).
	refused refusals
	// backlog paces reads behind the topics' tail caches (backlog.go).
	backlog *backlogPacer

	ctx    context.Context // cancelled by Shutdown's deadline or Close
	cancel context.CancelFunc

	nextProducer atomic.Uint64
	panics       atomic.Int64 // recovered panics in command handlers (bugs)
	acceptErr    atomic.Pointer[acceptFailure]
	lookups      atomic.Int64 // lookups in progress (MaxConcurrentLookups)

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[*conn]struct{}
	perIP     map[string]int // open connections by client address
	metrics   *metrics
	tracing   bool             // the tracer provider records spans
	auth      *auth.Server     // credentials
	authz     *auth.Authorizer // permissions
	topics    map[string]*topicSlot
	loaded    bundleCounts // the loaded topics by namespace and bundle (loadindex.go)
	shutdown  bool

	// txns are the transaction coordinators this broker runs
	// (transactions.go).
	txns txnCoordinators

	// hbMu guards the heartbeat managed ledger (heartbeat.go).
	hbMu     sync.Mutex
	hb       *mledger.ManagedLedger
	hbCursor *mledger.Cursor

	// dyn are the region's dynamic settings, as last read (nslimits.go).
	dyn atomic.Pointer[dynamicSnapshot]

	// maintIdx are the topics the next maintenance pass visits
	// (maintindex.go).
	maintIdx maintIndex

	// traffic are the topics that carried messages since the last load
	// sample (loadindex.go).
	traffic trafficList
	// metricsIdx keeps what a metrics collection observes of the
	// topics that do not change (metricsindex.go).
	metricsIdx metricsIndex

	// syncDue are topics whose subscription states are shipped or
	// applied in the next round (substate.go).
	syncMu  sync.Mutex
	syncDue map[*Topic]struct{}
	origins sync.Map // region names, interned
	nsAttrs sync.Map // namespace name → its topics' metric attributes (topicAttrs)
	// mlDeps are the managed ledgers' dependencies, made once
	// (ledgerDeps).
	mlDepsOnce sync.Once
	mlDeps     *mledger.Deps
	// delayDefault is the delayed delivery of topics without a policy
	// for it, made once (delayPolicyOf).
	delayDefaultOnce sync.Once
	delayDefault     *delayPolicy
	// nsPolicies: namespace name → the policy its topics last loaded or
	// changed to (sharedPolicy).
	nsPolicies sync.Map

	wg    sync.WaitGroup // accept loops and connections
	maint sync.WaitGroup // the maintenance, subscription-state and dynamic-settings loops
	// startOnce starts them (Start).
	startOnce sync.Once
}

// topicSlot is a loaded topic or one being loaded (ready closed when
// done). b.mu guards ready: once loaded, a slot's own channel is
// replaced by loadedReady (a million loaded topics keep none).
type topicSlot struct {
	ready chan struct{}
	t     *Topic
	err   error
}

// loadedReady is the ready channel of every loaded slot: closed.
var loadedReady = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// New returns a broker; Start starts its background loops and Serve
// serves it on a listener.
func New(cfg Config, deps Deps) (*Broker, error) {
	if err := errors.Join(cfg.Validate(), deps.validate()); err != nil {
		return nil, err
	}
	if cfg.Auth.AuthorizationEnabled && deps.AuthPolicies == nil {
		return nil, errors.New("broker: authorization needs Deps.AuthPolicies")
	}
	cfg = cfg.withDefaults()
	deps = deps.withDefaults(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg:    cfg,
		deps:   deps,
		log:    deps.Logger.With("component", "broker"),
		ctx:    ctx,
		cancel: cancel,
		conns:  map[*conn]struct{}{},
		perIP:  map[string]int{},
		topics: map[string]*topicSlot{},

		syncDue: map[*Topic]struct{}{},
	}
	b.backlog = newBacklogPacer(cfg.BacklogReads, deps.Now)
	b.tracing = replication.TracingEnabled(deps.TracerProvider)
	var err error
	if b.auth, err = auth.NewServer(cfg.Auth); err != nil {
		cancel()
		return nil, fmt.Errorf("broker.auth: %w", err)
	}
	b.authz = auth.NewAuthorizer(b.auth, deps.AuthPolicies)
	if err := b.initMetrics(); err != nil {
		cancel()
		return nil, fmt.Errorf("broker: metrics: %w", err)
	}
	return b, nil
}

// Start starts the broker's background loops: topic maintenance, the
// subscription-state sync, the dynamic settings' watch and, with
// Deps.Deletes, the federated deletes. Later calls do nothing; Shutdown
// and Abort stop them.
func (b *Broker) Start() {
	b.startOnce.Do(func() {
		b.maint.Add(3)
		go func() { defer b.maint.Done(); b.maintain() }()
		go func() { defer b.maint.Done(); b.subSyncLoop() }()
		go func() { defer b.maint.Done(); b.watchDynamic() }()
		if b.deps.Deletes != nil {
			b.maint.Add(1)
			go func() { defer b.maint.Done(); b.runDeletes(b.ctx) }() // fedelete.go
		}
	})
}

// Auth is the broker's authentication: its HTTP server wraps the admin
// API and lookups with Auth().HTTP.
func (b *Broker) Auth() *auth.Server { return b.auth }

// Authorizer checks permissions for the broker and its admin API.
func (b *Broker) Authorizer() *auth.Authorizer { return b.authz }

// Config returns the broker's configuration with defaults filled in.
func (b *Broker) Config() Config { return b.cfg }

// Serve accepts connections on ln until Shutdown; it returns nil then.
// Accept errors (no file descriptor left, say) do not stop it: it backs
// off, from 5ms doubling to 1s as net/http does, and resumes; meanwhile
// AcceptErr reports the failure (readiness says the broker cannot serve).
func (b *Broker) Serve(ln net.Listener) error {
	b.mu.Lock()
	if b.shutdown {
		b.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	b.listeners = append(b.listeners, ln)
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	var delay time.Duration
	var warned time.Time
	for {
		nc, err := ln.Accept()
		if err != nil {
			b.mu.Lock()
			down := b.shutdown
			b.mu.Unlock()
			if down || errors.Is(err, net.ErrClosed) {
				return nil
			}
			b.acceptErr.Store(&acceptFailure{err: err, at: b.deps.Now()})
			delay = max(5*time.Millisecond, min(2*delay, time.Second))
			if time.Since(warned) > 5*time.Second {
				b.log.Warn("accept failed; backing off", "err", err, "delay", delay)
				warned = time.Now()
			}
			select {
			case <-time.After(delay):
			case <-b.ctx.Done():
				return nil
			}
			continue
		}
		if delay > 0 {
			b.log.Info("accepting connections again")
			delay = 0
			b.acceptErr.Store(nil)
		}
		b.ServeConn(nc)
	}
}

// acceptFailure is the last accept error and when it happened.
type acceptFailure struct {
	err error
	at  time.Time
}

// AcceptErr returns the error of the last accept when it failed and no
// accept has succeeded since, nil otherwise.
func (b *Broker) AcceptErr() error {
	if f := b.acceptErr.Load(); f != nil {
		return fmt.Errorf("broker: cannot accept connections (since %s): %w", f.at.Format(time.RFC3339), f.err)
	}
	return nil
}

// ServeConn serves one connection in the background (tests hand it one end
// of a net.Pipe). A connection over MaxConnections or MaxConnectionsPerIP
// is answered TooManyRequests and closed.
func (b *Broker) ServeConn(nc net.Conn) {
	ip := remoteIP(nc)
	b.mu.Lock()
	if b.shutdown {
		b.mu.Unlock()
		nc.Close()
		return
	}
	if over := b.overLimitLocked(ip); over != "" {
		b.mu.Unlock()
		b.refuse(nc, over)
		return
	}
	c := newConn(b, nc)
	b.conns[c] = struct{}{}
	b.perIP[ip]++
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		c.serve()
		b.mu.Lock()
		delete(b.conns, c)
		if b.perIP[ip]--; b.perIP[ip] <= 0 {
			delete(b.perIP, ip)
		}
		b.mu.Unlock()
	}()
}

// overLimitLocked says which connection limit a new connection from ip
// would exceed ("" for none).
func (b *Broker) overLimitLocked(ip string) string {
	switch {
	case b.cfg.Limits.MaxConnections > 0 && len(b.conns) >= b.cfg.Limits.MaxConnections:
		return fmt.Sprintf("the broker serves its maximum of %d connections", b.cfg.Limits.MaxConnections)
	case b.cfg.Limits.MaxConnectionsPerIP > 0 && b.perIP[ip] >= b.cfg.Limits.MaxConnectionsPerIP:
		return fmt.Sprintf("%s has its maximum of %d connections", ip, b.cfg.Limits.MaxConnectionsPerIP)
	}
	return ""
}

// refuse answers a connection beyond a limit with an ERROR and closes it,
// in the background and bounded in time.
func (b *Broker) refuse(nc net.Conn, why string) {
	b.log.Warn("connection refused", "remote", nc.RemoteAddr().String(), "reason", why)
	go func() {
		defer nc.Close()
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		if f, err := wire.AppendCommand(nil, wire.NewErrorCommand(0, fmt.Errorf("%w: %s", errkind.ErrTooManyRequests, why))); err == nil {
			nc.Write(f)
		}
	}()
}

func remoteIP(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// Shutdown stops accepting, unloads every topic (telling clients to
// reconnect elsewhere and closing the managed ledgers cleanly), closes the
// connections and waits for them. When ctx ends first the rest is cut
// short.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.shutdown {
		b.mu.Unlock()
		return nil
	}
	b.shutdown = true
	lns := b.listeners
	b.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	stop := context.AfterFunc(ctx, b.cancel)
	defer stop()
	var errs []error
	for _, t := range b.loadedTopics() {
		if err := b.unloadTopic(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	b.closeHeartbeat(ctx)
	b.closeCoordinators()
	if b.deps.OnDrained != nil {
		b.deps.OnDrained(ctx)
	}
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("broker: shutdown: %w", ctx.Err()))
	}
	b.cancel()
	b.maint.Wait()
	return errors.Join(errs...)
}

func (b *Broker) loadedTopics() []*Topic {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*Topic
	for _, s := range b.topics {
		select {
		case <-s.ready:
			if s.t != nil {
				out = append(out, s.t)
			}
		default:
		}
	}
	return out
}

// Topics returns the names of the loaded topics.
func (b *Broker) Topics() []string {
	var out []string
	for _, t := range b.loadedTopics() {
		out = append(out, t.name.String())
	}
	return out
}

// loadedTopic returns the topic if it is loaded here, without loading.
func (b *Broker) loadedTopic(name topic.Name) *Topic {
	key := slotKey(name)
	b.mu.Lock()
	s := b.topics[key]
	var ready chan struct{}
	if s != nil {
		ready = s.ready
	}
	b.mu.Unlock()
	if s == nil {
		return nil
	}
	select {
	case <-ready:
		return s.t
	default:
		return nil
	}
}

// createMode says whether loading a topic may create it.
type createMode int

const (
	mustExist      createMode = iota // a missing topic is ErrTopicNotFound
	autoCreate                       // created if the namespace allows auto-creation
	create                           // created (admin)
	replicaCreate                    // as autoCreate, for a replicator producer: not a topic deleted here (deleted.go)
	applyingDelete                   // as mustExist, for a federation-wide delete deleting this region's copy: past the delete gate (fedelete.go)
)

// getTopic returns the loaded topic name, loading it if this broker owns
// it; mode says whether a missing topic may be created.
func (b *Broker) getTopic(ctx context.Context, name topic.Name, mode createMode) (*Topic, error) {
	key := slotKey(name)
	for {
		b.mu.Lock()
		if b.shutdown {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		s := b.topics[key]
		if s == nil {
			s = &topicSlot{ready: make(chan struct{})}
			b.topics[key] = s
			b.mu.Unlock()
			// The topic's name is made again from the key, so that its
			// parts share the key's bytes: the string the caller's name
			// was parsed from (a request's) is not kept as well, and a
			// persistent topic's key is its managed ledger's name.
			if n, ok := nameOfKey(key); ok && n == name {
				name = n
			}
			epoch, _ := b.deps.Placement.OwnedEpoch(name)
			s.t, s.err = b.loadTopic(ctx, name, key, mode)
			ready := s.ready
			b.mu.Lock()
			s.ready = loadedReady
			if s.err == nil {
				b.countLoaded(s.t, 1)
			}
			b.mu.Unlock()
			if s.err == nil {
				b.listMaint(s.t)   // visited once by the next maintenance pass
				b.listMetrics(s.t) // and by the next metrics collection
			}
			close(ready)
			if now, ok := b.deps.Placement.OwnedEpoch(name); s.err == nil && (!ok || now != epoch) {
				// The bundle was unloaded (or lost) while the topic
				// loaded: the unload's sweep of the loaded topics may
				// have run before this one was ready, so it is closed
				// here. The check comes after ready is closed: an
				// unload that begins later sees the topic itself. The
				// bundle may even be owned here again by now (unloaded
				// away and back, another broker having written the
				// topic meanwhile): the epoch tells that ownership from
				// the one the load began under, and the copy loaded then
				// is stale.
				b.unloadTopic(ctx, s.t)
				return nil, fmt.Errorf("%w: %s (unloaded while loading)", ErrNotOwner, name)
			}
			if s.err != nil {
				b.mu.Lock()
				if b.topics[key] == s {
					delete(b.topics, key)
				}
				b.mu.Unlock()
			}
			return s.t, s.err
		}
		ready := s.ready
		b.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.err == nil {
			if s.t.isClosed() {
				// Being unloaded: wait for the slot to go and load again.
				b.waitGone(ctx, key, s)
				continue
			}
			return s.t, nil
		}
		// A failed load by someone else: try ourselves (it was removed).
		if errors.Is(s.err, ErrNotOwner) || errors.Is(s.err, ErrTopicNotFound) {
			return nil, s.err
		}
	}
}

func (b *Broker) waitGone(ctx context.Context, key string, s *topicSlot) {
	for ctx.Err() == nil {
		b.mu.Lock()
		cur := b.topics[key]
		b.mu.Unlock()
		if cur != s {
			return
		}
		select {
		case <-s.t.goneCh():
		case <-ctx.Done():
		}
	}
}

func (b *Broker) loadTopic(ctx context.Context, name topic.Name, key string, mode createMode) (*Topic, error) {
	if err := refuseTxnSystemTopic(name); err != nil { // transactions.go
		return nil, err
	}
	if !b.deps.Placement.Owns(name) {
		return nil, fmt.Errorf("%w: %s", ErrNotOwner, name)
	}
	pol, err := b.deps.Namespaces.Policy(ctx, name.NamespaceName())
	if err != nil {
		return nil, err
	}
	pol = b.withTopicPolicy(ctx, name, pol)
	if mode == applyingDelete {
		mode = mustExist
	} else if err := b.deleteGate(ctx, name, pol); err != nil { // fedelete.go
		return nil, err
	}
	if name.Domain == topic.NonPersistent {
		return newTopic(b, name, nil, pol), nil
	}
	mlName := key // slotKey: MLName(name), shared with the key
	if mode == replicaCreate {
		if err := b.refuseReplica(ctx, name); err != nil {
			return nil, err
		}
		mode = autoCreate
	}
	if mode == create || mode == autoCreate && pol.AutoCreate {
		if err := b.checkNewTopic(ctx, name, pol); err != nil {
			return nil, err
		}
	}
	if mode == mustExist || mode == autoCreate && !pol.AutoCreate {
		if ok, err := b.stored(ctx, name); err != nil {
			return nil, err
		} else if !ok {
			return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
		}
	}
	ml, err := mledger.OpenShared(ctx, b.ledgerDeps(), ledgerConfig(b.cfg.Ledger, pol), mlName)
	if err != nil {
		return nil, err
	}
	if ml.Created() {
		b.unmarkDeleted(ctx, name) // (a replica gets here only when refuseReplica let it)
	}
	t := newTopic(b, name, ml, pol)
	if err := t.load(ctx); err != nil {
		_ = ml.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	b.log.Info("topic loaded", "topic", name.String())
	return t, nil
}

// checkNewTopic applies the namespace's topic limit to a persistent topic
// about to be loaded with permission to create it: when it is not stored
// yet, and is not a partition of a partitioned topic (whose partitions
// were counted when it was created), it must fit.
func (b *Broker) checkNewTopic(ctx context.Context, name topic.Name, pol NamespacePolicy) error {
	max := b.maxTopics(pol)
	if max <= 0 {
		return nil
	}
	if ok, err := b.stored(ctx, name); err != nil || ok {
		return err
	}
	return b.checkTopicQuota(ctx, name.NamespaceName(), 1, max)
}

// stored reports whether persistent topic name exists in this region: its
// managed ledger's metadata is stored, or it is a partition of a
// partitioned topic that exists (whose partitions exist once it does).
func (b *Broker) stored(ctx context.Context, name topic.Name) (bool, error) {
	if _, err := b.deps.Meta.Get(ctx, mledger.TopicKey(b.cfg.Region, MLName(name))); err == nil {
		return true, nil
	} else if !errors.Is(err, metastore.ErrNotFound) {
		return false, err
	}
	if p := name.Partition(); p >= 0 {
		n, ok, err := b.deps.Namespaces.Partitions(ctx, name.Base())
		if err != nil {
			return false, err
		}
		return ok && p < n, nil
	}
	return false, nil
}

// unloadTopic closes t (clients are told to reconnect) and forgets it.
func (b *Broker) unloadTopic(ctx context.Context, t *Topic) error {
	err := t.close(ctx, true)
	b.mu.Lock()
	if key := slotKey(t.name); b.topics[key] != nil && b.topics[key].t == t {
		delete(b.topics, key)
		b.countLoaded(t, -1)
	}
	b.mu.Unlock()
	b.forgetMetrics(t)
	t.markGone()
	return err
}

// Unload unloads a topic (or each partition of a partitioned one) if it is
// loaded here; clients reconnect through a new lookup.
func (b *Broker) Unload(ctx context.Context, name topic.Name) error {
	if t := b.loadedTopic(name); t != nil {
		return b.unloadTopic(ctx, t)
	}
	return nil
}

// UnloadBundle unloads every loaded topic for which in reports true (the
// topics of a bundle this broker lost or gives away).
func (b *Broker) UnloadMatching(ctx context.Context, in func(topic.Name) bool) error {
	var errs []error
	for _, t := range b.loadedTopics() {
		if in(t.name) {
			errs = append(errs, b.unloadTopic(ctx, t))
		}
	}
	b.dropCoordinatorsMatching(in) // transactions.go
	return errors.Join(errs...)
}

// MLName is the managed ledger name of a persistent topic:
// tenant/namespace/persistent/local (topic.Name.StorageName, whose length
// topic.Parse bounds by the managed ledger's limit), so a namespace's
// topics share a metadata key prefix.
func MLName(name topic.Name) string { return name.StorageName() }

// slotKey is name's key in Broker.topics: a persistent topic's storage
// name (MLName: its managed ledger's name, so that the key, the
// managed ledger's name and the topic's name parts are one string), any
// other topic's full name (which has "://", so the two never meet).
func slotKey(name topic.Name) string {
	if name.Domain == topic.Persistent {
		return name.StorageName()
	}
	return name.String()
}

// nameOfKey is the name of slotKey key, its parts sharing key's bytes.
func nameOfKey(key string) (topic.Name, bool) {
	if strings.Contains(key, "://") {
		n, err := topic.Parse(key)
		return n, err == nil
	}
	p := strings.SplitN(key, "/", 4)
	if len(p) != 4 || p[2] != string(topic.Persistent) {
		return topic.Name{}, false
	}
	return topic.Name{Domain: topic.Persistent, Tenant: p[0], Namespace: p[1], Local: p[3]}, true
}

// Abort stops the broker as a crash would, for fault tests: listeners and
// connections close at once, topics are not unloaded and their managed
// ledgers are left open (the next owner recovers them), and nothing is
// released in the metadata store.
func (b *Broker) Abort() {
	b.mu.Lock()
	b.shutdown = true
	lns := b.listeners
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	b.cancel()
	for _, ln := range lns {
		ln.Close()
	}
	for _, c := range conns {
		c.nc.Close()
		c.close()
	}
}
