package bookie

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/bookie/storage"
	"github.com/isobar-mq/isobar/bookie/vfs"
	"github.com/isobar-mq/isobar/internal/tlsfiles"
	"github.com/isobar-mq/isobar/metastore"
)

// Config configures a bookie. The zero value of every optional field means
// the documented default.
type Config struct {
	// ID names the bookie in the metadata store and in ledger metadata. It
	// is fixed at the bookie's first start, when it is written, with a
	// random instance id, into a cookie in both directories and in the
	// metadata store (docs/format/cookie.md); later starts read it from the
	// cookie, and a configured ID that differs from it is refused. Empty
	// means: at a first start, a generated one (<hostname>-<8 hex digits>);
	// for directories written by an earlier version (data, no cookie), the
	// advertised address, the id those versions used. The address may change
	// between starts: the registration maps the id to the current one.
	ID string `yaml:"id"`
	// Region is the region whose metadata store the bookie registers in.
	Region string `yaml:"region"`
	// ListenAddr is host:port to listen on; empty means 127.0.0.1:3181.
	ListenAddr string `yaml:"listenAddr"`
	// AdvertiseAddr is the address clients dial; empty means the listener's address.
	AdvertiseAddr string `yaml:"advertiseAddr"`
	// Rack labels the bookie's failure domain; ensembles spread across racks.
	Rack string `yaml:"rack"`
	// Group is the bookie group the bookie belongs to, for namespaces'
	// bookie affinity (docs/ledger.md); empty means none. The region's
	// racks-info (/admin/v2/bookies/racks-info) overrides it, and its rack.
	Group string `yaml:"group"`
	// TLS, when its certificate and key are set, makes the listener serve
	// the bookie protocol over TLS only; with trustCertsFile (the region's
	// CA) and requireClientCert, ledger clients must present a certificate
	// that chains to it (mutual TLS). The files are read again when they
	// change, so certificates rotate without a restart.
	TLS tlsfiles.Config `yaml:"tls"`
	// JournalDir holds the journal. Required.
	JournalDir string `yaml:"journalDir"`
	// LedgerDir holds entry logs and the index; may be another disk. Required.
	LedgerDir string `yaml:"ledgerDir"`
	// ReadOnlyThreshold is the used fraction of the ledger disk at which the
	// bookie turns read-only; zero means 0.95.
	ReadOnlyThreshold float64 `yaml:"readOnlyThreshold"`
	// MaxFrameSize bounds a protocol frame; zero means 6 MiB.
	MaxFrameSize int `yaml:"maxFrameSize"`
	// MaxEntrySize bounds one entry; zero means MaxFrameSize minus the add header.
	MaxEntrySize int `yaml:"maxEntrySize"`
	// MaxInFlightPerConn bounds requests outstanding on one connection; when
	// reached the bookie stops reading from it. Zero means 4096.
	MaxInFlightPerConn int `yaml:"maxInFlightPerConn"`
	// ReadWorkers bounds the entry reads the bookie serves at once, over
	// all connections (BookKeeper's numReadWorkerThreads): a catch-up
	// reader's reads wait for a worker instead of filling the disk's queue
	// ahead of the journal's writes and syncs. Zero means 4.
	ReadWorkers int `yaml:"readWorkers"`
	// RegistrationTTL is the lease TTL of the registration; zero means 10s.
	RegistrationTTL time.Duration `yaml:"registrationTTL"`
	// UsageInterval is how often disk usage and read-only state are refreshed; zero means 5s.
	UsageInterval time.Duration `yaml:"usageInterval"`
	// GroupCommitMaxDelay is how long the journal waits for more adds to
	// join a group before its fdatasync. Zero (the default) or negative
	// syncs as soon as the journal is idle: a group is then what queued
	// during the previous sync, which at low rates saves each add the
	// wait and at high rates forms large groups anyway.
	GroupCommitMaxDelay time.Duration `yaml:"groupCommitMaxDelay"`
	// GroupCommitMaxBytes syncs a group once this many bytes are buffered; zero means the storage default.
	GroupCommitMaxBytes int `yaml:"groupCommitMaxBytes"`
	// WriteCacheMaxBytes triggers a flush to ledger storage; zero means the storage default.
	WriteCacheMaxBytes int64 `yaml:"writeCacheMaxBytes"`
	// FlushInterval is the periodic flush and checkpoint; zero means the storage default.
	FlushInterval time.Duration `yaml:"flushInterval"`
	// JournalFileMaxBytes rotates journal files; zero means the storage default.
	JournalFileMaxBytes int64 `yaml:"journalFileMaxBytes"`
	// EntryLogMaxBytes rotates entry logs; zero means the storage default.
	EntryLogMaxBytes int64 `yaml:"entryLogMaxBytes"`
	// CompactionThreshold compacts an entry log whose live fraction falls
	// below it; zero means the storage default (0.5).
	CompactionThreshold float64 `yaml:"compactionThreshold"`
	// CompactionInterval is how often compaction runs; zero means the storage
	// default, negative disables background compaction.
	CompactionInterval time.Duration `yaml:"compactionInterval"`
}

// Deps are a bookie's live dependencies (Config holds settings only).
type Deps struct {
	// Meta is the region's metadata store the bookie registers in; nil
	// registers nowhere (tests of the protocol alone).
	Meta metastore.Meta
	// Logger; nil discards.
	Logger *slog.Logger
	// FS is the filesystem under the storage; nil means the OS. Tests put
	// a fault-injecting one here.
	FS vfs.FS
	// MeterProvider receives the bookie's metrics (bookie/metrics.go); nil
	// means none are recorded.
	MeterProvider metric.MeterProvider
}

// DefaultReadWorkers is Config.ReadWorkers' default.
const DefaultReadWorkers = 4

func (c Config) withDefaults() Config {
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:3181"
	}
	if c.ReadOnlyThreshold == 0 {
		c.ReadOnlyThreshold = 0.95
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = proto.DefaultMaxFrameSize
	}
	if c.MaxEntrySize == 0 {
		c.MaxEntrySize = c.MaxFrameSize - proto.HeaderSize - 16
	}
	if c.MaxInFlightPerConn == 0 {
		c.MaxInFlightPerConn = 4096
	}
	if c.ReadWorkers == 0 {
		c.ReadWorkers = DefaultReadWorkers
	}
	if c.RegistrationTTL == 0 {
		c.RegistrationTTL = 10 * time.Second
	}
	if c.UsageInterval == 0 {
		c.UsageInterval = 5 * time.Second
	}
	return c
}

// Validate reports every problem at once, naming the fields.
func (c Config) Validate() error {
	var errs []error
	if c.JournalDir == "" {
		errs = append(errs, errors.New("bookie.journalDir: required"))
	}
	if c.LedgerDir == "" {
		errs = append(errs, errors.New("bookie.ledgerDir: required"))
	}
	if c.ListenAddr != "" {
		if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
			errs = append(errs, fmt.Errorf("bookie.listenAddr: %q: %v", c.ListenAddr, err))
		}
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			errs = append(errs, fmt.Errorf("bookie.advertiseAddr: %q: %v", c.AdvertiseAddr, err))
		}
	}
	if c.Group != "" {
		if err := racks.ValidGroup(c.Group); err != nil {
			errs = append(errs, fmt.Errorf("bookie.group: %w", err))
		}
	}
	if err := c.TLS.Validate(); err != nil {
		// Each problem named bookie.tls: ..., as the other fields are.
		if many, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range many.Unwrap() {
				errs = append(errs, fmt.Errorf("bookie.%w", e))
			}
		} else {
			errs = append(errs, fmt.Errorf("bookie.%w", err))
		}
	}
	if c.ReadOnlyThreshold < 0 || c.ReadOnlyThreshold > 1 || math.IsNaN(c.ReadOnlyThreshold) {
		errs = append(errs, fmt.Errorf("bookie.readOnlyThreshold: %v is not within 0..1", c.ReadOnlyThreshold))
	}
	if c.MaxFrameSize < 0 || (c.MaxFrameSize > 0 && c.MaxFrameSize < 1024) || c.MaxFrameSize > 256<<20 {
		errs = append(errs, fmt.Errorf("bookie.maxFrameSize: %d is not within 1 KiB..256 MiB", c.MaxFrameSize))
	}
	if c.MaxEntrySize < 0 || (c.MaxFrameSize > 0 && c.MaxEntrySize > c.MaxFrameSize) {
		errs = append(errs, fmt.Errorf("bookie.maxEntrySize: %d must be positive and at most maxFrameSize", c.MaxEntrySize))
	}
	if c.MaxInFlightPerConn < 0 {
		errs = append(errs, fmt.Errorf("bookie.maxInFlightPerConn: %d is negative", c.MaxInFlightPerConn))
	}
	if c.ReadWorkers < 0 {
		errs = append(errs, fmt.Errorf("bookie.readWorkers: %d is negative", c.ReadWorkers))
	}
	for name, d := range map[string]time.Duration{
		"registrationTTL": c.RegistrationTTL, "usageInterval": c.UsageInterval, "flushInterval": c.FlushInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("bookie.%s: %v is negative", name, d))
		}
	}
	if c.RegistrationTTL > 0 && c.RegistrationTTL < time.Second {
		errs = append(errs, fmt.Errorf("bookie.registrationTTL: %v is under the 1s etcd lease granularity", c.RegistrationTTL))
	}
	if c.GroupCommitMaxBytes < 0 || c.WriteCacheMaxBytes < 0 {
		errs = append(errs, errors.New("bookie.groupCommitMaxBytes, bookie.writeCacheMaxBytes: must not be negative"))
	}
	if err := c.storageConfig(Deps{}).Validate(); err != nil && c.JournalDir != "" && c.LedgerDir != "" {
		// The storage names its fields "storage: Config.CompactionThreshold";
		// they are this section's keys.
		for _, e := range splitErrors(err) {
			msg := e.Error()
			if field, ok := strings.CutPrefix(msg, "storage: Config."); ok && field != "" {
				msg = "bookie." + strings.ToLower(field[:1]) + field[1:]
			}
			errs = append(errs, errors.New(msg))
		}
	}
	return errors.Join(errs...)
}

func (c Config) storageConfig(d Deps) storage.Config {
	return storage.Config{
		JournalDir:          c.JournalDir,
		LedgerDir:           c.LedgerDir,
		FS:                  d.FS,
		Logger:              d.Logger,
		GroupCommitMaxDelay: c.GroupCommitMaxDelay,
		GroupCommitMaxBytes: c.GroupCommitMaxBytes,
		WriteCacheMaxBytes:  c.WriteCacheMaxBytes,
		FlushInterval:       c.FlushInterval,
		JournalFileMaxBytes: c.JournalFileMaxBytes,
		EntryLogMaxBytes:    c.EntryLogMaxBytes,
		CompactionThreshold: c.CompactionThreshold,
		CompactionInterval:  c.CompactionInterval,
		MaxEntrySize:        c.MaxEntrySize,
	}
}

// splitErrors returns the errors err joins (errors.Join), each on its
// own.
func splitErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []error{err}
}
