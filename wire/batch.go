package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire/pb"
)

// BatchMessage is one message of a batched entry.
type BatchMessage struct {
	Metadata *pb.SingleMessageMetadata
	// Payload aliases the bytes given to DecodeBatch.
	Payload []byte
}

// minBatchMessage is the smallest encoding of one batch message: a 4-byte
// size and a SingleMessageMetadata holding at least payload_size (tag and a
// one-byte varint).
const minBatchMessage = 4 + 2

// AppendBatchMessage appends one message of a batch,
// [u32 size][SingleMessageMetadata][payload], to dst. meta.payload_size
// must be set to len(payload). On error dst is returned unchanged.
func AppendBatchMessage(dst []byte, meta *pb.SingleMessageMetadata, payload []byte) ([]byte, error) {
	if meta == nil {
		return dst, fmt.Errorf("%w: nil metadata", ErrBadBatch)
	}
	if meta.PayloadSize == nil || int64(meta.GetPayloadSize()) != int64(len(payload)) || len(payload) > math.MaxInt32 {
		return dst, fmt.Errorf("%w: payload_size %d, payload of %d bytes", ErrBadBatch, meta.GetPayloadSize(), len(payload))
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, meta)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %w", ErrBadBatch, err)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return append(dst, payload...), nil
}

// DecodeBatch splits the uncompressed payload of a batched entry into its n
// messages (n is MessageMetadata.num_messages_in_batch). Every byte must
// belong to one of the n messages. Payloads alias payload.
func DecodeBatch(payload []byte, n int) ([]BatchMessage, error) {
	if n < 0 || n > len(payload)/minBatchMessage {
		return nil, fmt.Errorf("%w: %d messages cannot fit in %d bytes", ErrBadBatch, n, len(payload))
	}
	msgs := make([]BatchMessage, 0, n)
	rest := payload
	for i := range n {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: message %d of %d: %w: metadata size", ErrBadBatch, i, n, ErrTruncated)
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: message %d of %d: metadata of %d bytes, %d left", ErrBadBatch, i, n, size, len(rest))
		}
		meta := new(pb.SingleMessageMetadata)
		if err := proto.Unmarshal(rest[:int(size)], meta); err != nil {
			return nil, fmt.Errorf("%w: message %d of %d: %w", ErrBadBatch, i, n, err)
		}
		rest = rest[int(size):]
		ps := meta.GetPayloadSize()
		if ps < 0 || int64(ps) > int64(len(rest)) {
			return nil, fmt.Errorf("%w: message %d of %d: payload_size %d, %d left", ErrBadBatch, i, n, ps, len(rest))
		}
		msgs = append(msgs, BatchMessage{Metadata: meta, Payload: rest[:ps:ps]})
		rest = rest[ps:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d messages", ErrBadBatch, len(rest), n)
	}
	return msgs, nil
}
