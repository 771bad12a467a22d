package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/isobar-mq/isobar/topic"
)

// MaxTopicPropertiesBytes bounds a partitioned topic's properties (keys
// and values summed), as the broker bounds a topic's.
const MaxTopicPropertiesBytes = 16 << 10

// UpdatePartitionedProperties sets the properties in set on a
// partitioned topic's record, then removes the keys in remove; ErrNotFound
// if name is not a partitioned topic, ErrInvalid (nothing written) for an
// empty key or properties over MaxTopicPropertiesBytes.
func (s *Store) UpdatePartitionedProperties(ctx context.Context, name topic.Name, set map[string]string, remove []string) (err error) {
	defer s.settle(ctx, &err)
	what := "partitioned topic " + name.String()
	if err := checkBase(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for k := range set {
		if k == "" {
			return fmt.Errorf("%s: %w: a property with an empty key", what, ErrInvalid)
		}
	}
	for {
		var m PartitionedMetadata
		rev, err := s.getJSON(ctx, PartitionedKey(name), what, &m)
		if err != nil {
			return err
		}
		if err := checkPartitionedRecord(name, m, s.maxPartitions()); err != nil {
			return s.corrupt(what, PartitionedKey(name), rev, err)
		}
		next, size := topic.MergeProperties(m.Properties, set, remove)
		if size > MaxTopicPropertiesBytes {
			return fmt.Errorf("%s: %w: properties of %d bytes, more than %d", what, ErrInvalid, size, MaxTopicPropertiesBytes)
		}
		if maps.Equal(next, m.Properties) {
			return nil
		}
		m.Properties = next
		err = s.replace(ctx, PartitionedKey(name), what, rev, m)
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w: %w", what, ErrConflict, err)
		}
	}
}
