package mledger

import (
	"context"
	"fmt"
	"maps"

	"github.com/isobar-mq/isobar/topic"
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
		next, size := topic.MergeProperties(t.Properties, set, remove)
		if size > MaxPropertiesBytes {
			return fmt.Errorf("mledger %s: %w: %d bytes, more than %d", m.name, ErrInvalidProperties, size, MaxPropertiesBytes)
		}
		t.Properties = next
		return nil
	})
}
