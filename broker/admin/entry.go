package admin

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Decompressor turns a compressed payload back into its uncompressedSize
// bytes.
type Decompressor func(codec pb.CompressionType, payload []byte, uncompressedSize int) ([]byte, error)

// maxUncompressed bounds what one entry may expand to (the broker's
// frame limit is far below it).
const maxUncompressed = 64 << 20

// defaultDecompress handles NONE and ZLIB (the codecs the standard
// library has); others return an error so the caller serves the payload
// as stored.
func defaultDecompress(codec pb.CompressionType, payload []byte, size int) ([]byte, error) {
	switch codec {
	case pb.CompressionType_NONE:
		return payload, nil
	case pb.CompressionType_ZLIB:
		r, err := zlib.NewReader(bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		out, err := io.ReadAll(io.LimitReader(r, int64(size)+1))
		if err != nil {
			return nil, err
		}
		if len(out) != size {
			return nil, fmt.Errorf("zlib: %d bytes, metadata says %d", len(out), size)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no decompressor for %v", codec)
}

// entryResponse is what GET .../ledger/{l}/entry/{e} sends for one stored
// entry: the headers Pulsar derives from the message metadata and the
// (uncompressed, when a decompressor is available) payload.
type entryResponse struct {
	header http.Header
	body   []byte
}

// decodeEntryResponse turns a stored entry ([u32 size][MessageMetadata]
// [payload]) into the HTTP response Pulsar's
// PersistentTopicsBase.generateResponseWithEntry produces. Properties go
// in one X-Pulsar-Property header as a JSON object (SNIP-279), not in
// per-key X-Pulsar-PROPERTY-<key> headers, whose keys HTTP header
// canonicalization would change.
func decodeEntryResponse(entry []byte, ledger, entryID int64, decompress Decompressor) (*entryResponse, error) {
	meta, payload, err := wire.DecodeEntry(entry)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	set := func(k, v string) { h[k] = []string{v} }
	set("Content-Type", "application/octet-stream")
	set("X-Pulsar-Message-ID", fmt.Sprintf("%d:%d", ledger, entryID))
	set("X-Pulsar-Publish-Time", time.UnixMilli(int64(meta.GetPublishTime())).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	if meta.EventTime != nil && meta.GetEventTime() != 0 {
		set("X-Pulsar-Event-Time", time.UnixMilli(int64(meta.GetEventTime())).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	if meta.DeliverAtTime != nil {
		set("X-Pulsar-Delivery-Time", time.UnixMilli(meta.GetDeliverAtTime()).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	set("X-Pulsar-Producer-Name", meta.GetProducerName())
	set("X-Pulsar-Sequence-Id", strconv.FormatUint(meta.GetSequenceId(), 10))
	if meta.ReplicatedFrom != nil {
		set("X-Pulsar-Replicated-From", meta.GetReplicatedFrom())
	}
	if meta.PartitionKey != nil {
		set("X-Pulsar-Partition-Key", meta.GetPartitionKey())
	}
	if meta.HighestSequenceId != nil {
		set("X-Pulsar-Highest-Sequence-Id", strconv.FormatUint(meta.GetHighestSequenceId(), 10))
	}
	if meta.Uuid != nil {
		set("X-Pulsar-Uuid", meta.GetUuid())
	}
	if meta.NumChunksFromMsg != nil {
		set("X-Pulsar-Num-Chunks-From-Msg", strconv.Itoa(int(meta.GetNumChunksFromMsg())))
		set("X-Pulsar-Total-Chunk-Msg-Size", strconv.Itoa(int(meta.GetTotalChunkMsgSize())))
		set("X-Pulsar-Chunk-Id", strconv.Itoa(int(meta.GetChunkId())))
	}
	if meta.GetNullValue() {
		set("X-Pulsar-Null-Value", "true")
	}
	if meta.GetNullPartitionKey() {
		set("X-Pulsar-Null-Partition-Key", "true")
	}
	if len(meta.GetEncryptionKeys()) > 0 {
		set("X-Pulsar-Is-Encrypted", "true")
		set("X-Pulsar-Encryption-Algo", meta.GetEncryptionAlgo())
	}
	if meta.NumMessagesInBatch != nil {
		set("X-Pulsar-Num-Batch-Message", strconv.Itoa(int(meta.GetNumMessagesInBatch())))
		set("X-Pulsar-Batch-Size", strconv.Itoa(len(payload)))
	}
	if props := meta.GetProperties(); len(props) > 0 {
		m := make(map[string]string, len(props))
		for _, kv := range props {
			m[kv.GetKey()] = kv.GetValue()
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		set("X-Pulsar-Property", string(b))
	}
	body := payload
	if c := meta.GetCompression(); c != pb.CompressionType_NONE {
		size := int(meta.GetUncompressedSize())
		if decompress == nil {
			decompress = defaultDecompress
		}
		var out []byte
		err := fmt.Errorf("uncompressed size %d is over %d", size, maxUncompressed)
		if size <= maxUncompressed {
			out, err = decompress(c, payload, size)
		}
		if err == nil {
			body = out
		} else {
			// Serve the payload as stored and say how it is compressed.
			set("X-Pulsar-Compression", c.String())
			set("X-Pulsar-Uncompressed-Size", strconv.Itoa(size))
		}
	}
	return &entryResponse{header: h, body: body}, nil
}
