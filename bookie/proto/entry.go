package proto

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// EntryHeaderSize is the size of the header the ledger writer puts in front of
// every entry's data.
const EntryHeaderSize = 8 + 8 + 8 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrEntryCorrupt means an entry's checksum or header does not match. It
// is ErrCorrupt: a bookie that reads such an entry answers StatusCorrupt.
var ErrEntryCorrupt = Sentinel(StatusCorrupt, "bookie proto: entry corrupt")

// Entry is a decoded ledger entry.
type Entry struct {
	Ledger uint64
	ID     uint64
	LAC    int64  // the writer's last-add-confirmed when it sent this entry (piggybacked)
	Length uint64 // the ledger's total data length including this entry
	Data   []byte // aliases the encoded bytes
}

// AppendEntry appends an encoded entry to dst: the header, a CRC32C over the
// header and the data, then the data.
func AppendEntry(dst []byte, ledger, id uint64, lac int64, length uint64, data []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, ledger)
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint64(dst, uint64(lac))
	dst = binary.BigEndian.AppendUint64(dst, length)
	crc := crc32.Update(0, castagnoli, dst[start:])
	crc = crc32.Update(crc, castagnoli, data)
	dst = binary.BigEndian.AppendUint32(dst, crc)
	return append(dst, data...)
}

// DecodeEntry decodes and verifies an encoded entry. Data aliases b.
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < EntryHeaderSize {
		return Entry{}, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrEntryCorrupt, len(b), EntryHeaderSize)
	}
	e := Entry{
		Ledger: binary.BigEndian.Uint64(b),
		ID:     binary.BigEndian.Uint64(b[8:]),
		LAC:    int64(binary.BigEndian.Uint64(b[16:])),
		Length: binary.BigEndian.Uint64(b[24:]),
		Data:   b[EntryHeaderSize:],
	}
	want := binary.BigEndian.Uint32(b[32:])
	crc := crc32.Update(0, castagnoli, b[:32])
	crc = crc32.Update(crc, castagnoli, e.Data)
	if crc != want {
		return Entry{}, fmt.Errorf("%w: ledger %d entry %d: crc32c %#08x, header says %#08x", ErrEntryCorrupt, e.Ledger, e.ID, crc, want)
	}
	return e, nil
}
