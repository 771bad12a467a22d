package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// The checkpoint file (LedgerDir/CHECKPOINT) says how far the journal has
// been moved into ledger storage (docs/format/entrylog.md):
//
//	0  [8] magic "ISBRCKPT"
//	8  u32 format version (1)
//	12 u32 reserved, zero
//	16 u64 journal file id
//	24 u64 journal offset
//	32 u64 next entry log id
//	40 u32 reserved, zero
//	44 u32 CRC32C of bytes 0..44
const (
	checkpointName = "CHECKPOINT"
	checkpointSize = 48
)

var checkpointMagic = [8]byte{'I', 'S', 'B', 'R', 'C', 'K', 'P', 'T'}

type checkpoint struct {
	valid     bool // false: no checkpoint yet, replay the whole journal
	journal   journalPos
	nextLogID uint64
}

func encodeCheckpoint(cp checkpoint) []byte {
	b := make([]byte, checkpointSize)
	copy(b, checkpointMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	binary.LittleEndian.PutUint64(b[16:], cp.journal.file)
	binary.LittleEndian.PutUint64(b[24:], uint64(cp.journal.off))
	binary.LittleEndian.PutUint64(b[32:], cp.nextLogID)
	binary.LittleEndian.PutUint32(b[44:], crc32.Checksum(b[:44], crcTable))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	switch {
	case len(b) != checkpointSize:
		return checkpoint{}, fmt.Errorf("size %d, want %d", len(b), checkpointSize)
	case [8]byte(b[0:8]) != checkpointMagic:
		return checkpoint{}, errors.New("bad magic")
	case binary.LittleEndian.Uint32(b[44:]) != crc32.Checksum(b[:44], crcTable):
		return checkpoint{}, errors.New("checksum mismatch")
	case binary.LittleEndian.Uint32(b[8:]) != formatVersion:
		return checkpoint{}, fmt.Errorf("unsupported format version %d", binary.LittleEndian.Uint32(b[8:]))
	}
	off := binary.LittleEndian.Uint64(b[24:])
	if off > 1<<62 {
		return checkpoint{}, fmt.Errorf("journal offset %d out of range", off)
	}
	return checkpoint{
		valid:     true,
		journal:   journalPos{file: binary.LittleEndian.Uint64(b[16:]), off: int64(off)},
		nextLogID: binary.LittleEndian.Uint64(b[32:]),
	}, nil
}

// readCheckpoint reads the checkpoint; a missing one is the zero checkpoint.
func readCheckpoint(fsys vfs.FS, dir string) (checkpoint, error) {
	name := filepath.Join(dir, checkpointName)
	b, err := readSmallFile(fsys, name, checkpointSize)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, nil
	}
	if err != nil {
		return checkpoint{}, fmt.Errorf("storage: read checkpoint: %w", err)
	}
	cp, err := decodeCheckpoint(b)
	if err != nil {
		return checkpoint{}, &CorruptionError{File: name, Reason: "checkpoint: " + err.Error()}
	}
	return cp, nil
}

// writeCheckpoint replaces the checkpoint atomically and durably: write a
// temporary file, sync it, rename it over the old one, sync the directory.
func writeCheckpoint(fsys vfs.FS, dir string, cp checkpoint) error {
	return writeFileAtomic(fsys, dir, checkpointName, encodeCheckpoint(cp))
}

func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// readSmallFile reads a file that should hold at most limit bytes; of a
// bigger one it reads only limit+1 bytes, so the decoder rejects it without
// a large allocation.
func readSmallFile(fsys vfs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(fi.Size(), limit+1))
	if n, err := f.ReadAt(b, 0); n < len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
