package compactor

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/isobar-mq/isobar/wire/pb"
)

// maxUncompressed bounds what one batch may expand to: far above the
// broker's frame limit, low enough that a forged uncompressed_size cannot
// make the compactor allocate without bound.
const maxUncompressed = 64 << 20

// errCodec: a batch whose payload cannot be decompressed (an unknown
// codec, or bytes the codec refuses). The compactor keeps such a batch
// whole, as Pulsar does.
var errCodec = errors.New("compactor: cannot decompress")

var (
	zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxUncompressed))
	zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
)

// decompress returns the size uncompressed bytes of a batch payload
// compressed with codec (the codecs Pulsar clients use: LZ4 and snappy as
// raw blocks, ZLIB and ZSTD as streams).
func decompress(codec pb.CompressionType, payload []byte, size int) ([]byte, error) {
	if size < 0 || size > maxUncompressed {
		return nil, fmt.Errorf("%w: uncompressed size %d", errCodec, size)
	}
	var out []byte
	var err error
	switch codec {
	case pb.CompressionType_NONE:
		return payload, nil
	case pb.CompressionType_LZ4:
		out = make([]byte, size)
		var n int
		n, err = lz4.UncompressBlock(payload, out)
		out = out[:max(0, n)]
	case pb.CompressionType_ZLIB:
		var r io.ReadCloser
		if r, err = zlib.NewReader(bytes.NewReader(payload)); err == nil {
			out, err = io.ReadAll(io.LimitReader(r, int64(size)+1))
		}
	case pb.CompressionType_ZSTD:
		out, err = zstdDec.DecodeAll(payload, make([]byte, 0, size))
	case pb.CompressionType_SNAPPY:
		var n int
		if n, err = snappy.DecodedLen(payload); err == nil && n != size {
			err = fmt.Errorf("snappy: %d bytes", n)
		} else if err == nil {
			out, err = snappy.Decode(nil, payload)
		}
	default:
		return nil, fmt.Errorf("%w: codec %v", errCodec, codec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %v", errCodec, codec, err)
	}
	if len(out) != size {
		return nil, fmt.Errorf("%w: %v: %d bytes, the metadata says %d", errCodec, codec, len(out), size)
	}
	return out, nil
}

// compress compresses data with codec, in the form decompress reads.
func compress(codec pb.CompressionType, data []byte) ([]byte, error) {
	switch codec {
	case pb.CompressionType_NONE:
		return data, nil
	case pb.CompressionType_LZ4:
		dst := make([]byte, lz4.CompressBlockBound(len(data)))
		var c lz4.Compressor
		n, err := c.CompressBlock(data, dst)
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return dst[:n], nil
	case pb.CompressionType_ZLIB:
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		if _, err := w.Write(data); err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		return b.Bytes(), nil
	case pb.CompressionType_ZSTD:
		return zstdEnc.EncodeAll(data, nil), nil
	case pb.CompressionType_SNAPPY:
		return snappy.Encode(nil, data), nil
	}
	return nil, fmt.Errorf("%w: codec %v", errCodec, codec)
}
