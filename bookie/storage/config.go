package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// Config configures a Store. Only JournalDir and LedgerDir are required; every
// other zero value means the documented default.
type Config struct {
	// JournalDir holds the journal files. Put it on the fastest fsync device.
	JournalDir string
	// LedgerDir holds entry logs, index files and the checkpoint. It may be
	// on another disk than JournalDir (or be the same directory).
	LedgerDir string
	// FS is the filesystem; nil means vfs.Default.
	FS vfs.FS
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger

	// GroupCommitMaxDelay is how long the journal waits for more adds to
	// join a group before the fdatasync. 0 (the default) or a negative
	// value means do not wait: sync as soon as the queue is momentarily
	// empty, so a group is what queued during the previous sync.
	GroupCommitMaxDelay time.Duration
	// GroupCommitMaxBytes syncs a group once this many bytes are buffered.
	// 0 means 1 MiB.
	GroupCommitMaxBytes int
	// JournalFileMaxBytes rotates to a new journal file past this size.
	// 0 means 256 MiB.
	JournalFileMaxBytes int64
	// WriteCacheMaxBytes starts a flush to ledger storage once the write
	// cache holds this much; adds are held back (their acks delayed) while
	// one full cache is being flushed and another has filled up. 0 means
	// 64 MiB.
	WriteCacheMaxBytes int64
	// FlushInterval is the period of the background flush + checkpoint.
	// 0 means 1s.
	FlushInterval time.Duration
	// EntryLogMaxBytes rotates to a new entry log past this size. 0 means
	// 256 MiB.
	EntryLogMaxBytes int64
	// CompactionThreshold compacts an entry log whose live fraction falls
	// below it. 0 means 0.5. Must be in [0, 1].
	CompactionThreshold float64
	// CompactionInterval is the period of the background compactor. 0 means
	// 1 minute; a negative value disables it (Compact still works).
	CompactionInterval time.Duration
	// MaxEntrySize is the largest entry Add accepts. 0 means 6 MiB; at most
	// MaxEntrySizeLimit.
	MaxEntrySize int
	// Observer is told about group commits, flushes and reads (for
	// metrics); nil means nobody is.
	Observer Observer
}

// Observer receives measurements of the store's work. Its methods are
// called on the store's goroutines (the journal goroutine, the flusher,
// readers): they must be cheap and must not block or call the store.
type Observer interface {
	// JournalSynced reports one group commit: writing and fdatasyncing the
	// batch took d and made records journal records durable.
	JournalSynced(d time.Duration, records int)
	// Flushed reports one flush of the write cache to entry logs and index
	// files, checkpoint included, that took d.
	Flushed(d time.Duration)
	// Read reports one Read that found its entry: fromMemory when the write
	// cache served it, false when it came from an entry log.
	Read(fromMemory bool)
}

type nopObserver struct{}

func (nopObserver) JournalSynced(time.Duration, int) {}
func (nopObserver) Flushed(time.Duration)            {}
func (nopObserver) Read(bool)                        {}

// Defaults for the zero values of Config.
const (
	DefaultGroupCommitMaxBytes = 1 << 20
	DefaultJournalFileMaxBytes = 256 << 20
	DefaultWriteCacheMaxBytes  = 64 << 20
	DefaultFlushInterval       = time.Second
	DefaultEntryLogMaxBytes    = 256 << 20
	DefaultCompactionThreshold = 0.5
	DefaultCompactionInterval  = time.Minute
	DefaultMaxEntrySize        = 6 << 20
	// MaxEntrySizeLimit bounds MaxEntrySize: the on-disk decoders refuse
	// records larger than this whatever the configuration, so a corrupt
	// length can never make them allocate more.
	MaxEntrySizeLimit = maxFramePayload - entryPrefixSize
	// MaxEntryID is the largest entry id the index can address.
	MaxEntryID = 1<<32 - 1
)

// Validate reports every problem with c at once, naming the fields.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("storage: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.JournalDir == "" {
		bad("JournalDir", "required")
	}
	if c.LedgerDir == "" {
		bad("LedgerDir", "required")
	}
	if c.GroupCommitMaxBytes < 0 {
		bad("GroupCommitMaxBytes", "%d is negative", c.GroupCommitMaxBytes)
	}
	if c.JournalFileMaxBytes < 0 {
		bad("JournalFileMaxBytes", "%d is negative", c.JournalFileMaxBytes)
	}
	if c.WriteCacheMaxBytes < 0 {
		bad("WriteCacheMaxBytes", "%d is negative", c.WriteCacheMaxBytes)
	}
	if c.FlushInterval < 0 {
		bad("FlushInterval", "%v is negative", c.FlushInterval)
	}
	if c.EntryLogMaxBytes < 0 {
		bad("EntryLogMaxBytes", "%d is negative", c.EntryLogMaxBytes)
	}
	if math.IsNaN(c.CompactionThreshold) || c.CompactionThreshold < 0 || c.CompactionThreshold > 1 {
		bad("CompactionThreshold", "%v is not in [0, 1]", c.CompactionThreshold)
	}
	if c.MaxEntrySize < 0 || c.MaxEntrySize > MaxEntrySizeLimit {
		bad("MaxEntrySize", "%d is not in [0, %d]", c.MaxEntrySize, MaxEntrySizeLimit)
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.GroupCommitMaxBytes == 0 {
		c.GroupCommitMaxBytes = DefaultGroupCommitMaxBytes
	}
	if c.JournalFileMaxBytes == 0 {
		c.JournalFileMaxBytes = DefaultJournalFileMaxBytes
	}
	if c.WriteCacheMaxBytes == 0 {
		c.WriteCacheMaxBytes = DefaultWriteCacheMaxBytes
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.EntryLogMaxBytes == 0 {
		c.EntryLogMaxBytes = DefaultEntryLogMaxBytes
	}
	if c.CompactionThreshold == 0 {
		c.CompactionThreshold = DefaultCompactionThreshold
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = DefaultCompactionInterval
	}
	if c.MaxEntrySize == 0 {
		c.MaxEntrySize = DefaultMaxEntrySize
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}
