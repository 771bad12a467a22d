package globalconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SnapshotFile is the name of the persisted copy inside Config.Persist.
const SnapshotFile = "globalconfig.json"

const snapshotVersion = 1

// fileSnapshot is the persisted copy; see docs/globalconfig.md.
type fileSnapshot struct {
	Version   int       `json:"version"`
	Prefix    string    `json:"prefix"`
	ClusterID uint64    `json:"clusterId"`
	Revision  int64     `json:"revision"`
	SyncedAt  time.Time `json:"syncedAt"`
	KVs       []fileKV  `json:"kvs"`
}

type fileKV struct {
	Key   string `json:"key"`
	Value []byte `json:"value"` // base64 in JSON
	Rev   int64  `json:"rev"`
}

// encodeSnapshot renders a snapshot as the bytes of the persisted file.
func encodeSnapshot(s fileSnapshot) ([]byte, error) {
	s.Version = snapshotVersion
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeSnapshot parses and checks a persisted file for prefix.
func decodeSnapshot(b []byte, prefix string) (fileSnapshot, error) {
	var s fileSnapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fileSnapshot{}, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if s.Version != snapshotVersion {
		return fileSnapshot{}, fmt.Errorf("%w: version %d, want %d", ErrBadSnapshot, s.Version, snapshotVersion)
	}
	if s.Prefix != prefix {
		return fileSnapshot{}, fmt.Errorf("%w: prefix %q, want %q", ErrBadSnapshot, s.Prefix, prefix)
	}
	if s.Revision < 0 {
		return fileSnapshot{}, fmt.Errorf("%w: negative revision %d", ErrBadSnapshot, s.Revision)
	}
	for _, kv := range s.KVs {
		if !strings.HasPrefix(kv.Key, prefix) {
			return fileSnapshot{}, fmt.Errorf("%w: key %q outside prefix", ErrBadSnapshot, kv.Key)
		}
		if kv.Rev > s.Revision {
			return fileSnapshot{}, fmt.Errorf("%w: key %q at revision %d after snapshot revision %d", ErrBadSnapshot, kv.Key, kv.Rev, s.Revision)
		}
	}
	return s, nil
}

// loadSnapshot reads the persisted copy from dir; the error wraps
// fs.ErrNotExist when there is none.
func loadSnapshot(dir, prefix string) (fileSnapshot, error) {
	path := filepath.Join(dir, SnapshotFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fileSnapshot{}, err
	}
	s, err := decodeSnapshot(b, prefix)
	if err != nil {
		return fileSnapshot{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
