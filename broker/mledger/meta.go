package mledger

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
	"github.com/isobar-mq/isobar/metastore"
)

// MetaVersion is the version of the topic metadata JSON this package writes.
const MetaVersion = 1

// MaxNameLen bounds a managed ledger's and a cursor's name, in bytes.
const MaxNameLen = 256

// Ledger states in the topic metadata.
const (
	LedgerOpen   = "open"
	LedgerClosed = "closed"
)

// LedgerInfo is one ledger of the list. Entries and Size are final once the
// ledger is closed; while it is open they are 0 in the metadata (the live
// count is the managed ledger's LastConfirmed).
type LedgerInfo struct {
	ID      int64  `json:"id"`
	Entries int64  `json:"entries"`
	Size    int64  `json:"size"`
	State   string `json:"state"`
	// Closed is when the ledger was closed (Unix milliseconds); 0 while
	// open, and for ledgers closed before this field existed.
	Closed int64 `json:"closed,omitempty"`
}

type posJSON struct {
	Ledger int64 `json:"ledger"`
	Entry  int64 `json:"entry"`
}

// cursorMeta is a cursor as persisted.
type cursorMeta struct {
	Name       string  `json:"name"`
	MarkDelete posJSON `json:"markDelete"`
	AckSet     string  `json:"ackset"` // base64 of ackset.Set.MarshalBinary
	// Batches are the partly acknowledged batch entries, "<ledger>:<entry>"
	// to the ack set still to acknowledge (batchack.go).
	Batches    map[string][]int64 `json:"batches,omitempty"`
	Properties map[string]string  `json:"properties,omitempty"`
}

// topicMeta is the value under TopicKey (docs/mledger.md).
type topicMeta struct {
	Version int          `json:"version"`
	Ledgers []LedgerInfo `json:"ledgers"`
	Cursors []cursorMeta `json:"cursors"`
	// Properties are the topic's properties (Pulsar's managed ledger
	// properties: the admin API's GET/PUT/DELETE .../properties).
	Properties map[string]string `json:"properties,omitempty"`
	// Terminated: the log takes no more entries (Terminate).
	Terminated bool `json:"terminated,omitempty"`
}

// storedMeta is topicMeta as written: with the id of the managed ledger
// that wrote it. The metadata kept in memory does without (every write
// sets it again).
type storedMeta struct {
	topicMeta
	// Writer is a random id of the managed ledger (one Open) that wrote
	// this value, so that an owner can tell a write of its own that it
	// heard fail from a new owner's (casLocked).
	Writer string `json:"writer,omitempty"`
}

func (m *topicMeta) clone() topicMeta {
	c := topicMeta{Version: m.Version, Ledgers: append([]LedgerInfo(nil), m.Ledgers...), Properties: maps.Clone(m.Properties), Terminated: m.Terminated}
	for _, cm := range m.Cursors {
		props := map[string]string(nil)
		if cm.Properties != nil {
			props = make(map[string]string, len(cm.Properties))
			for k, v := range cm.Properties {
				props[k] = v
			}
		}
		cm.Properties = props
		c.Cursors = append(c.Cursors, cm)
	}
	return c
}

func (m *topicMeta) cursor(name string) (int, bool) {
	for i := range m.Cursors {
		if m.Cursors[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

func encodeMeta(m *topicMeta) ([]byte, error) { return encodeMetaBy(m, "") }

// encodeMetaBy encodes m as written by the managed ledger writer.
func encodeMetaBy(m *topicMeta, writer string) ([]byte, error) {
	m.Version = MetaVersion
	return json.Marshal(storedMeta{topicMeta: *m, Writer: writer})
}

func decodeMeta(b []byte) (topicMeta, error) {
	var m topicMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return topicMeta{}, fmt.Errorf("%w: %v", ErrCorruptMeta, err)
	}
	if m.Version != MetaVersion {
		return topicMeta{}, fmt.Errorf("%w: version %d, this build reads %d", ErrCorruptMeta, m.Version, MetaVersion)
	}
	for i, l := range m.Ledgers {
		if l.ID < 0 || l.Entries < 0 || l.Size < 0 || (l.State != LedgerOpen && l.State != LedgerClosed) {
			return topicMeta{}, fmt.Errorf("%w: ledger %+v", ErrCorruptMeta, l)
		}
		if i > 0 && l.ID <= m.Ledgers[i-1].ID {
			return topicMeta{}, fmt.Errorf("%w: ledger ids out of order at %d", ErrCorruptMeta, l.ID)
		}
		if l.State == LedgerOpen && i != len(m.Ledgers)-1 {
			return topicMeta{}, fmt.Errorf("%w: open ledger %d is not the last", ErrCorruptMeta, l.ID)
		}
	}
	for _, c := range m.Cursors {
		if _, err := decodeAckSet(c.AckSet); err != nil {
			return topicMeta{}, fmt.Errorf("cursor %q: %w", c.Name, err)
		}
		if _, err := decodeBatches(c.Batches); err != nil {
			return topicMeta{}, fmt.Errorf("cursor %q: %w", c.Name, err)
		}
	}
	return m, nil
}

func encodeAckSet(s *ackset.Set) (string, error) {
	b, err := s.MarshalBinary()
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func decodeAckSet(s string) (*ackset.Set, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: ackset: %v", ErrCorruptMeta, err)
	}
	set := ackset.New(Position{})
	if err := set.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptMeta, err)
	}
	return set, nil
}

// TopicKey is the metadata key of the managed ledger name in region.
func TopicKey(region, name string) string {
	return metastore.RegionPrefix(region) + "topics/" + name
}

// ValidateName checks a managed ledger name: a relative slash-separated
// path (e.g. "tenant/ns/persistent/topic") of at most MaxNameLen bytes of
// UTF-8 with no empty, "." or ".." segment and no control or space
// characters.
func ValidateName(name string) error {
	if err := validateLabel(name); err != nil {
		return err
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q has an empty, \".\" or \"..\" segment", ErrInvalidName, name)
		}
	}
	return nil
}

// validateLabel checks what every name must satisfy (cursor names too).
func validateLabel(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not UTF-8", ErrInvalidName, name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %q contains control or space characters", ErrInvalidName, name)
		}
	}
	return nil
}

// ValidateCursorName checks a cursor name: 1 to MaxNameLen bytes of UTF-8
// without control or space characters and without '/'.
func ValidateCursorName(name string) error {
	if err := validateLabel(name); err != nil {
		return err
	}
	if strings.Contains(name, "/") {
		return fmt.Errorf("%w: cursor %q contains '/'", ErrInvalidName, name)
	}
	return nil
}
