// Package proto is the bookie network protocol codec: frames, requests,
// responses and the ledger entry format with its CRC32C. It is pure: it takes
// and returns bytes and never touches a connection, so it can be table-tested
// and fuzzed. The format is written down in docs/format/bookie-protocol.md.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the only protocol version this codec speaks.
const Version = 1

// HeaderSize is the size of the fixed part of a frame after its length prefix:
// version, type, flags/status and request id.
const HeaderSize = 1 + 1 + 2 + 8

// DefaultMaxFrameSize bounds a frame (after the length prefix) unless configured.
const DefaultMaxFrameSize = 6 << 20

// Op is a request type. A response carries its request's op with RespBit set.
type Op uint8

// The operations a bookie serves.
const (
	OpAdd     Op = 1 // write an entry
	OpRead    Op = 2 // read an entry (optionally fencing the ledger first)
	OpReadLAC Op = 3 // read the last-add-confirmed, optionally long-polling for a newer one
	OpFence   Op = 4 // fence a ledger: no more non-recovery adds
	OpDelete  Op = 5 // delete a ledger's entries
	OpInfo    Op = 6 // bookie id, disk space, read-only state
)

// RespBit marks a frame as a response.
const RespBit = 0x80

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "add"
	case OpRead:
		return "read"
	case OpReadLAC:
		return "read-lac"
	case OpFence:
		return "fence"
	case OpDelete:
		return "delete"
	case OpInfo:
		return "info"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Request flags.
const (
	// FlagRecovery marks an add made by ledger recovery; it is accepted on a fenced ledger.
	FlagRecovery uint16 = 1 << 0
	// FlagFence on a read fences the ledger before reading.
	FlagFence uint16 = 1 << 1
)

// Codec errors.
var (
	ErrFrameTooLarge = errors.New("bookie proto: frame too large")
	ErrMalformed     = errors.New("bookie proto: malformed frame")
	ErrVersion       = errors.New("bookie proto: unsupported version")
)

// Request is a decoded request. Fields not used by its Op are zero.
type Request struct {
	Op      Op
	Flags   uint16
	ID      uint64 // request id, echoed in the response; many may be in flight
	Ledger  uint64
	Entry   uint64 // add, read
	PrevLAC int64  // read-lac: answer once the LAC is greater than this (long poll)
	Timeout uint32 // read-lac: long-poll timeout in milliseconds; 0 answers at once
	Payload []byte // add: the whole entry (header and data) as made by EncodeEntry
}

// Response is a decoded response. Fields not used by its Op are zero.
type Response struct {
	Op       Op
	Status   Status
	ID       uint64
	Ledger   uint64
	Entry    uint64
	LAC      int64  // read-lac, fence
	Payload  []byte // read: the entry; info: the bookie id
	Total    uint64 // info: ledger disk bytes
	Free     uint64 // info: free ledger disk bytes
	ReadOnly bool   // info
}

// AppendRequest appends the framed request (length prefix included) to dst.
func AppendRequest(dst []byte, r *Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, Version, byte(r.Op))
	dst = binary.BigEndian.AppendUint16(dst, r.Flags)
	dst = binary.BigEndian.AppendUint64(dst, r.ID)
	switch r.Op {
	case OpAdd:
		dst = binary.BigEndian.AppendUint64(dst, r.Ledger)
		dst = binary.BigEndian.AppendUint64(dst, r.Entry)
		dst = append(dst, r.Payload...)
	case OpRead:
		dst = binary.BigEndian.AppendUint64(dst, r.Ledger)
		dst = binary.BigEndian.AppendUint64(dst, r.Entry)
	case OpReadLAC:
		dst = binary.BigEndian.AppendUint64(dst, r.Ledger)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.PrevLAC))
		dst = binary.BigEndian.AppendUint32(dst, r.Timeout)
	case OpFence, OpDelete:
		dst = binary.BigEndian.AppendUint64(dst, r.Ledger)
	case OpInfo:
	default:
		dst = append(dst, r.Payload...)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendResponse appends the framed response (length prefix included) to dst.
// A response whose status is not OK carries only the ledger and entry.
func AppendResponse(dst []byte, r *Response) []byte {
	dst, payload := AppendResponseHead(dst, r)
	return append(dst, payload...)
}

// AppendResponseHead appends the framed response to dst without its
// payload, which it returns: the length prefix counts it, and the payload
// must follow the head on the wire. A server writes the two from their
// own buffers (writev) and so never copies an entry it read.
func AppendResponseHead(dst []byte, r *Response) (_, payload []byte) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, Version, byte(r.Op)|RespBit)
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.Status))
	dst = binary.BigEndian.AppendUint64(dst, r.ID)
	switch {
	case r.Op == OpInfo && r.Status == StatusOK:
		dst = binary.BigEndian.AppendUint64(dst, r.Total)
		dst = binary.BigEndian.AppendUint64(dst, r.Free)
		ro := byte(0)
		if r.ReadOnly {
			ro = 1
		}
		dst = append(dst, ro)
		payload = r.Payload
	case r.Op == OpInfo:
	default:
		dst = binary.BigEndian.AppendUint64(dst, r.Ledger)
		dst = binary.BigEndian.AppendUint64(dst, r.Entry)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.LAC))
		if r.Status == StatusOK {
			payload = r.Payload
		}
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4+len(payload)))
	return dst, payload
}

// ReadFrame reads one frame from r into buf (grown as needed) and returns the
// frame without its length prefix. A frame longer than max is not read:
// ErrFrameTooLarge is returned and the stream is no longer usable.
func ReadFrame(r io.Reader, max int, buf []byte) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lenBuf[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	if n < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrMalformed, n, HeaderSize)
	}
	// The buffer grows with what arrives (doubling from 4 KiB, or from
	// what r has buffered already): a peer that announces a large frame
	// and sends little of it costs what it sent. A frame that has arrived
	// whole (the common case behind a bufio.Reader) is one allocation of
	// its size, not 4, 8, 16 KiB... each copied into the next.
	first := 4 << 10
	if b, ok := r.(interface{ Buffered() int }); ok && b.Buffered() > first {
		first = b.Buffered()
	}
	if cap(buf) < min(int(n), first) {
		buf = make([]byte, 0, min(int(n), first))
	}
	buf = buf[:0]
	for len(buf) < int(n) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(int(n), 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):min(int(n), cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// FrameHeader is the fixed part of a frame.
type FrameHeader struct {
	Type  uint8 // op, with RespBit on responses
	Flags uint16
	ID    uint64
}

// DecodeHeader decodes the fixed part of a frame (without length prefix).
func DecodeHeader(frame []byte) (FrameHeader, error) {
	if len(frame) < HeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: short header", ErrMalformed)
	}
	if frame[0] != Version {
		return FrameHeader{}, fmt.Errorf("%w: %d", ErrVersion, frame[0])
	}
	return FrameHeader{
		Type:  frame[1],
		Flags: binary.BigEndian.Uint16(frame[2:]),
		ID:    binary.BigEndian.Uint64(frame[4:]),
	}, nil
}

// DecodeRequest decodes a request frame (without length prefix). Payload
// aliases frame. An unknown op decodes without error (Op holds the value) so
// the server can answer StatusUnknownOp with the request id.
func DecodeRequest(frame []byte) (Request, error) {
	h, err := DecodeHeader(frame)
	if err != nil {
		return Request{}, err
	}
	if h.Type&RespBit != 0 {
		return Request{}, fmt.Errorf("%w: response type %#x where a request was expected", ErrMalformed, h.Type)
	}
	req := Request{Op: Op(h.Type), Flags: h.Flags, ID: h.ID}
	b := frame[HeaderSize:]
	need := func(n int) error {
		if len(b) < n {
			return fmt.Errorf("%w: %s request body is %d bytes, need %d", ErrMalformed, req.Op, len(b), n)
		}
		return nil
	}
	switch req.Op {
	case OpAdd:
		if err := need(16); err != nil {
			return req, err
		}
		req.Ledger = binary.BigEndian.Uint64(b)
		req.Entry = binary.BigEndian.Uint64(b[8:])
		req.Payload = b[16:]
	case OpRead:
		if err := need(16); err != nil {
			return req, err
		}
		req.Ledger = binary.BigEndian.Uint64(b)
		req.Entry = binary.BigEndian.Uint64(b[8:])
	case OpReadLAC:
		if err := need(20); err != nil {
			return req, err
		}
		req.Ledger = binary.BigEndian.Uint64(b)
		req.PrevLAC = int64(binary.BigEndian.Uint64(b[8:]))
		req.Timeout = binary.BigEndian.Uint32(b[16:])
	case OpFence, OpDelete:
		if err := need(8); err != nil {
			return req, err
		}
		req.Ledger = binary.BigEndian.Uint64(b)
	case OpInfo:
	default:
		req.Payload = b
	}
	return req, nil
}

// DecodeResponse decodes a response frame (without length prefix). Payload
// aliases frame.
func DecodeResponse(frame []byte) (Response, error) {
	h, err := DecodeHeader(frame)
	if err != nil {
		return Response{}, err
	}
	if h.Type&RespBit == 0 {
		return Response{}, fmt.Errorf("%w: request type %#x where a response was expected", ErrMalformed, h.Type)
	}
	resp := Response{Op: Op(h.Type &^ RespBit), Status: Status(h.Flags), ID: h.ID}
	b := frame[HeaderSize:]
	if resp.Op == OpInfo {
		if resp.Status != StatusOK {
			return resp, nil
		}
		if len(b) < 17 {
			return resp, fmt.Errorf("%w: info response body is %d bytes, need 17", ErrMalformed, len(b))
		}
		resp.Total = binary.BigEndian.Uint64(b)
		resp.Free = binary.BigEndian.Uint64(b[8:])
		resp.ReadOnly = b[16] != 0
		resp.Payload = b[17:]
		return resp, nil
	}
	if len(b) < 24 {
		return resp, fmt.Errorf("%w: %s response body is %d bytes, need 24", ErrMalformed, resp.Op, len(b))
	}
	resp.Ledger = binary.BigEndian.Uint64(b)
	resp.Entry = binary.BigEndian.Uint64(b[8:])
	resp.LAC = int64(binary.BigEndian.Uint64(b[16:]))
	if resp.Status == StatusOK {
		resp.Payload = b[24:]
	}
	return resp, nil
}
