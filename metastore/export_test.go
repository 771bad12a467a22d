package metastore

import (
	"context"
	"errors"
	"fmt"
)

// Test-only operations on a store. They live here, compiled only into the
// package's tests, not in the production API.

// DBSize returns the size of the backend database of the first member
// the store is connected to, and the part of it in use (etcd's Status:
// what the space quota is checked against, and what compaction and
// defragmentation would leave).
func (s *Store) DBSize(ctx context.Context) (size, inUse int64, err error) {
	eps := s.cli.Endpoints()
	if len(eps) == 0 {
		return 0, 0, errors.New("metastore: db size: no endpoint")
	}
	st, err := s.cli.Status(ctx, eps[0])
	if err != nil {
		return 0, 0, fmt.Errorf("metastore: db size: %w", err)
	}
	return st.DbSize, st.DbSizeInUse, nil
}
