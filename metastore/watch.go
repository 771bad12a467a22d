package metastore

import (
	"context"
	"fmt"
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

// Watch streams changes under prefix after revision rev (0: from now: every
// change made after Watch returns) until ctx ends; the channel is then
// closed. A watch that breaks (leader lost,
// connection gone) resumes after the last event it delivered, with a
// backoff, and loses nothing. Only when the revisions it needs were
// compacted does it send a Reset event and restart from the current
// revision; the caller then re-lists (changes between its listing and the
// restart may be delivered again, never lost).
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) <-chan Event {
	out := make(chan Event, 64)
	if rev == 0 {
		// "Now" is the store's revision when Watch is called, so a change
		// made after it returns is never missed (when the store cannot be
		// reached now, the goroutine pins it once it can).
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if r, err := s.cli.Get(pctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
			rev = r.Header.Revision + 1
		}
		cancel()
	}
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

// WatchBatch is one answer of a ProgressWatch: the events of one or more
// whole transactions (never part of one), or a progress notification.
type WatchBatch struct {
	// Events are the changes, in revision order.
	Events []Event
	// Rev is the store's revision when the batch was sent.
	Rev int64
	// Progress marks a progress notification: no events, and every
	// change under the prefix up to Rev has been delivered.
	Progress bool
}

// ProgressWatch is a watch for a caller that keeps its own copy of a
// prefix and must know how current it is (globalconfig's cache): unlike
// Watch it does not resume by itself, it delivers a transaction's changes
// together, and it answers progress requests. It ends at the first error
// (the caller re-lists and watches again) or when the context it was
// opened with ends.
type ProgressWatch interface {
	// Next waits for the next batch. Once the watch has ended it returns
	// the error that ended it, again and again: it wraps ErrCompacted
	// when the revisions it needs were compacted. ctx bounds this call
	// only.
	Next(ctx context.Context) (WatchBatch, error)
	// RequestProgress asks the store for a progress notification, which
	// Next delivers once every change up to the store's current revision
	// has been delivered.
	RequestProgress(ctx context.Context) error
}

// WatchProgress opens a ProgressWatch of the keys under prefix from
// revision rev (0: from now) that lives until ctx ends. It needs a
// leader: a member cut off from its cluster ends the watch.
func (s *Store) WatchProgress(ctx context.Context, prefix string, rev int64) ProgressWatch {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return &progressWatch{
		cli:    s.cli,
		ch:     s.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...),
		prefix: prefix,
		from:   rev,
	}
}

type progressWatch struct {
	cli    *clientv3.Client
	ch     clientv3.WatchChan
	prefix string
	from   int64
	err    error // why it ended; sticky
}

func (w *progressWatch) Next(ctx context.Context) (WatchBatch, error) {
	for w.err == nil {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return WatchBatch{}, ctx.Err()
		case resp, ok = <-w.ch:
		}
		switch {
		case !ok:
			w.err = fmt.Errorf("metastore: watch %s from revision %d: closed", w.prefix, w.from)
		case resp.CompactRevision != 0:
			w.err = fmt.Errorf("metastore: watch %s from revision %d: %w (compacted up to %d)", w.prefix, w.from, ErrCompacted, resp.CompactRevision)
		case resp.Err() != nil:
			w.err = fmt.Errorf("metastore: watch %s from revision %d: %w", w.prefix, w.from, resp.Err())
		case resp.Canceled:
			w.err = fmt.Errorf("metastore: watch %s from revision %d: canceled: %s", w.prefix, w.from, resp.CancelReason)
		case resp.IsProgressNotify():
			return WatchBatch{Rev: resp.Header.Revision, Progress: true}, nil
		case len(resp.Events) > 0:
			b := WatchBatch{Rev: resp.Header.Revision, Events: make([]Event, 0, len(resp.Events))}
			for _, ev := range resp.Events {
				e := Event{Key: string(ev.Kv.Key), Rev: ev.Kv.ModRevision}
				if ev.Type == clientv3.EventTypeDelete {
					e.Deleted = true
				} else {
					e.Value = ev.Kv.Value
				}
				b.Events = append(b.Events, e)
			}
			return b, nil
		}
	}
	return WatchBatch{}, w.err
}

func (w *progressWatch) RequestProgress(ctx context.Context) error {
	// The request must carry the watch's gRPC metadata (the leader
	// requirement) to reach the watch's stream.
	if err := w.cli.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
		return fmt.Errorf("metastore: progress request for the watch of %s: %w", w.prefix, err)
	}
	return nil
}
