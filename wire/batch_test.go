package wire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire/pb"
)

func batchCase(n int) ([]byte, []*pb.SingleMessageMetadata, [][]byte, error) {
	var buf []byte
	var metas []*pb.SingleMessageMetadata
	var payloads [][]byte
	for i := range n {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, i*3)
		m := &pb.SingleMessageMetadata{PayloadSize: i32(int32(len(p))), SequenceId: u64(uint64(100 + i)),
			EventTime: u64(uint64(i))}
		if i%2 == 1 {
			m.PartitionKey = str(fmt.Sprint("k", i))
			m.Properties = []*pb.KeyValue{{Key: str("i"), Value: str(fmt.Sprint(i))}}
			m.NullValue = boolp(true)
		}
		var err error
		if buf, err = AppendBatchMessage(buf, m, p); err != nil {
			return nil, nil, nil, err
		}
		metas, payloads = append(metas, m), append(payloads, p)
	}
	return buf, metas, payloads, nil
}

func TestBatchRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 10, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			buf, metas, payloads, err := batchCase(n)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := DecodeBatch(buf, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != n {
				t.Fatalf("%d messages, want %d", len(msgs), n)
			}
			for i, m := range msgs {
				if !proto.Equal(m.Metadata, metas[i]) || !bytes.Equal(m.Payload, payloads[i]) {
					t.Fatalf("message %d: %v %q", i, m.Metadata, m.Payload)
				}
			}
			// Inside a SEND frame, as a client sends a batch.
			meta := &pb.MessageMetadata{ProducerName: str("p"), SequenceId: u64(100), PublishTime: u64(1),
				NumMessagesInBatch: i32(int32(n)), HighestSequenceId: u64(uint64(100 + n))}
			frame, err := AppendPayloadCommand(nil, sendCmd(1, 100), meta, buf)
			if err != nil {
				t.Fatal(err)
			}
			f, err := DecodeFrame(frame)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeBatch(f.Payload, int(f.Metadata.GetNumMessagesInBatch())); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBatchGolden: one message, metadata {payload_size 2}, payload "hi".
func TestBatchGolden(t *testing.T) {
	golden := []byte{
		0x00, 0x00, 0x00, 0x02, // SingleMessageMetadata size 2
		0x18, 0x02, // field 3 (payload_size), varint 2
		'h', 'i',
	}
	msgs, err := DecodeBatch(golden, 1)
	if err != nil || len(msgs) != 1 || msgs[0].Metadata.GetPayloadSize() != 2 || string(msgs[0].Payload) != "hi" {
		t.Fatalf("%v, %v", msgs, err)
	}
	got, err := AppendBatchMessage(nil, &pb.SingleMessageMetadata{PayloadSize: i32(2)}, []byte("hi"))
	if err != nil || !bytes.Equal(got, golden) {
		t.Fatalf("% x, %v", got, err)
	}
}

func TestBatchErrors(t *testing.T) {
	buf, _, _, err := batchCase(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		n    int
	}{
		{"negative-n", buf, -1},
		{"huge-n", buf, 1 << 30},
		{"more-than-present", buf, 4},
		{"fewer-than-present", buf, 2},
		{"cut", buf[:len(buf)-1], 3},
		{"cut-in-size", buf[:2], 1},
		{"metadata-size-beyond", []byte{0, 0, 0, 9, 0x18, 0x00}, 1},
		{"garbage-metadata", []byte{0, 0, 0, 2, 0xff, 0xff}, 1},
		{"missing-payload-size", []byte{0, 0, 0, 2, 0x28, 0x01}, 1},
		{"negative-payload-size", []byte{0, 0, 0, 11, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 1},
		{"payload-beyond", []byte{0, 0, 0, 2, 0x18, 0x05, 'a'}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeBatch(tc.buf, tc.n); !errors.Is(err, ErrBadBatch) {
				t.Fatalf("err = %v, want ErrBadBatch", err)
			}
		})
	}
	for _, m := range []*pb.SingleMessageMetadata{nil, {}, {PayloadSize: i32(3)}} {
		if out, err := AppendBatchMessage([]byte("k"), m, []byte("hi")); !errors.Is(err, ErrBadBatch) || string(out) != "k" {
			t.Errorf("AppendBatchMessage(%v) = %q, %v", m, out, err)
		}
	}
}
