package compactor

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// msg is one message of a test entry: key "" is no key; a nil value is a
// deletion.
type msg struct {
	key   string
	value []byte
}

func keyed(k, v string) msg {
	if v == "" {
		return msg{key: k}
	}
	return msg{key: k, value: []byte(v)}
}

// single encodes an entry holding one message.
func single(t testing.TB, m msg) []byte {
	t.Helper()
	meta := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)}
	if m.key != "" {
		meta.PartitionKey = proto.String(m.key)
	}
	e, err := wire.AppendEntry(nil, meta, m.value)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// batch encodes a batch entry of ms compressed with codec.
func batch(t testing.TB, codec pb.CompressionType, ms ...msg) []byte {
	t.Helper()
	var raw []byte
	for _, m := range ms {
		sm := &pb.SingleMessageMetadata{PayloadSize: proto.Int32(int32(len(m.value)))}
		if m.key != "" {
			sm.PartitionKey = proto.String(m.key)
		}
		var err error
		if raw, err = wire.AppendBatchMessage(raw, sm, m.value); err != nil {
			t.Fatal(err)
		}
	}
	body, err := compress(codec, raw)
	if err != nil {
		t.Fatal(err)
	}
	meta := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1),
		NumMessagesInBatch: proto.Int32(int32(len(ms))), Compression: codec.Enum(), UncompressedSize: proto.Uint32(uint32(len(raw)))}
	e, err := wire.AppendEntry(nil, meta, body)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// survivors decodes what a client is delivered of a kept entry: key=value
// of each message its ack set leaves (and that is not compacted out).
func survivors(t testing.TB, k Kept) []string {
	t.Helper()
	meta, payload, err := wire.DecodeEntry(k.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if meta.NumMessagesInBatch == nil {
		return []string{meta.GetPartitionKey() + "=" + string(payload)}
	}
	msgs, err := batchMessages(meta, payload)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, m := range msgs {
		if k.AckSet != nil && k.AckSet[i/64]&(1<<(i%64)) == 0 {
			if !m.Metadata.GetCompactedOut() {
				t.Errorf("message %d is skipped by the ack set but not compacted out", i)
			}
			continue
		}
		if m.Metadata.GetCompactedOut() {
			t.Errorf("message %d is compacted out but the ack set delivers it", i)
		}
		out = append(out, m.Metadata.GetPartitionKey()+"="+string(m.Payload))
	}
	return out
}

// compactAll runs both phases over entries (positions (1, i)) and returns
// what is delivered, in order.
func compactAll(t testing.TB, entries [][]byte) []string {
	t.Helper()
	l := Latest{}
	for i, e := range entries {
		if err := l.Scan(Position{Ledger: 1, Entry: int64(i)}, e); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for i, e := range entries {
		p := Position{Ledger: 1, Entry: int64(i)}
		k, ok, err := l.Rewrite(p, e)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		// Through the compacted ledger's format and back.
		enc, err := AppendEntry(nil, p, k)
		if err != nil {
			t.Fatal(err)
		}
		q, k2, err := DecodeEntry(enc)
		if err != nil || q != p || !bytes.Equal(k2.Entry, k.Entry) || !reflect.DeepEqual(k2.AckSet, k.AckSet) {
			t.Fatalf("entry %v: decoded %v %+v %v", p, q, k2, err)
		}
		out = append(out, survivors(t, k2)...)
	}
	return out
}

func TestCompactRules(t *testing.T) {
	codecs := []pb.CompressionType{pb.CompressionType_NONE, pb.CompressionType_LZ4, pb.CompressionType_ZLIB, pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			cases := []struct {
				name    string
				entries [][]byte
				want    []string
			}{
				{"latest value per key", [][]byte{
					single(t, keyed("a", "1")), single(t, keyed("b", "1")), single(t, keyed("a", "2")),
				}, []string{"b=1", "a=2"}},
				{"an empty value deletes its key", [][]byte{
					single(t, keyed("a", "1")), single(t, keyed("b", "1")), single(t, keyed("a", "")),
				}, []string{"b=1"}},
				{"a key set again after its deletion", [][]byte{
					single(t, keyed("a", "1")), single(t, keyed("a", "")), single(t, keyed("a", "3")),
				}, []string{"a=3"}},
				{"messages without a key are dropped", [][]byte{
					single(t, msg{value: []byte("x")}), single(t, keyed("a", "1")),
				}, []string{"a=1"}},
				{"a batch keeps its latest messages only", [][]byte{
					batch(t, codec, keyed("a", "1"), keyed("b", "1"), keyed("a", "2"), msg{value: []byte("nokey")}),
					single(t, keyed("b", "2")),
				}, []string{"a=2", "b=2"}},
				{"a batch wholly superseded is dropped", [][]byte{
					batch(t, codec, keyed("a", "1"), keyed("b", "1")),
					batch(t, codec, keyed("a", "2"), keyed("b", "2")),
				}, []string{"a=2", "b=2"}},
				{"a deletion inside a batch", [][]byte{
					single(t, keyed("a", "1")),
					batch(t, codec, keyed("b", "1"), keyed("a", "")),
				}, []string{"b=1"}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if got := compactAll(t, c.entries); !reflect.DeepEqual(got, c.want) {
						t.Fatalf("delivered %q, want %q", got, c.want)
					}
				})
			}
		})
	}
}

// A batch partly compacted out keeps its messages' indexes (so their ids
// stay the original ones) and compacting it again changes nothing.
func TestRebatchKeepsIndexes(t *testing.T) {
	e := batch(t, pb.CompressionType_ZSTD, keyed("a", "1"), keyed("b", "1"), keyed("c", "1"), keyed("a", "2"))
	p := Position{Ledger: 3, Entry: 7}
	l := Latest{}
	if err := l.Scan(p, e); err != nil {
		t.Fatal(err)
	}
	k, ok, err := l.Rewrite(p, e)
	if err != nil || !ok {
		t.Fatalf("rewrite: %v %v", ok, err)
	}
	if want := []int64{0b1110}; !reflect.DeepEqual(k.AckSet, want) {
		t.Fatalf("ack set %b, want %b", k.AckSet, want)
	}
	meta, payload, _ := wire.DecodeEntry(k.Entry)
	msgs, err := batchMessages(meta, payload)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("rewritten batch: %d messages, %v", len(msgs), err)
	}
	// Again, from the compacted entry (as the next compaction reads it).
	l2 := Latest{}
	if err := l2.Scan(p, k.Entry); err != nil {
		t.Fatal(err)
	}
	if want := (Latest{"a": {p, 3}, "b": {p, 1}, "c": {p, 2}}); !reflect.DeepEqual(l2, want) {
		t.Fatalf("latest from the compacted entry: %v, want %v", l2, want)
	}
	k2, ok, err := l2.Rewrite(p, k.Entry)
	if err != nil || !ok || !reflect.DeepEqual(k2.AckSet, k.AckSet) {
		t.Fatalf("second rewrite: %+v %v %v", k2.AckSet, ok, err)
	}
}

// A batch the compactor cannot decompress is kept whole, and its keys
// count for nothing (Pulsar's rule).
func TestUndecodableBatchKeptWhole(t *testing.T) {
	meta := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1),
		NumMessagesInBatch: proto.Int32(2), Compression: pb.CompressionType_ZSTD.Enum(), UncompressedSize: proto.Uint32(40)}
	e, _ := wire.AppendEntry(nil, meta, []byte("not zstd at all"))
	l := Latest{}
	p := Position{Ledger: 1, Entry: 0}
	if err := l.Scan(p, e); err != nil || len(l) != 0 {
		t.Fatalf("scan: %v %v", l, err)
	}
	k, ok, err := l.Rewrite(p, e)
	if err != nil || !ok || !bytes.Equal(k.Entry, e) || k.AckSet != nil {
		t.Fatalf("rewrite: %v %v", ok, err)
	}
}

func TestStateProperties(t *testing.T) {
	s := State{Ledger: 12, Horizon: Position{Ledger: 9, Entry: 41}}
	got, err := StateOf(s.Properties())
	if err != nil || got != s {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if got, err := StateOf(nil); err != nil || got.Valid() {
		t.Fatalf("no properties: %+v %v", got, err)
	}
	for _, bad := range []map[string]string{
		{LedgerProperty: "x", HorizonProperty: "1:2"},
		{LedgerProperty: "-1", HorizonProperty: "1:2"},
		{LedgerProperty: "3"},
		{LedgerProperty: "3", HorizonProperty: "1-2"},
		{LedgerProperty: "3", HorizonProperty: "1:-2"},
	} {
		if _, err := StateOf(bad); err == nil {
			t.Errorf("StateOf(%v): no error", bad)
		}
	}
}

func TestDecodeEntryRefusesGarbage(t *testing.T) {
	good, _ := AppendEntry(nil, Position{Ledger: 1, Entry: 2}, Kept{Entry: []byte("e"), AckSet: []int64{5}})
	for i := range len(good) - 1 {
		if _, _, err := DecodeEntry(good[:i]); err == nil && i < entryHeader+8 {
			t.Errorf("a %d-byte prefix decoded", i)
		}
	}
	bad := bytes.Clone(good)
	bad[0] = 0
	if _, _, err := DecodeEntry(bad); err == nil {
		t.Error("a bad magic decoded")
	}
}

// FuzzScanRewrite: entries from clients (any bytes) never make phase one
// or two panic, and what phase two keeps decodes.
func FuzzScanRewrite(f *testing.F) {
	f.Add(single(f, keyed("a", "1")))
	f.Add(batch(f, pb.CompressionType_NONE, keyed("a", "1"), keyed("b", "")))
	f.Add(batch(f, pb.CompressionType_LZ4, keyed("a", "1"), keyed("a", "2")))
	f.Add(batch(f, pb.CompressionType_SNAPPY, keyed("a", "1"), msg{value: []byte("x")}))
	f.Fuzz(func(t *testing.T, e []byte) {
		p := Position{Ledger: 1, Entry: 1}
		l := Latest{}
		if err := l.Scan(p, e); err != nil {
			return
		}
		k, ok, err := l.Rewrite(p, e)
		if err != nil || !ok {
			return
		}
		if _, _, err := wire.DecodeEntry(k.Entry); err != nil {
			t.Fatalf("kept an undecodable entry: %v", err)
		}
		enc, err := AppendEntry(nil, p, k)
		if err != nil {
			t.Fatal(err)
		}
		if q, _, err := DecodeEntry(enc); err != nil || q != p {
			t.Fatal(fmt.Sprint(q, err))
		}
	})
}
