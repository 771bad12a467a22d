package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrTaken is wrapped by the error of a registration that found its key
// held by someone else (a *TakenError tells who).
var ErrTaken = errors.New("metastore: registration key held by another member")

// ErrNotRegistered is returned by Registration.Refresh while the
// registration has no lease (it was lost and is being made again) or
// after Close.
var ErrNotRegistered = errors.New("metastore: not registered")

// TakenError is the error of a registration whose key another member
// holds. It wraps ErrTaken and, when waiting ended with the context, the
// context's error.
type TakenError struct {
	Key    string
	Value  []byte // the live registration's value
	Lease  int64  // its lease (0: none)
	Waited time.Duration
	Cause  error // why waiting stopped early (the context's error), if it did
}

func (e *TakenError) Error() string {
	s := fmt.Sprintf("metastore: %s is registered by another member (lease %x)", e.Key, e.Lease)
	if e.Waited > 0 {
		s += fmt.Sprintf(" and still was after %v", e.Waited.Round(time.Millisecond))
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns ErrTaken and the cause.
func (e *TakenError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrTaken, e.Cause}
	}
	return []error{ErrTaken}
}

// Verdict is what Register does about a live registration at its key
// that it did not make.
type Verdict int

const (
	// WaitGone waits for the registration to go away, up to
	// RegisterConfig.Wait, and then fails with ErrTaken.
	WaitGone Verdict = iota
	// TakeOver: it is this member's previous life (a crashed process's
	// lease runs on for up to a TTL). Register revokes its lease, which
	// deletes every key under it, and registers at once.
	TakeOver
	// Refuse fails with ErrTaken at once.
	Refuse
)

// RegisterConfig describes a registration: a key that says a member is
// alive, attached to a lease the member keeps alive.
type RegisterConfig struct {
	// Key is the registration key. Required.
	Key string
	// Value is what is stored at Key. It is called for every write: the
	// first registration, each re-registration and each Refresh, so it
	// should describe the member as it is at that moment. An error fails
	// that write. Required.
	Value func() ([]byte, error)
	// TTL is the lease's time to live: how long the key outlives a member
	// that died or was cut off. At least 1s (etcd may raise it to its own
	// minimum). Required.
	TTL time.Duration
	// Existing judges a live registration at Key that this Registration
	// did not make, from its value. Nil judges WaitGone. When
	// re-registering after losing its lease, a Registration takes over
	// only its own last lease: a TakeOver verdict on any other is a newer
	// life of the same member, registered after this one, and counts as
	// Refuse (the two do not fight over the key).
	Existing func(value []byte) Verdict
	// Wait bounds how long Register waits for a registration judged
	// WaitGone to go away; zero fails at once.
	Wait time.Duration
	// OnLost, when set, is called from the Registration's goroutine when
	// the lease is lost (its keep-alives failed for longer than the TTL,
	// or someone revoked it), before registering again. Keys under the
	// lost lease are gone or about to go; the Registration revokes it to
	// make sure. It is not called for Close or Abort.
	OnLost func(lost *Lease)
	// Logger receives registration changes; nil discards them.
	Logger *slog.Logger
}

// Registration is a key kept under a lease: Register makes it, and it is
// made again by itself when the lease is lost, until Close or Abort. It
// is safe for concurrent use.
type Registration struct {
	m   Meta
	cfg RegisterConfig
	log *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	lease  *Lease // nil while not registered
	last   int64  // the last lease this Registration registered with
	err    error  // why the last attempt failed; nil once registered
	closed bool
}

// maxTakeOvers bounds how often one attempt takes the key over: a key
// that keeps coming back is contended, not a previous life.
const maxTakeOvers = 8

// Register creates cfg.Key under a new lease (create-if-absent) and keeps
// the lease alive and the key registered until Close or Abort. A live
// registration at the key is judged by cfg.Existing: taken over at once,
// waited for (up to cfg.Wait), or refused; a registration Register cannot
// make fails it (ErrTaken, or the store's error) and leaves nothing
// behind.
func Register(ctx context.Context, m Meta, cfg RegisterConfig) (*Registration, error) {
	switch {
	case cfg.Key == "":
		return nil, errors.New("metastore: register: a key is required")
	case cfg.Value == nil:
		return nil, fmt.Errorf("metastore: register %s: a value function is required", cfg.Key)
	case cfg.TTL < time.Second:
		return nil, fmt.Errorf("metastore: register %s: TTL %v is under etcd's 1s granularity", cfg.Key, cfg.TTL)
	case cfg.Wait < 0:
		return nil, fmt.Errorf("metastore: register %s: negative wait %v", cfg.Key, cfg.Wait)
	}
	r := &Registration{m: m, cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("key", cfg.Key)
	l, err := r.attempt(ctx, true)
	if err != nil {
		return nil, err
	}
	r.lease, r.last = l, l.ID()
	rctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(rctx)
	r.log.Debug("registered", "lease", fmt.Sprintf("%x", l.ID()), "ttl", cfg.TTL)
	return r, nil
}

// Key is the registration key.
func (r *Registration) Key() string { return r.cfg.Key }

// Lease is the lease the key is registered under now, for other keys that
// must live and die with the registration; nil while not registered.
func (r *Registration) Lease() *Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease == nil || r.lease.Lost() {
		return nil
	}
	return r.lease
}

// Registered reports whether the key is registered now: a lease is held
// and the Registration is not closed.
func (r *Registration) Registered() bool { return r.Lease() != nil }

// Err is nil while registered; otherwise why not (the last failed
// attempt's error, or ErrNotRegistered).
func (r *Registration) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return fmt.Errorf("%w: %s: closed", ErrNotRegistered, r.cfg.Key)
	case r.lease != nil && !r.lease.Lost():
		return nil
	case r.err != nil:
		return r.err
	}
	return fmt.Errorf("%w: %s: lease lost; registering again", ErrNotRegistered, r.cfg.Key)
}

// Refresh writes the value of cfg.Value under the current lease (to
// publish a change: free space, load, a draining mark).
// ErrNotRegistered when there is no lease now; the next registration
// writes a fresh value anyway.
func (r *Registration) Refresh(ctx context.Context) error {
	l := r.Lease()
	if l == nil {
		return fmt.Errorf("%w: %s", ErrNotRegistered, r.cfg.Key)
	}
	val, err := r.cfg.Value()
	if err != nil {
		return fmt.Errorf("metastore: refresh %s: %w", r.cfg.Key, err)
	}
	if _, err := l.Put(ctx, r.cfg.Key, val); err != nil {
		return err
	}
	return nil
}

// Close stops registering and revokes the lease: the key, and every other
// key under the lease, vanish at once. When the store cannot be reached
// they expire with the TTL instead, and Close returns the error. Calls
// after the first return nil.
func (r *Registration) Close(ctx context.Context) error {
	l := r.stop()
	if l == nil {
		return nil
	}
	if err := l.Revoke(ctx); err != nil {
		return fmt.Errorf("metastore: deregister %s (its keys expire with the lease): %w", r.cfg.Key, err)
	}
	r.log.Debug("deregistered")
	return nil
}

// Abort stops registering as a crash would: the lease is no longer kept
// alive but not revoked, so the key stays until the TTL runs out.
func (r *Registration) Abort() {
	if l := r.stop(); l != nil {
		l.Abandon()
	}
}

// stop ends the background goroutine and returns the lease held, if any,
// for the caller to end; nil after the first call.
func (r *Registration) stop() *Lease {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lease
	r.lease = nil
	return l
}

// run watches the lease and registers again when it is lost.
func (r *Registration) run(ctx context.Context) {
	defer close(r.done)
	for {
		r.mu.Lock()
		l := r.lease
		r.mu.Unlock()
		if l == nil {
			r.reregister(ctx, nil)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Done():
		}
		if ctx.Err() != nil {
			return // Close or Abort ended it
		}
		r.mu.Lock()
		r.lease = nil
		r.mu.Unlock()
		r.log.Warn("registration lease lost; registering again", "lease", fmt.Sprintf("%x", l.ID()))
		if r.cfg.OnLost != nil {
			r.cfg.OnLost(l)
		}
		r.reregister(ctx, l)
	}
}

// reregister registers under a new lease, retrying with backoff until it
// succeeds or ctx ends. It first revokes the lost lease: etcd may still
// hold keys under it (a restarted etcd extends leases by a TTL), and they
// should be free for others at once rather than a TTL later.
func (r *Registration) reregister(ctx context.Context, old *Lease) {
	backoff := 200 * time.Millisecond
	revoked := old == nil
	for ctx.Err() == nil {
		if !revoked {
			rctx, cancel := context.WithTimeout(ctx, r.cfg.TTL)
			revoked = old.Revoke(rctx) == nil
			cancel()
		}
		actx, cancel := context.WithTimeout(ctx, r.cfg.TTL)
		l, err := r.attempt(actx, false)
		cancel()
		if err == nil {
			r.mu.Lock()
			r.lease, r.last, r.err = l, l.ID(), nil
			r.mu.Unlock()
			r.log.Info("registered again", "lease", fmt.Sprintf("%x", l.ID()))
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		r.log.Warn("registering again failed; retrying", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, r.cfg.TTL)
	}
}

// attempt makes the registration once, dealing with a live one at the key
// as RegisterConfig.Existing says; first is the registration made by
// Register (later ones never wait).
func (r *Registration) attempt(ctx context.Context, first bool) (*Lease, error) {
	key := r.cfg.Key
	start := time.Now()
	deadline := start.Add(r.cfg.Wait)
	takeovers := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("metastore: register %s: %w", key, err)
		}
		kv, err := r.m.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			l, err := r.create(ctx)
			if errors.Is(err, ErrExists) {
				continue // someone was faster: judge theirs
			}
			return l, err
		}
		if err != nil {
			return nil, fmt.Errorf("metastore: register %s: %w", key, err)
		}
		r.mu.Lock()
		own := kv.Lease != 0 && kv.Lease == r.last
		r.mu.Unlock()
		v := WaitGone
		switch {
		case own:
			v = TakeOver // our own lost lease, still alive in etcd
		case r.cfg.Existing != nil:
			v = r.cfg.Existing(kv.Value)
		}
		if v == TakeOver && !first && !own {
			v = Refuse // a newer life registered after us
		}
		taken := &TakenError{Key: key, Value: kv.Value, Lease: kv.Lease}
		switch v {
		case TakeOver:
			if takeovers++; takeovers > maxTakeOvers {
				return nil, taken
			}
			r.log.Info("taking over this member's previous registration", "lease", fmt.Sprintf("%x", kv.Lease))
			if kv.Lease != 0 {
				err = r.m.RevokeLease(ctx, kv.Lease)
			} else {
				err = r.m.DeleteIf(ctx, key, kv.Rev)
			}
			if err != nil && !errors.Is(err, ErrConflict) {
				return nil, fmt.Errorf("metastore: register %s: take over: %w", key, err)
			}
		case Refuse:
			return nil, taken
		default:
			if !first || !time.Now().Before(deadline) {
				if first && r.cfg.Wait > 0 {
					taken.Waited = time.Since(start)
				}
				return nil, taken
			}
			r.log.Warn("another member holds the key; waiting for it to go away", "lease", fmt.Sprintf("%x", kv.Lease), "until", deadline)
			if err := r.waitGone(ctx, kv.Rev, deadline); err != nil {
				taken.Waited, taken.Cause = time.Since(start), err
				return nil, taken
			}
		}
	}
}

// create writes the key under a new lease; the lease is revoked when the
// write fails.
func (r *Registration) create(ctx context.Context) (*Lease, error) {
	val, err := r.cfg.Value()
	if err != nil {
		return nil, fmt.Errorf("metastore: register %s: %w", r.cfg.Key, err)
	}
	l, err := r.m.Grant(ctx, r.cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("metastore: register %s: %w", r.cfg.Key, err)
	}
	if _, err := l.Create(ctx, r.cfg.Key, val); err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), r.cfg.TTL)
		l.Revoke(rctx)
		cancel()
		if errors.Is(err, ErrExists) {
			return nil, err
		}
		return nil, fmt.Errorf("metastore: register %s: %w", r.cfg.Key, err)
	}
	return l, nil
}

// waitGone waits until the key is deleted after revision rev (or the
// watch lost track of it) and returns nil, or until the deadline passes
// (nil too: the caller looks again) or ctx ends (its error).
func (r *Registration) waitGone(ctx context.Context, rev int64, deadline time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for ev := range r.m.Watch(wctx, r.cfg.Key, rev+1) {
		if ev.Reset || ev.Key == r.cfg.Key && ev.Deleted {
			return nil
		}
	}
	return ctx.Err()
}
