package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/metastore"
)

// MetadataVersion is the metadata format version this package writes and reads.
const MetadataVersion = 1

// MaxEnsemble bounds the ensemble size (quorum bookkeeping uses 64-bit masks).
const MaxEnsemble = 64

// State is a ledger's life-cycle state.
type State string

// Ledger states. A ledger is written while open; recovery moves it to
// in-recovery (the writer is fenced out) and then closed; closed is final.
const (
	StateOpen       State = "open"
	StateInRecovery State = "in-recovery"
	StateClosed     State = "closed"
)

// Segment is one ensemble of a ledger: the bookies that store entries from
// FirstEntry up to the next segment's first entry (or the end).
type Segment struct {
	FirstEntry int64    `json:"firstEntry"`
	Bookies    []string `json:"bookies"`
}

// Metadata is what the metadata store keeps about a ledger under
// /isobar/<region>/ledgers/<id> (docs/format/ledger-metadata.md).
type Metadata struct {
	Version      int   `json:"version"`
	EnsembleSize int   `json:"ensembleSize"`
	WriteQuorum  int   `json:"writeQuorum"`
	AckQuorum    int   `json:"ackQuorum"`
	State        State `json:"state"`
	// LastEntry is the id of the last entry of a closed ledger (-1: empty);
	// -1 while the ledger is not closed.
	LastEntry int64 `json:"lastEntry"`
	// Length is the total data length of a closed ledger; 0 before.
	Length     uint64            `json:"length"`
	Ensembles  []Segment         `json:"ensembles"`
	CreatedAt  time.Time         `json:"createdAt"`
	Properties map[string]string `json:"properties,omitempty"`
	// Affinity, when set, confines the ledger's ensembles (the first and
	// every replacement) to bookie groups.
	Affinity *Affinity `json:"affinity,omitempty"`
}

// LedgerKey is the metadata key of ledger id.
func LedgerKey(region string, id uint64) string {
	return metastore.RegionPrefix(region) + "ledgers/" + strconv.FormatUint(id, 10)
}

// LedgerIDKey is the counter ledger ids are drawn from.
func LedgerIDKey(region string) string { return metastore.RegionPrefix(region) + "ledger-id" }

// A ledger id is a region's tag above its counter: the low
// ledgerCounterBits bits count the region's ledgers, the bits above them
// say which region made it. Ids therefore grow in each region (counters
// from before tags existed are smaller than every tagged one) and never
// collide between regions, so a message id (ledger, entry) that a client
// got in one region is never mistaken for another region's entry: a
// broker recognises it and translates it (docs/failover.md).
const ledgerCounterBits = 40

// RegionTag is a region's tag in the ledger ids it makes: 1 to 2^22.
func RegionTag(region string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(region))
	return 1 + uint64(h.Sum32())%(1<<22)
}

// LedgerID is region's n-th ledger id.
func LedgerID(region string, n uint64) (uint64, error) {
	if n >= 1<<ledgerCounterBits {
		return 0, fmt.Errorf("ledger: region %s has made %d ledgers, at most %d", region, n, uint64(1)<<ledgerCounterBits-1)
	}
	return RegionTag(region)<<ledgerCounterBits | n, nil
}

// TagOf returns the region tag of a ledger id (0 for an id made before
// tags existed).
func TagOf(id int64) uint64 { return uint64(id) >> ledgerCounterBits }

// BookiesPrefix is where bookies register.
func BookiesPrefix(region string) string { return proto.BookiesPrefix(metastore.RegionPrefix(region)) }

// checkQuorums reports what is wrong with an ensemble size and quorums.
func checkQuorums(e, qw, qa int) []error {
	var errs []error
	if e < 1 || e > MaxEnsemble {
		errs = append(errs, fmt.Errorf("ensemble size %d is not within 1..%d", e, MaxEnsemble))
	}
	if qw < 1 || qw > e {
		errs = append(errs, fmt.Errorf("write quorum %d is not within 1..ensemble size %d", qw, e))
	}
	if qa < 1 || qa > qw {
		errs = append(errs, fmt.Errorf("ack quorum %d is not within 1..write quorum %d", qa, qw))
	}
	return errs
}

// Validate checks the metadata's internal consistency.
func (m *Metadata) Validate() error {
	var errs []error
	if m.Version != MetadataVersion {
		errs = append(errs, fmt.Errorf("version %d is not %d", m.Version, MetadataVersion))
	}
	errs = append(errs, checkQuorums(m.EnsembleSize, m.WriteQuorum, m.AckQuorum)...)
	switch m.State {
	case StateOpen, StateInRecovery:
		if m.LastEntry != -1 {
			errs = append(errs, fmt.Errorf("state %s with last entry %d (want -1)", m.State, m.LastEntry))
		}
	case StateClosed:
		if m.LastEntry < -1 {
			errs = append(errs, fmt.Errorf("last entry %d is below -1", m.LastEntry))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown state %q", m.State))
	}
	if a := m.Affinity; a != nil {
		if err := a.validate(); err != nil {
			errs = append(errs, err)
		} else if a.IsZero() {
			errs = append(errs, errors.New("affinity: no groups"))
		}
	}
	if len(m.Ensembles) == 0 {
		errs = append(errs, errors.New("no ensembles"))
	}
	for i, s := range m.Ensembles {
		if i == 0 && s.FirstEntry != 0 {
			errs = append(errs, fmt.Errorf("ensembles[0] starts at entry %d, not 0", s.FirstEntry))
		}
		if i > 0 && s.FirstEntry <= m.Ensembles[i-1].FirstEntry {
			errs = append(errs, fmt.Errorf("ensembles[%d] starts at entry %d, not after %d", i, s.FirstEntry, m.Ensembles[i-1].FirstEntry))
		}
		if len(s.Bookies) != m.EnsembleSize {
			errs = append(errs, fmt.Errorf("ensembles[%d] has %d bookies, ensemble size is %d", i, len(s.Bookies), m.EnsembleSize))
		}
		for j, b := range s.Bookies {
			if b == "" {
				errs = append(errs, fmt.Errorf("ensembles[%d].bookies[%d] is empty", i, j))
			} else if slices.Index(s.Bookies, b) != j {
				errs = append(errs, fmt.Errorf("ensembles[%d] lists bookie %s twice", i, b))
			}
		}
	}
	return errors.Join(errs...)
}

// EncodeMetadata validates and encodes metadata as JSON.
func EncodeMetadata(m *Metadata) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("ledger: invalid metadata: %w", err)
	}
	return json.Marshal(m)
}

// DecodeMetadata decodes and validates metadata read from the store.
func DecodeMetadata(b []byte) (Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return Metadata{}, fmt.Errorf("ledger: undecodable metadata: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Metadata{}, fmt.Errorf("ledger: invalid metadata: %w", err)
	}
	return m, nil
}

// Clone returns a deep copy.
func (m *Metadata) Clone() Metadata {
	c := *m
	c.Ensembles = make([]Segment, len(m.Ensembles))
	for i, s := range m.Ensembles {
		c.Ensembles[i] = Segment{FirstEntry: s.FirstEntry, Bookies: slices.Clone(s.Bookies)}
	}
	if m.Properties != nil {
		c.Properties = make(map[string]string, len(m.Properties))
		for k, v := range m.Properties {
			c.Properties[k] = v
		}
	}
	if m.Affinity != nil {
		a := m.Affinity.clone()
		c.Affinity = &a
	}
	return c
}

// affinity is the ledger's affinity; the zero value when it has none.
func (m *Metadata) affinity() Affinity {
	if m.Affinity == nil {
		return Affinity{}
	}
	return *m.Affinity
}

// SegmentFor returns the ensemble that stores entry.
func (m *Metadata) SegmentFor(entry int64) Segment {
	for i := len(m.Ensembles) - 1; i > 0; i-- {
		if m.Ensembles[i].FirstEntry <= entry {
			return m.Ensembles[i]
		}
	}
	return m.Ensembles[0]
}

// Last returns the current (last) ensemble.
func (m *Metadata) Last() Segment { return m.Ensembles[len(m.Ensembles)-1] }

// AllBookies lists every bookie named by any ensemble, once, in order of appearance.
func (m *Metadata) AllBookies() []string {
	var out []string
	for _, s := range m.Ensembles {
		for _, b := range s.Bookies {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// WithEnsembleChange returns a copy of m whose ensemble from entry start on
// has the bookies of replace (ensemble index → new bookie) swapped in. When
// start is the current ensemble's first entry that ensemble is rewritten in
// place (no entry was acknowledged on it); otherwise a segment is appended.
// It is pure: the caller writes the result with compare-and-swap.
func (m *Metadata) WithEnsembleChange(start int64, replace map[int]string) (Metadata, error) {
	last := m.Last()
	if start < last.FirstEntry {
		return Metadata{}, fmt.Errorf("ledger: ensemble change at entry %d is before the current ensemble's first entry %d", start, last.FirstEntry)
	}
	if len(replace) == 0 {
		return Metadata{}, errors.New("ledger: ensemble change replaces no bookie")
	}
	bookies := slices.Clone(last.Bookies)
	for idx, b := range replace {
		if idx < 0 || idx >= len(bookies) {
			return Metadata{}, fmt.Errorf("ledger: ensemble change: index %d out of range", idx)
		}
		bookies[idx] = b
	}
	for i, b := range bookies {
		if slices.Index(bookies, b) != i {
			return Metadata{}, fmt.Errorf("ledger: ensemble change would list bookie %s twice", b)
		}
	}
	n := m.Clone()
	if start == last.FirstEntry {
		n.Ensembles[len(n.Ensembles)-1].Bookies = bookies
	} else {
		n.Ensembles = append(n.Ensembles, Segment{FirstEntry: start, Bookies: bookies})
	}
	return n, nil
}

// sameEnsembles reports whether two metadata versions list the same ensembles.
func sameEnsembles(a, b []Segment) bool {
	return slices.EqualFunc(a, b, func(x, y Segment) bool {
		return x.FirstEntry == y.FirstEntry && slices.Equal(x.Bookies, y.Bookies)
	})
}
