package mledger

import (
	"context"
	"fmt"
	"maps"
)

// MaxPropertiesBytes bounds a managed ledger's properties (keys and values
// summed): they are rewritten with the metadata on every cursor change.
const MaxPropertiesBytes = 16 << 10

// Properties returns a copy of the managed ledger's properties (nil when
// it has none).
func (m *ManagedLedger) Properties() map[string]string {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return maps.Clone(m.meta.Properties)
}

// UpdateProperties sets the properties in set, then removes the keys in
// remove, and persists the result; ErrInvalidProperties (nothing written)
// for an empty key or a result over MaxPropertiesBytes.
func (m *ManagedLedger) UpdateProperties(ctx context.Context, set map[string]string, remove []string) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	for k := range set {
		if k == "" {
			return fmt.Errorf("mledger %s: %w: an empty key", m.name, ErrInvalidProperties)
		}
	}
	return m.update(ctx, func(t *topicMeta) error {
		next := maps.Clone(t.Properties)
		if next == nil {
			next = map[string]string{}
		}
		maps.Copy(next, set)
		for _, k := range remove {
			delete(next, k)
		}
		size := 0
		for k, v := range next {
			size += len(k) + len(v)
		}
		if size > MaxPropertiesBytes {
			return fmt.Errorf("mledger %s: %w: %d bytes, more than %d", m.name, ErrInvalidProperties, size, MaxPropertiesBytes)
		}
		if len(next) == 0 {
			next = nil
		}
		t.Properties = next
		return nil
	})
}
