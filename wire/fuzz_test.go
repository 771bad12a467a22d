package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire/pb"
)

// FuzzDecodeFrame: DecodeFrame never panics, and whatever it accepts
// re-encodes to a frame that decodes to the same command and entry.
func FuzzDecodeFrame(f *testing.F) {
	for _, cmd := range commandCases() {
		b, err := AppendCommand(nil, cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, bem := range []*pb.BrokerEntryMetadata{nil, {Index: u64(3)}} {
		b, err := AppendPayloadCommandWithBrokerEntry(nil, messageCmd(), bem, testMeta(), []byte("payload"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	buf, _, _, _ := batchCase(3)
	b, _ := AppendPayloadCommand(nil, sendCmd(1, 2), &pb.MessageMetadata{ProducerName: str("p"), SequenceId: u64(1),
		PublishTime: u64(1), NumMessagesInBatch: i32(3)}, buf)
	f.Add(b)
	f.Add(goldenConnect)
	f.Add(goldenSend)
	f.Add(goldenMessage)
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeFrame(data)
		if _, rerr := ReadFrame(bytes.NewReader(data), len(data), nil); rerr != nil && err == nil {
			t.Fatalf("DecodeFrame accepts what ReadFrame rejects: %v", rerr)
		}
		if err != nil {
			return
		}
		var again []byte
		if fr.Entry == nil {
			again, err = AppendCommand(nil, fr.Cmd)
		} else {
			again, err = AppendEntryCommand(nil, fr.Cmd, fr.BrokerEntryMetadata, fr.Entry)
		}
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		fr2, err := DecodeFrame(again)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if !proto.Equal(fr.Cmd, fr2.Cmd) || !bytes.Equal(fr.Entry, fr2.Entry) || !proto.Equal(fr.Metadata, fr2.Metadata) {
			t.Fatalf("round trip changed the frame")
		}
		if fr.Metadata != nil && fr.Metadata.NumMessagesInBatch != nil {
			_, _ = DecodeBatch(fr.Payload, int(fr.Metadata.GetNumMessagesInBatch()))
		}
	})
}

// FuzzDecodeBatch: DecodeBatch never panics, and what it accepts
// re-encodes to the same bytes' meaning.
func FuzzDecodeBatch(f *testing.F) {
	for _, n := range []int{0, 1, 3, 10} {
		buf, _, _, err := batchCase(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf, n)
	}
	f.Add([]byte{0, 0, 0, 2, 0x18, 0x02, 'h', 'i'}, 1)
	f.Add([]byte{0, 0, 0, 2, 0x18, 0x05, 'a'}, 1)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		msgs, err := DecodeBatch(data, n)
		if err != nil {
			return
		}
		var again []byte
		for _, m := range msgs {
			if again, err = AppendBatchMessage(again, m.Metadata, m.Payload); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
		}
		msgs2, err := DecodeBatch(again, n)
		if err != nil || len(msgs2) != len(msgs) {
			t.Fatalf("decode re-encoded: %v", err)
		}
		for i := range msgs {
			if !proto.Equal(msgs[i].Metadata, msgs2[i].Metadata) || !bytes.Equal(msgs[i].Payload, msgs2[i].Payload) {
				t.Fatalf("message %d changed", i)
			}
		}
	})
}
