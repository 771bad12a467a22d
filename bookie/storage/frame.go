package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// Journal files and entry logs share one framing (docs/format/journal.md):
// a 32-byte file header, then frames of a 20-byte header and a payload.
//
// File header:
//
//	0  [8]  magic
//	8  u32  format version (1)
//	12 u32  reserved, zero
//	16 u64  file id (the number in the file name)
//	24 u32  reserved, zero
//	28 u32  CRC32C of bytes 0..28
//
// Frame header, at file offset off:
//
//	0  u32  payload length
//	4  u8   kind
//	5  u8   flags
//	6  u16  reserved, zero
//	8  u32  batch delta: off minus the offset where this frame's write batch began
//	12 u32  CRC32C of the payload
//	16 u32  CRC32C of (file id u64, off u64, header bytes 0..16)
//
// All integers are little-endian.

const (
	fileHeaderSize  = 32
	frameHeaderSize = 20
	// maxFramePayload bounds every payload length the decoders accept.
	maxFramePayload = 64 << 20
	formatVersion   = 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var (
	journalMagic  = [8]byte{'I', 'S', 'B', 'R', 'J', 'R', 'N', 'L'}
	entryLogMagic = [8]byte{'I', 'S', 'B', 'R', 'E', 'L', 'O', 'G'}
)

func appendFileHeader(dst []byte, magic [8]byte, id uint64) []byte {
	var h [fileHeaderSize]byte
	copy(h[0:8], magic[:])
	binary.LittleEndian.PutUint32(h[8:], formatVersion)
	binary.LittleEndian.PutUint64(h[16:], id)
	binary.LittleEndian.PutUint32(h[28:], crc32.Checksum(h[:28], crcTable))
	return append(dst, h[:]...)
}

// checkFileHeader validates a file header for the file with the given id.
func checkFileHeader(b []byte, magic [8]byte, id uint64) error {
	switch {
	case len(b) < fileHeaderSize:
		return errors.New("short file header")
	case [8]byte(b[0:8]) != magic:
		return errors.New("bad magic")
	case binary.LittleEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], crcTable):
		return errors.New("file header checksum mismatch")
	case binary.LittleEndian.Uint32(b[8:]) != formatVersion:
		return fmt.Errorf("unsupported format version %d", binary.LittleEndian.Uint32(b[8:]))
	case binary.LittleEndian.Uint64(b[16:]) != id:
		return fmt.Errorf("header names file id %d", binary.LittleEndian.Uint64(b[16:]))
	}
	return nil
}

// headerCRC is the seeded checksum of a frame header: binding the file id
// and the offset into it means a frame copied elsewhere (inside an entry's
// data, into another file, to another offset) never validates.
func headerCRC(fileID uint64, off int64, h []byte) uint32 {
	var b [32]byte
	binary.LittleEndian.PutUint64(b[0:], fileID)
	binary.LittleEndian.PutUint64(b[8:], uint64(off))
	copy(b[16:], h[:16])
	return crc32.Checksum(b[:], crcTable)
}

// appendFrame appends one frame whose payload is prefix followed by data. off
// is the file offset the frame will be written at and batchStart the offset
// at which the current write batch (everything written before the next
// sync) began.
func appendFrame(dst []byte, fileID uint64, off, batchStart int64, kind, flags uint8, prefix, data []byte) []byte {
	n := len(prefix) + len(data)
	start := len(dst)
	dst = append(dst, make([]byte, frameHeaderSize)...)
	h := dst[start:]
	binary.LittleEndian.PutUint32(h[0:], uint32(n))
	h[4] = kind
	h[5] = flags
	binary.LittleEndian.PutUint32(h[8:], uint32(off-batchStart))
	crc := crc32.Update(crc32.Checksum(prefix, crcTable), crcTable, data)
	binary.LittleEndian.PutUint32(h[12:], crc)
	binary.LittleEndian.PutUint32(h[16:], headerCRC(fileID, off, h))
	dst = append(dst, prefix...)
	return append(dst, data...)
}

// frameHeader is a decoded, validated frame header.
type frameHeader struct {
	length     int
	kind       uint8
	flags      uint8
	batchStart int64
	payloadCRC uint32
}

// parseFrameHeader validates the header bytes of a frame at off in a file of
// the given id and size. It checks everything that does not need the
// payload, so a resync can try every offset cheaply.
func parseFrameHeader(h []byte, fileID uint64, off, size int64, validKind func(uint8) bool) (frameHeader, bool) {
	if len(h) < frameHeaderSize || off < fileHeaderSize {
		return frameHeader{}, false
	}
	length := binary.LittleEndian.Uint32(h[0:])
	delta := int64(binary.LittleEndian.Uint32(h[8:]))
	if h[6] != 0 || h[7] != 0 || !validKind(h[4]) || length > maxFramePayload ||
		off+frameHeaderSize+int64(length) > size || delta > off-fileHeaderSize {
		return frameHeader{}, false
	}
	if binary.LittleEndian.Uint32(h[16:]) != headerCRC(fileID, off, h) {
		return frameHeader{}, false
	}
	return frameHeader{
		length:     int(length),
		kind:       h[4],
		flags:      h[5],
		batchStart: off - delta,
		payloadCRC: binary.LittleEndian.Uint32(h[12:]),
	}, true
}

// frame is a valid frame found by a scanner. payload is only valid until the
// scanner's next call.
type frame struct {
	frameHeader
	off     int64
	end     int64
	payload []byte
}

// frameScanner reads frames from a file through a read-ahead window.
type frameScanner struct {
	f         vfs.File
	fileID    uint64
	size      int64
	validKind func(uint8) bool
	// validPayload checks kind-specific payload structure; a frame failing
	// it is treated like one failing its checksum.
	validPayload func(kind uint8, payload []byte) bool

	win    []byte
	winOff int64
}

const scanWindow = 1 << 20

func newFrameScanner(f vfs.File, fileID uint64, size int64, validKind func(uint8) bool, validPayload func(uint8, []byte) bool) *frameScanner {
	return &frameScanner{f: f, fileID: fileID, size: size, validKind: validKind, validPayload: validPayload}
}

// bytes returns the file's bytes [off, off+n), which must lie within size.
func (s *frameScanner) bytes(off int64, n int) ([]byte, error) {
	if off >= s.winOff && off+int64(n) <= s.winOff+int64(len(s.win)) {
		return s.win[off-s.winOff : off-s.winOff+int64(n)], nil
	}
	want := int64(max(n, scanWindow))
	want = min(want, s.size-off)
	if want < int64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	if int64(cap(s.win)) < want {
		s.win = make([]byte, want)
	}
	s.win = s.win[:want]
	s.winOff = off
	m, err := s.f.ReadAt(s.win, off)
	if m < len(s.win) {
		s.win = s.win[:m]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return s.win[:n], nil
}

// frameAt decodes the frame at off. ok is false if there is no valid frame
// there; err is only for I/O errors.
func (s *frameScanner) frameAt(off int64) (fr frame, ok bool, err error) {
	if off+frameHeaderSize > s.size {
		return frame{}, false, nil
	}
	h, err := s.bytes(off, frameHeaderSize)
	if err != nil {
		return frame{}, false, err
	}
	fh, ok := parseFrameHeader(h, s.fileID, off, s.size, s.validKind)
	if !ok {
		return frame{}, false, nil
	}
	p, err := s.bytes(off+frameHeaderSize, fh.length)
	if err != nil {
		return frame{}, false, err
	}
	if crc32.Checksum(p, crcTable) != fh.payloadCRC {
		return frame{}, false, nil
	}
	if s.validPayload != nil && !s.validPayload(fh.kind, p) {
		return frame{}, false, nil
	}
	return frame{frameHeader: fh, off: off, end: off + frameHeaderSize + int64(fh.length), payload: p}, true, nil
}

// resync returns the offset of the first valid frame at or after off, or -1.
func (s *frameScanner) resync(off int64) (int64, error) {
	for ; off+frameHeaderSize <= s.size; off++ {
		_, ok, err := s.frameAt(off)
		if err != nil {
			return -1, err
		}
		if ok {
			return off, nil
		}
	}
	return -1, nil
}

// walkResult describes a walk over a file's frames.
type walkResult struct {
	// firstBad is the offset of the first byte that is not a valid frame, or
	// -1 if the frames run cleanly to the end of the file.
	firstBad int64
	// midCorrupt is set when a valid frame of a later write batch follows
	// firstBad: since a batch is only written after the previous one was
	// synced, the bad bytes were durable, so this is corruption, not a torn
	// tail left by a crash.
	midCorrupt bool
	// end is where the last valid frame visited ends.
	end int64
}

// walk visits the valid frames from start to the end of the file. After the
// first invalid byte it keeps looking for valid frames (one byte at a time)
// to classify the damage, visiting them only if visitAfterBad is set, and
// stops as soon as it finds mid-file corruption.
func (s *frameScanner) walk(start int64, visitAfterBad bool, visit func(fr *frame) error) (walkResult, error) {
	res := walkResult{firstBad: -1, end: start}
	off := start
	for off < s.size {
		fr, ok, err := s.frameAt(off)
		if err != nil {
			return res, err
		}
		if !ok {
			if res.firstBad < 0 {
				res.firstBad = off
			}
			next, err := s.resync(off + 1)
			if err != nil {
				return res, err
			}
			if next < 0 {
				break
			}
			off = next
			continue
		}
		if res.firstBad >= 0 && fr.batchStart > res.firstBad {
			res.midCorrupt = true
			if !visitAfterBad {
				return res, nil
			}
		}
		if res.firstBad < 0 || visitAfterBad {
			if err := visit(&fr); err != nil {
				return res, err
			}
			res.end = fr.end
		}
		off = fr.end
	}
	return res, nil
}
