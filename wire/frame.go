// Package wire owns the framing of the Pulsar binary protocol: it turns
// protobuf commands (package wire/pb), message metadata and payloads into
// frames and back, verifies the CRC32C checksum of payload frames, splits
// batched entries into their messages, and maps Pulsar server error codes to
// the error kinds of package errkind. It is pure: bytes in, bytes out, no connections. The formats are
// written down in docs/format/pulsar-wire.md.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire/pb"
)

const (
	// MaxMessageSize is the message size Pulsar assumes when the broker does
	// not advertise one in CONNECTED.max_message_size (5 MiB).
	MaxMessageSize = 5 << 20
	// FramePadding is the room left in a frame for the command and metadata
	// on top of the message size (the client allows the same 10 KiB).
	FramePadding = 10 << 10
	// DefaultMaxFrameSize is the largest totalSize ReadFrame accepts when
	// given a maximum of 0 or less.
	DefaultMaxFrameSize = MaxMessageSize + FramePadding

	magicChecksum            uint16 = 0x0e01
	magicBrokerEntryMetadata uint16 = 0x0e02
)

// Errors returned by the framing functions. Decoding errors wrap one of them
// with details; check them with errors.Is.
var (
	// ErrFrameTooLarge: a frame's totalSize is above the allowed maximum.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrTruncated: the input ends inside a frame, a size field or a block.
	ErrTruncated = errors.New("wire: truncated frame")
	// ErrMalformed: sizes or magic numbers in the frame are inconsistent.
	ErrMalformed = errors.New("wire: malformed frame")
	// ErrBadCommand: the BaseCommand does not decode or encode, or its type
	// does not match the command it carries.
	ErrBadCommand = errors.New("wire: bad command")
	// ErrBadMetadata: the MessageMetadata or BrokerEntryMetadata does not
	// decode or encode.
	ErrBadMetadata = errors.New("wire: bad message metadata")
	// ErrChecksumMismatch: the CRC32C of a payload frame does not match its
	// contents. DecodeFrame still returns the decoded command with it, so
	// that a broker can answer SEND with a SendError carrying ChecksumError
	// (its kind is errkind.ErrChecksum).
	ErrChecksumMismatch = errkind.Sentinel(errkind.ErrChecksum, "wire: checksum mismatch")
	// ErrBadBatch: a batched payload does not split into its messages.
	ErrBadBatch = errors.New("wire: bad batch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C (Castagnoli) of b, as carried in payload
// frames.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Frame is one decoded frame. Payload and Entry alias the bytes given to
// DecodeFrame; the protobuf messages are copies.
type Frame struct {
	// Cmd is the command; always set when DecodeFrame returns nil or
	// ErrChecksumMismatch.
	Cmd *pb.BaseCommand
	// BrokerEntryMetadata is the broker's block in front of the checksum,
	// nil when absent (always absent in frames sent by clients).
	BrokerEntryMetadata *pb.BrokerEntryMetadata
	// Metadata is the message metadata of a payload frame (SEND, MESSAGE),
	// nil for simple commands.
	Metadata *pb.MessageMetadata
	// Payload is the (possibly compressed, possibly batched) message body
	// after the metadata; nil for simple commands.
	Payload []byte
	// Entry is [u32 metadataSize][metadata][payload]: the bytes the checksum
	// covers, which a broker can store and send on unchanged. Nil for simple
	// commands.
	Entry []byte
	// ChecksumOK is true when the frame carried a CRC32C and it matched.
	// It is false for simple commands and for payload frames without a
	// checksum (clients before protocol version 6).
	ChecksumOK bool
}

// AppendCommand appends a simple frame, [u32 totalSize][u32 commandSize]
// [BaseCommand], to dst. On error dst is returned unchanged.
func AppendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	start := len(dst)
	dst, err := appendCommandPart(dst, cmd)
	if err != nil {
		return dst[:start], err
	}
	total := len(dst) - start - 4
	if uint64(total) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	return dst, nil
}

// AppendPayloadCommand appends a payload frame (SEND, MESSAGE) to dst:
// [u32 totalSize][u32 commandSize][BaseCommand][u16 0x0e01][u32 CRC32C]
// [u32 metadataSize][MessageMetadata][payload]. On error dst is returned
// unchanged.
func AppendPayloadCommand(dst []byte, cmd *pb.BaseCommand, meta *pb.MessageMetadata, payload []byte) ([]byte, error) {
	return AppendPayloadCommandWithBrokerEntry(dst, cmd, nil, meta, payload)
}

// AppendPayloadCommandWithBrokerEntry is AppendPayloadCommand with a
// broker-entry-metadata block ([u16 0x0e02][u32 size][BrokerEntryMetadata])
// before the checksum when bem is not nil. Only send it to clients that set
// FeatureFlags.supports_broker_entry_metadata.
func AppendPayloadCommandWithBrokerEntry(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata, meta *pb.MessageMetadata, payload []byte) ([]byte, error) {
	entry, err := AppendEntry(nil, meta, payload)
	if err != nil {
		return dst, err
	}
	return AppendEntryCommand(dst, cmd, bem, entry)
}

// AppendEntry appends [u32 metadataSize][MessageMetadata][payload] to dst:
// an entry as a payload frame carries it (see Frame.Entry).
func AppendEntry(dst []byte, meta *pb.MessageMetadata, payload []byte) ([]byte, error) {
	if meta == nil {
		return dst, fmt.Errorf("%w: nil metadata", ErrBadMetadata)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, meta)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %w", ErrBadMetadata, err)
	}
	n := len(dst) - start - 4
	if uint64(n) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: metadata of %d bytes", ErrFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return append(dst, payload...), nil
}

// AppendEntryCommand appends a payload frame whose entry
// ([u32 metadataSize][MessageMetadata][payload], e.g. Frame.Entry of a SEND
// as stored) is already encoded, computing its checksum; bem may be nil. The
// entry is not re-validated: use it with bytes that came out of DecodeFrame
// or AppendEntry.
func AppendEntryCommand(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata, entry []byte) ([]byte, error) {
	dst, err := AppendEntryCommandHead(dst, cmd, bem, entry)
	if err != nil {
		return dst, err
	}
	return append(dst, entry...), nil
}

// AppendEntryCommandHead is AppendEntryCommand without the entry: the
// frame's length and checksum count it, and the entry must follow the
// head on the wire (a writer sends it from its own buffer).
func AppendEntryCommandHead(dst []byte, cmd *pb.BaseCommand, bem *pb.BrokerEntryMetadata, entry []byte) ([]byte, error) {
	start := len(dst)
	dst, err := appendCommandPart(dst, cmd)
	if err != nil {
		return dst[:start], err
	}
	if bem != nil {
		dst = binary.BigEndian.AppendUint16(dst, magicBrokerEntryMetadata)
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst, err = proto.MarshalOptions{}.MarshalAppend(dst, bem)
		if err != nil {
			return dst[:start], fmt.Errorf("%w: broker entry metadata: %w", ErrBadMetadata, err)
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	dst = binary.BigEndian.AppendUint16(dst, magicChecksum)
	dst = binary.BigEndian.AppendUint32(dst, Checksum(entry))
	total := uint64(len(dst)-start-4) + uint64(len(entry))
	if total > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	return dst, nil
}

// appendCommandPart appends [u32 placeholder][u32 commandSize][BaseCommand].
func appendCommandPart(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	if err := checkBody(cmd); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, cmd)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %v: %w", ErrBadCommand, cmd.GetType(), err)
	}
	n := len(dst) - start - 8
	if uint64(n) > math.MaxUint32 {
		return dst[:start], fmt.Errorf("%w: command of %d bytes", ErrFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(dst[start+4:], uint32(n))
	return dst, nil
}

// checkBody reports a command whose type names a command this package knows
// but whose matching field is not set. In BaseCommand the field for type T
// has field number T. PING and PONG have empty bodies and are let through
// without one; unknown types (transactions, watchers) are not checked.
func checkBody(cmd *pb.BaseCommand) error {
	if cmd == nil {
		return fmt.Errorf("%w: nil command", ErrBadCommand)
	}
	if cmd.Type == nil {
		return fmt.Errorf("%w: no type", ErrBadCommand)
	}
	t := cmd.GetType()
	if t == pb.BaseCommand_PING || t == pb.BaseCommand_PONG {
		return nil
	}
	m := cmd.ProtoReflect()
	fd := m.Descriptor().Fields().ByNumber(protoreflect.FieldNumber(t))
	if fd != nil && !m.Has(fd) {
		return fmt.Errorf("%w: %v without its %s field", ErrBadCommand, t, fd.Name())
	}
	return nil
}

// ReadFrame reads one whole frame (the 4-byte totalSize included) from r
// into buf[:0], growing it if needed, and returns it for DecodeFrame. A
// totalSize above maxFrameSize (DefaultMaxFrameSize when maxFrameSize <= 0)
// gives ErrFrameTooLarge before any of the body is read; the stream is then
// out of step and the connection should be closed. io.EOF is returned as is
// when r ends cleanly before a frame; a frame cut short gives ErrTruncated
// wrapping io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, maxFrameSize int, buf []byte) ([]byte, error) {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return buf[:0], fmt.Errorf("%w: frame size: %w", ErrTruncated, err)
		}
		return buf[:0], err
	}
	total := binary.BigEndian.Uint32(hdr[:])
	if uint64(total) > uint64(maxFrameSize) {
		return buf[:0], fmt.Errorf("%w: totalSize %d > %d", ErrFrameTooLarge, total, maxFrameSize)
	}
	if total < 4 {
		return buf[:0], fmt.Errorf("%w: totalSize %d < 4", ErrMalformed, total)
	}
	n := 4 + int(total)
	// The buffer grows with what actually arrives (doubling from 4 KiB,
	// or from what r has buffered already), so a peer that announces a
	// large frame and sends little of it costs what it sent, not what it
	// announced. A frame that has arrived whole behind a bufio.Reader is
	// one allocation of its size.
	first := readChunk
	if b, ok := r.(interface{ Buffered() int }); ok {
		first = max(first, 4+b.Buffered())
	}
	if cap(buf) < min(n, first) {
		buf = make([]byte, 0, min(n, first))
	}
	buf = append(buf[:0], hdr[:]...)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		end := min(n, cap(buf))
		m, err := io.ReadFull(r, buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return buf[:0], fmt.Errorf("%w: %d-byte frame: %w", ErrTruncated, total, err)
			}
			return buf[:0], err
		}
	}
	return buf, nil
}

// readChunk is the first allocation for a frame's bytes (ReadFrame).
const readChunk = 4 << 10

// DecodeFrame decodes a whole frame as returned by ReadFrame (totalSize
// included). A payload frame may carry, after the command, a broker entry
// metadata block and then a checksum; both are optional, as in Pulsar. On a
// checksum mismatch it returns the frame with Cmd set (and nothing else)
// together with an error wrapping ErrChecksumMismatch.
func DecodeFrame(frame []byte) (Frame, error) {
	var f Frame
	if len(frame) < 8 {
		return f, fmt.Errorf("%w: %d bytes, need 8 for the sizes", ErrTruncated, len(frame))
	}
	total := binary.BigEndian.Uint32(frame)
	if uint64(total) != uint64(len(frame)-4) {
		if uint64(total) > uint64(len(frame)-4) {
			return f, fmt.Errorf("%w: totalSize %d, have %d bytes", ErrTruncated, total, len(frame)-4)
		}
		return f, fmt.Errorf("%w: totalSize %d, have %d bytes", ErrMalformed, total, len(frame)-4)
	}
	cmdSize := binary.BigEndian.Uint32(frame[4:])
	if uint64(cmdSize) > uint64(len(frame)-8) {
		return f, fmt.Errorf("%w: commandSize %d exceeds totalSize %d", ErrMalformed, cmdSize, total)
	}
	end := 8 + int(cmdSize) // in int: no uint32 overflow
	cmd := new(pb.BaseCommand)
	if err := proto.Unmarshal(frame[8:end], cmd); err != nil {
		return f, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	if err := checkBody(cmd); err != nil {
		return f, err
	}
	f.Cmd = cmd
	rest := frame[end:]
	if len(rest) == 0 {
		return f, nil
	}

	if hasMagic(rest, magicBrokerEntryMetadata) {
		if len(rest) < 6 {
			return Frame{}, fmt.Errorf("%w: broker entry metadata size", ErrTruncated)
		}
		size := binary.BigEndian.Uint32(rest[2:])
		if uint64(size) > uint64(len(rest)-6) {
			return Frame{}, fmt.Errorf("%w: broker entry metadata of %d bytes, %d left", ErrMalformed, size, len(rest)-6)
		}
		end := 6 + int(size)
		bem := new(pb.BrokerEntryMetadata)
		if err := proto.Unmarshal(rest[6:end], bem); err != nil {
			return Frame{}, fmt.Errorf("%w: broker entry metadata: %w", ErrBadMetadata, err)
		}
		f.BrokerEntryMetadata = bem
		rest = rest[end:]
	}
	if hasMagic(rest, magicChecksum) {
		if len(rest) < 6 {
			return Frame{}, fmt.Errorf("%w: checksum", ErrTruncated)
		}
		want := binary.BigEndian.Uint32(rest[2:])
		rest = rest[6:]
		if got := Checksum(rest); got != want {
			return Frame{Cmd: cmd}, fmt.Errorf("%w: %v: frame says 0x%08x, computed 0x%08x",
				ErrChecksumMismatch, cmd.GetType(), want, got)
		}
		f.ChecksumOK = true
	}
	meta, payload, err := DecodeEntry(rest)
	if err != nil {
		return Frame{}, err
	}
	f.Metadata, f.Payload, f.Entry = meta, payload, rest
	return f, nil
}

// DecodeEntry splits [u32 metadataSize][MessageMetadata][payload] (see
// Frame.Entry) into the decoded metadata and the payload, which aliases
// entry.
func DecodeEntry(entry []byte) (*pb.MessageMetadata, []byte, error) {
	if len(entry) < 4 {
		return nil, nil, fmt.Errorf("%w: metadata size", ErrTruncated)
	}
	size := binary.BigEndian.Uint32(entry)
	if uint64(size) > uint64(len(entry)-4) {
		return nil, nil, fmt.Errorf("%w: metadata of %d bytes, %d left", ErrMalformed, size, len(entry)-4)
	}
	end := 4 + int(size)
	meta := new(pb.MessageMetadata)
	if err := proto.Unmarshal(entry[4:end], meta); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadMetadata, err)
	}
	return meta, entry[end:], nil
}

func hasMagic(b []byte, magic uint16) bool {
	return len(b) >= 2 && binary.BigEndian.Uint16(b) == magic
}
