package replicator

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/isobar-mq/isobar/globalconfig/deletes"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/replicator/frame"
)

// Config configures a Worker.
type Config struct {
	// Region is the local region; it is also its cluster name in the
	// replication clusters of namespaces. Required.
	Region string `yaml:"region"`
	// ID names the worker among its region's workers (consumer and
	// producer names, registration key). Required.
	ID string `yaml:"id"`
	// ServiceURL is the region's brokers' Pulsar URL
	// (pulsar://host:port[,host:port...]). Required.
	ServiceURL string `yaml:"serviceUrl"`
	// TLSTrustCertsFile is the PEM bundle of CAs the brokers' certificates
	// chain to, when ServiceURL is pulsar+ssl:// (empty: the system's).
	// TLSCertFile and TLSKeyFile are the worker's client certificate, for
	// brokers that authenticate by certificate.
	TLSTrustCertsFile string `yaml:"tlsTrustCertsFile"`
	TLSCertFile       string `yaml:"tlsCertFile"`
	TLSKeyFile        string `yaml:"tlsKeyFile"`
	// TokenFile holds the token the worker authenticates to its brokers
	// with (its role must be among their auth.replicatorRoles or
	// superUserRoles); read at each connection, so it can be replaced.
	// Empty sends none.
	TokenFile string `yaml:"tokenFile"`

	// FrameEntries, FrameBytes and FrameDelay bound a frame: at most
	// FrameEntries entries (0: 1000) and FrameBytes raw bytes (0: 4 MiB).
	// A frame takes the entries that have arrived and waits FrameDelay
	// after its first one for more (0: no wait; one frame is in flight per
	// stream, so entries gather while the previous frame travels).
	FrameEntries int           `yaml:"frameEntries"`
	FrameBytes   int           `yaml:"frameBytes"`
	FrameDelay   time.Duration `yaml:"frameDelay"`
	// ReceiverQueue is the permits (messages, not entries: a batch counts
	// its messages) of a stream's subscription; 0 means 10000. It bounds
	// how far a stream reads ahead of the frame in flight.
	ReceiverQueue int `yaml:"receiverQueue"`
	// RequestTimeout bounds one frame's round trip to the remote
	// region (0: 15s).
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// ScanInterval is how often the worker re-lists topics and policies
	// (0: 1s).
	ScanInterval time.Duration `yaml:"scanInterval"`
	// LeaseTTL is the worker registration's lease (0: 5s); a dead
	// worker's streams move after it.
	LeaseTTL time.Duration `yaml:"leaseTTL"`
	// MaxBackoff caps the retry delay of a failing stream (0: 5s).
	MaxBackoff time.Duration `yaml:"maxBackoff"`
	// ProbeInterval paces the probes by which a stream learns whether the
	// remote region's sinks are reachable (0: 500ms). A frame unanswered
	// for ProbeInterval is probed every ProbeInterval: when no sink is
	// reachable (NATS has no responders) the frame is given up at once
	// rather than at RequestTimeout; an answer, or none within
	// ProbeInterval, keeps it waiting. While no sink is reachable the
	// stream probes at most every ProbeInterval and sends the frame again
	// once one answers.
	ProbeInterval time.Duration `yaml:"probeInterval"`
	// SinkConcurrency bounds the frames the sink applies at once (0: 16).
	SinkConcurrency int `yaml:"sinkConcurrency"`
	// MaxFrameBytes bounds a received frame, compressed (0: 8 MiB).
	MaxFrameBytes int `yaml:"maxFrameBytes"`

	// DictDisabled turns per-namespace zstd dictionaries off: every
	// frame is compressed with plain zstd (version 1 frames, which
	// workers that predate dictionaries read). By default a worker
	// trains a dictionary for each namespace it sends and carries it in
	// the stream (docs/replication.md, "Dictionaries").
	DictDisabled bool `yaml:"dictDisabled"`
	// DictSamples is how many of a namespace's entries a dictionary is
	// trained on (0: 256, the first 8 KiB of each; at least 8).
	DictSamples int `yaml:"dictSamples"`
	// DictBytes is a trained dictionary's largest size (0: 32 KiB; at
	// most 128 KiB, what a sink accepts).
	DictBytes int `yaml:"dictBytes"`
	// DictDrift: a namespace's dictionary is retrained when its gain
	// (the size of frames with it over their size without it, measured
	// on every 10th frame) is worse than after training by more than
	// DictDrift (0: 0.05, five points).
	DictDrift float64 `yaml:"dictDrift"`
	// DictLevel is the zstd level of frames compressed with a
	// dictionary: "fastest" (the default, as plain frames), "default" or
	// "better". On the payload set at 100 messages per frame, "better"
	// sends 6% fewer bytes than "fastest" and takes about 5× its CPU
	// (docs/BENCHMARKS.md, "Dictionaries").
	DictLevel string `yaml:"dictLevel"`
	// DictCache bounds the dictionaries a sink holds (0: 64); the least
	// recently used is dropped, and a frame naming it is refused and sent
	// again carrying it.
	DictCache int `yaml:"dictCache"`
}

// Deps are a worker's live dependencies.
type Deps struct {
	// Transport carries frames to other regions and the sink's requests
	// from them: NATSTransport of the connection to the region's NATS
	// server (part of the federation's super-cluster). Required; the
	// worker does not close it.
	Transport Transport
	// Meta is the local metadata store: topics are discovered under
	// /isobar/<region>/topics/ and workers register under
	// /isobar/<region>/replicators/. Required.
	Meta metastore.Meta
	// Policies answers which clusters a namespace replicates to (usually
	// read through the global configuration cache): a *policy.Store.
	// Required.
	Policies Policies
	// Source reads the streams' replication cursors and Sink writes what
	// the sink receives, both in the region's brokers. Nil: the worker's
	// own Pulsar-protocol client to Config.ServiceURL (closed with the
	// worker).
	Source Source
	Sink   Sink
	// Deletes are the federation's delete records: a sink refuses
	// entries of a copy that is being or has been deleted (package
	// deletes). Nil: no such check.
	Deletes *deletes.Store
	// Logger; nil discards. It names the worker already (roles adds
	// replicator=<id>): the worker adds no key of its own to it.
	Logger *slog.Logger
	// MeterProvider and TracerProvider come from package observability;
	// nil means no-op providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

func (d Deps) validate() error {
	var errs []error
	if d.Transport == nil {
		errs = append(errs, errors.New("replicator: transport (nats connection): required"))
	}
	if d.Meta == nil {
		errs = append(errs, errors.New("replicator: metadata store: required"))
	}
	if d.Policies == nil {
		errs = append(errs, errors.New("replicator: policy store: required"))
	}
	return errors.Join(errs...)
}

func (d Deps) withDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.MeterProvider == nil {
		d.MeterProvider = noopmetric.NewMeterProvider()
	}
	if d.TracerProvider == nil {
		d.TracerProvider = nooptrace.NewTracerProvider()
	}
	return d
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Region == "" {
		errs = append(errs, errors.New("replicator.region: required"))
	}
	if c.ID == "" {
		errs = append(errs, errors.New("replicator.id: required"))
	}
	if c.ServiceURL == "" {
		errs = append(errs, errors.New("replicator.serviceUrl: required"))
	}
	for name, v := range map[string]int{"frameEntries": c.FrameEntries, "receiverQueue": c.ReceiverQueue, "frameBytes": c.FrameBytes, "sinkConcurrency": c.SinkConcurrency, "maxFrameBytes": c.MaxFrameBytes, "dictSamples": c.DictSamples, "dictBytes": c.DictBytes, "dictCache": c.DictCache} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("replicator.%s: %d is negative", name, v))
		}
	}
	for name, v := range map[string]time.Duration{"frameDelay": c.FrameDelay, "requestTimeout": c.RequestTimeout, "scanInterval": c.ScanInterval, "leaseTTL": c.LeaseTTL, "maxBackoff": c.MaxBackoff, "probeInterval": c.ProbeInterval} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("replicator.%s: %v is negative", name, v))
		}
	}
	if c.DictBytes > frame.DefaultMaxDictBytes {
		errs = append(errs, fmt.Errorf("replicator.dictBytes: %d exceeds %d, the largest dictionary a sink accepts", c.DictBytes, frame.DefaultMaxDictBytes))
	}
	if c.DictSamples > 0 && c.DictSamples < 8 {
		errs = append(errs, fmt.Errorf("replicator.dictSamples: %d is under 8, too few to train on", c.DictSamples))
	}
	if _, ok := dictLevels[c.DictLevel]; !ok {
		errs = append(errs, fmt.Errorf("replicator.dictLevel: %q is not fastest, default or better", c.DictLevel))
	}
	if c.DictDrift < 0 || c.DictDrift >= 1 {
		errs = append(errs, fmt.Errorf("replicator.dictDrift: %v is not in [0, 1)", c.DictDrift))
	}
	if c.LeaseTTL > 0 && c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("replicator.leaseTTL: %v is under the 1s etcd lease granularity", c.LeaseTTL))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.FrameEntries, 1000)
	def(&c.FrameBytes, 4<<20)
	def(&c.ReceiverQueue, 10000)
	def(&c.SinkConcurrency, 16)
	def(&c.MaxFrameBytes, 8<<20)
	def(&c.DictCache, 64)
	defD(&c.RequestTimeout, 15*time.Second)
	defD(&c.ScanInterval, time.Second)
	defD(&c.LeaseTTL, 5*time.Second)
	defD(&c.MaxBackoff, 5*time.Second)
	defD(&c.ProbeInterval, 500*time.Millisecond)
	return c
}

// Subject is the NATS subject of frames from source to dest.
func Subject(dest, source string) string { return "isobar.repl." + dest + "." + source }

// KindSubState is the HeaderKind of a frame of subscription-state records
// (replication.SubStateProperty) rather than entries.
const KindSubState = "substate"

// KindProbe is the HeaderKind of a probe: an empty request that a sink
// answers at once, by which a source learns that the remote region's
// sinks are reachable.
const KindProbe = "probe"

// SinkQueue is the NATS queue group of a region's sink workers.
const SinkQueue = "isobar-sink"

// NATS headers of a frame request.
const (
	HeaderSource = "Isobar-Source"    // source region
	HeaderTopic  = "Isobar-Topic"     // full topic name
	HeaderFirst  = "Isobar-First"     // first entry's source position, ledger:entry
	HeaderLast   = "Isobar-Last"      // last entry's source position
	HeaderCount  = "Isobar-Count"     // entries in the frame
	HeaderRaw    = "Isobar-Raw-Bytes" // uncompressed body size
	HeaderError  = "Isobar-Error"     // set on a reply that refuses the frame
	// HeaderErrorCode is set beside HeaderError when the sender can
	// act on the refusal: CodeUnknownDict.
	HeaderErrorCode = "Isobar-Error-Code"
	HeaderKind      = "Isobar-Kind" // KindSubState, KindProbe, or absent for entries
)
