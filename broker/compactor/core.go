package compactor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The functions in this file are pure: they decide what compaction keeps
// from entries given to them, and encode and decode what is stored.

// Position is an entry's position in a topic's log.
type Position = mledger.Position

// CursorName is the cursor that holds a topic's compaction state, named
// as Pulsar's compaction subscription.
const CursorName = "__compaction"

// Properties of the compaction cursor. LedgerProperty is Pulsar's name for
// the compacted ledger's id; HorizonProperty is the last position the
// compacted ledger covers ("<ledger>:<entry>").
const (
	LedgerProperty  = "CompactedTopicLedger"
	HorizonProperty = "CompactionHorizon"
)

// ErrCorrupt: a compacted ledger entry or compaction state that cannot be
// decoded.
var ErrCorrupt = errors.New("compactor: corrupt compacted data")

// State is a topic's compaction: the compacted ledger holding, for every
// key, its latest message up to Horizon (inclusive). Ledger is -1 when no
// compaction has completed.
type State struct {
	Ledger  int64
	Horizon Position
}

// NoState is the state of a topic never compacted.
var NoState = State{Ledger: -1, Horizon: Position{Ledger: -1, Entry: -1}}

// Valid reports whether s names a compacted ledger.
func (s State) Valid() bool { return s.Ledger >= 0 }

// Properties are the compaction cursor's properties recording s.
func (s State) Properties() map[string]string {
	return map[string]string{
		LedgerProperty:  strconv.FormatInt(s.Ledger, 10),
		HorizonProperty: s.Horizon.String(),
	}
}

// StateOf reads a compaction state from the compaction cursor's
// properties: NoState when they record none.
func StateOf(props map[string]string) (State, error) {
	l, ok := props[LedgerProperty]
	if !ok {
		return NoState, nil
	}
	id, err := strconv.ParseInt(l, 10, 64)
	if err != nil || id < 0 {
		return NoState, fmt.Errorf("%w: %s %q", ErrCorrupt, LedgerProperty, l)
	}
	h, err := parsePosition(props[HorizonProperty])
	if err != nil {
		return NoState, fmt.Errorf("%w: %s: %v", ErrCorrupt, HorizonProperty, err)
	}
	return State{Ledger: id, Horizon: h}, nil
}

func parsePosition(s string) (Position, error) {
	l, e, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, fmt.Errorf("%q is not <ledger>:<entry>", s)
	}
	li, err1 := strconv.ParseInt(l, 10, 64)
	ei, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil || li < 0 || ei < 0 {
		return Position{}, fmt.Errorf("%q is not <ledger>:<entry>", s)
	}
	return Position{Ledger: li, Entry: ei}, nil
}

// ID is one message: its entry's position and, in a batch, its index
// (-1 for an entry that is a single message).
type ID struct {
	Position
	Batch int32
}

// Latest is phase one's result: every key's latest message. A key whose
// latest message had an empty payload is absent (deleted).
type Latest map[string]ID

// readableBatch reports whether the compactor looks inside the entry's
// messages (Pulsar's rule: a batch that is not encrypted).
func readableBatch(meta *pb.MessageMetadata) bool {
	return meta.NumMessagesInBatch != nil && len(meta.GetEncryptionKeys()) == 0
}

// valueSize is the size of a single message's value: 0 when it is null
// or empty (a deletion).
func valueSize(meta *pb.MessageMetadata, payload []byte) int {
	if meta.GetNullValue() {
		return 0
	}
	if meta.GetCompression() != pb.CompressionType_NONE {
		return int(meta.GetUncompressedSize())
	}
	return len(payload)
}

// batchMessages decodes a readable batch's messages.
func batchMessages(meta *pb.MessageMetadata, payload []byte) ([]wire.BatchMessage, error) {
	raw, err := decompress(meta.GetCompression(), payload, int(meta.GetUncompressedSize()))
	if err != nil {
		return nil, err
	}
	return wire.DecodeBatch(raw, int(meta.GetNumMessagesInBatch()))
}

// Scan records in l what the entry at p says about its keys (phase one):
// a message with a key and a value becomes that key's latest, one with a
// key and no value (empty or null) deletes the key, one without a key is
// ignored (compaction drops it: Pulsar's topicCompactionRetainNullKey
// false). Messages of a batch count one by one; a batch that cannot be
// decoded counts for nothing (phase two keeps it whole). An entry that is
// not a message at all is an error.
func (l Latest) Scan(p Position, entry []byte) error {
	meta, payload, err := wire.DecodeEntry(entry)
	if err != nil {
		return fmt.Errorf("entry %v: %w", p, err)
	}
	if !readableBatch(meta) {
		if meta.PartitionKey != nil {
			l.note(meta.GetPartitionKey(), ID{p, -1}, valueSize(meta, payload))
		}
		return nil
	}
	msgs, err := batchMessages(meta, payload)
	if err != nil {
		return nil
	}
	for i, m := range msgs {
		md := m.Metadata
		if md.GetCompactedOut() || md.PartitionKey == nil {
			continue
		}
		size := len(m.Payload)
		if md.GetNullValue() {
			size = 0
		}
		l.note(md.GetPartitionKey(), ID{p, int32(i)}, size)
	}
	return nil
}

func (l Latest) note(key string, id ID, size int) {
	if size > 0 {
		l[key] = id
	} else {
		delete(l, key)
	}
}

// Kept is what the compacted ledger keeps of one entry: the entry as
// delivered (for a batch, rewritten with the removed messages marked
// compacted_out, so the others keep their batch indexes), and, when some
// messages of a batch were removed, the ack set that tells a client to
// skip them (bit i set: message i is delivered).
type Kept struct {
	Entry  []byte
	AckSet []int64
}

// Rewrite decides what of the entry at p the compacted ledger keeps
// (phase two), given phase one's result: a single message if it is its
// key's latest; of a batch, the messages that are their keys' latest,
// the others marked compacted_out (Pulsar's RawBatchConverter), nothing
// when none is left. A batch that cannot be decoded is kept whole.
func (l Latest) Rewrite(p Position, entry []byte) (Kept, bool, error) {
	meta, payload, err := wire.DecodeEntry(entry)
	if err != nil {
		return Kept{}, false, fmt.Errorf("entry %v: %w", p, err)
	}
	if !readableBatch(meta) {
		if meta.PartitionKey == nil {
			return Kept{}, false, nil
		}
		id, ok := l[meta.GetPartitionKey()]
		return Kept{Entry: entry}, ok && id == (ID{p, -1}), nil
	}
	msgs, err := batchMessages(meta, payload)
	if err != nil {
		return Kept{Entry: entry}, true, nil
	}
	keep := make([]bool, len(msgs))
	n := 0
	for i, m := range msgs {
		md := m.Metadata
		if md.GetCompactedOut() || md.PartitionKey == nil || len(m.Payload) == 0 || md.GetNullValue() {
			continue
		}
		if id, ok := l[md.GetPartitionKey()]; ok && id == (ID{p, int32(i)}) {
			keep[i] = true
			n++
		}
	}
	switch n {
	case 0:
		return Kept{}, false, nil
	case len(msgs):
		return Kept{Entry: entry}, true, nil
	}
	var raw []byte
	ackSet := make([]int64, (len(msgs)+63)/64)
	for i, m := range msgs {
		if keep[i] {
			ackSet[i/64] |= 1 << (i % 64)
			raw, err = wire.AppendBatchMessage(raw, m.Metadata, m.Payload)
		} else {
			raw, err = wire.AppendBatchMessage(raw, &pb.SingleMessageMetadata{CompactedOut: proto.Bool(true), PayloadSize: proto.Int32(0)}, nil)
		}
		if err != nil {
			return Kept{}, false, fmt.Errorf("entry %v: rebatch: %w", p, err)
		}
	}
	body, err := compress(meta.GetCompression(), raw)
	if err != nil {
		return Kept{}, false, fmt.Errorf("entry %v: rebatch: %w", p, err)
	}
	meta = proto.Clone(meta).(*pb.MessageMetadata)
	if meta.GetCompression() != pb.CompressionType_NONE || meta.UncompressedSize != nil {
		meta.UncompressedSize = proto.Uint32(uint32(len(raw)))
	}
	out, err := wire.AppendEntry(nil, meta, body)
	if err != nil {
		return Kept{}, false, fmt.Errorf("entry %v: rebatch: %w", p, err)
	}
	return Kept{Entry: out, AckSet: ackSet}, true, nil
}

// The compacted ledger's entry format (docs/format/compacted-ledger.md):
//
//	[u16 magic 0x0c7e][u8 version 1][u8 0][i64 ledger][i64 entry]
//	[u16 words][words × i64 ack set][entry: u32 size, MessageMetadata, payload]
const (
	entryMagic   = 0x0c7e
	entryVersion = 1
	entryHeader  = 2 + 1 + 1 + 8 + 8 + 2
	maxWords     = 1<<16 - 1
)

// AppendEntry appends the compacted ledger entry for the message(s) kept
// of the entry at p to dst.
func AppendEntry(dst []byte, p Position, k Kept) ([]byte, error) {
	if len(k.AckSet) > maxWords {
		return dst, fmt.Errorf("compactor: an ack set of %d words", len(k.AckSet))
	}
	dst = binary.BigEndian.AppendUint16(dst, entryMagic)
	dst = append(dst, entryVersion, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Ledger))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Entry))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(k.AckSet)))
	for _, w := range k.AckSet {
		dst = binary.BigEndian.AppendUint64(dst, uint64(w))
	}
	return append(dst, k.Entry...), nil
}

// DecodeEntry splits a compacted ledger entry into the original position
// and what was kept; Kept.Entry aliases b.
func DecodeEntry(b []byte) (Position, Kept, error) {
	if len(b) < entryHeader || binary.BigEndian.Uint16(b) != entryMagic || b[2] != entryVersion {
		return Position{}, Kept{}, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	p := Position{Ledger: int64(binary.BigEndian.Uint64(b[4:])), Entry: int64(binary.BigEndian.Uint64(b[12:]))}
	if p.Ledger < 0 || p.Entry < 0 {
		return Position{}, Kept{}, fmt.Errorf("%w: position %v", ErrCorrupt, p)
	}
	words := int(binary.BigEndian.Uint16(b[20:]))
	rest := b[entryHeader:]
	if len(rest) < 8*words {
		return Position{}, Kept{}, fmt.Errorf("%w: ack set of %d words, %d bytes left", ErrCorrupt, words, len(rest))
	}
	var k Kept
	if words > 0 {
		k.AckSet = make([]int64, words)
		for i := range k.AckSet {
			k.AckSet[i] = int64(binary.BigEndian.Uint64(rest[8*i:]))
		}
	}
	k.Entry = rest[8*words:]
	return p, k, nil
}
