package metastore

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Event is one change seen by a watch. Deleted events carry no value. A
// Reset event (Key empty, Reset true) means the watch lost history (for
// example after compaction) and the caller must re-list the prefix.
type Event struct {
	Key     string
	Value   []byte
	Rev     int64
	Deleted bool
	Reset   bool
}

// Watch streams changes under prefix after revision rev (0: from now) until
// ctx ends; the channel is then closed. When etcd cancels the watch (for
// instance because rev was compacted) a Reset event is sent and the watch
// restarts from the current revision.
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) <-chan Event {
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		next := rev
		for ctx.Err() == nil {
			opts := []clientv3.OpOption{clientv3.WithPrefix()}
			if next > 0 {
				opts = append(opts, clientv3.WithRev(next))
			}
			wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...)
			for resp := range wch {
				if err := resp.Err(); err != nil {
					break
				}
				for _, ev := range resp.Events {
					e := Event{Key: string(ev.Kv.Key), Rev: ev.Kv.ModRevision}
					if ev.Type == clientv3.EventTypeDelete {
						e.Deleted = true
					} else {
						e.Value = ev.Kv.Value
					}
					next = ev.Kv.ModRevision + 1
					select {
					case out <- e:
					case <-ctx.Done():
						return
					}
				}
			}
			if ctx.Err() != nil {
				return
			}
			next = 0
			select {
			case out <- Event{Reset: true}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
