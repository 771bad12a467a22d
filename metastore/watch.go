package metastore

import (
	"context"
	"time"

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
// ctx ends; the channel is then closed. A watch that breaks (leader lost,
// connection gone) resumes after the last event it delivered, with a
// backoff, and loses nothing. Only when the revisions it needs were
// compacted does it send a Reset event and restart from the current
// revision; the caller then re-lists (changes between its listing and the
// restart may be delivered again, never lost).
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) <-chan Event {
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		next := rev
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			if next == 0 {
				// Pin "now" to a revision, so a watch that breaks before
				// its first event resumes from there and misses nothing.
				if r, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
					next = r.Header.Revision + 1
				}
			}
			opts := []clientv3.OpOption{clientv3.WithPrefix()}
			if next > 0 {
				opts = append(opts, clientv3.WithRev(next))
			}
			wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...)
			compacted := false
			for resp := range wch {
				if resp.CompactRevision != 0 {
					compacted = true
					break
				}
				if err := resp.Err(); err != nil {
					break
				}
				backoff = 100 * time.Millisecond
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
			if !compacted {
				// Resume after what was delivered, once the backoff passed.
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
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
