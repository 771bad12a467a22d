package metastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// member is a RegisterConfig whose value counts the writes and names the
// member, and whose previous lives are the values of the same name.
type member struct {
	name   string
	writes atomic.Int64
	mu     sync.Mutex
	lost   []int64
}

func (m *member) config(key string) RegisterConfig {
	return RegisterConfig{
		Key: key,
		TTL: 2 * time.Second,
		Value: func() ([]byte, error) {
			return fmt.Appendf(nil, "%s#%d", m.name, m.writes.Add(1)), nil
		},
		Existing: func(v []byte) Verdict {
			if strings.HasPrefix(string(v), m.name+"#") {
				return TakeOver
			}
			return WaitGone
		},
		OnLost: func(l *Lease) {
			m.mu.Lock()
			m.lost = append(m.lost, l.ID())
			m.mu.Unlock()
		},
	}
}

func (m *member) losses() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int64(nil), m.lost...)
}

// newStore starts etcd and connects to it; the connection closes before
// the server stops (a server with open streams takes seconds to stop).
func newStore(t *testing.T) *Store {
	t.Helper()
	e := startEtcd(t, t.TempDir(), "")
	t.Cleanup(e.Close)
	return connect(t, e)
}

func register(t *testing.T, s Meta, cfg RegisterConfig) *Registration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := Register(ctx, s, cfg)
	if err != nil {
		t.Fatalf("register %s: %v", cfg.Key, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r.Close(ctx)
	})
	return r
}

func TestRegisterRefreshClose(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	m := &member{name: "a"}
	r := register(t, s, m.config("/reg/a"))
	kv, err := s.Get(ctx, "/reg/a")
	l := r.Lease()
	if err != nil || string(kv.Value) != "a#1" || l == nil || kv.Lease != l.ID() || !r.Registered() || r.Err() != nil {
		t.Fatalf("registered %+v, %v; lease %v, err %v", kv, err, l, r.Err())
	}
	// Other keys may live under the registration's lease.
	if _, err := l.Create(ctx, "/own/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if kv, _ := s.Get(ctx, "/reg/a"); string(kv.Value) != "a#2" || kv.Lease != l.ID() {
		t.Fatalf("after refresh %+v", kv)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"/reg/a", "/own/x"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s after Close: %v", k, err)
		}
	}
	if r.Registered() || r.Lease() != nil || !errors.Is(r.Refresh(ctx), ErrNotRegistered) || !errors.Is(r.Err(), ErrNotRegistered) {
		t.Fatalf("after Close: registered %v, refresh %v, err %v", r.Registered(), r.Refresh(ctx), r.Err())
	}
	if err := r.Close(ctx); err != nil || len(m.losses()) != 0 {
		t.Fatalf("second Close %v; losses %v", err, m.losses())
	}
}

// A member restarting after a crash (its registration live for a TTL)
// takes its previous life over at once; the keys under the old lease go.
func TestRegisterTakesOverPreviousLife(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	cfg := (&member{name: "a"}).config("/reg/a")
	cfg.TTL = 30 * time.Second
	old := register(t, s, cfg)
	oldLease := old.Lease().ID()
	if _, err := old.Lease().Put(ctx, "/own/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	old.Abort() // a crash: the lease runs on
	if kv, err := s.Get(ctx, "/reg/a"); err != nil || kv.Lease != oldLease {
		t.Fatalf("after Abort: %+v, %v", kv, err)
	}
	start := time.Now()
	cur := register(t, s, cfg)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took over in %v (TTL %v)", took, cfg.TTL)
	}
	kv, err := s.Get(ctx, "/reg/a")
	if err != nil || kv.Lease == oldLease || kv.Lease != cur.Lease().ID() {
		t.Fatalf("after takeover: %+v, %v", kv, err)
	}
	if _, err := s.Get(ctx, "/own/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a key of the previous life's lease survived: %v", err)
	}
}

// A foreign registration is waited for (up to Wait) or refused; the
// TakenError names it.
func TestRegisterForeign(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	other := register(t, s, (&member{name: "b"}).config("/reg/a"))
	cfg := (&member{name: "a"}).config("/reg/a")

	// Wait 0: fails at once.
	_, err := Register(ctx, s, cfg)
	var te *TakenError
	if !errors.Is(err, ErrTaken) || !errors.As(err, &te) || string(te.Value) != "b#1" || te.Lease != other.Lease().ID() {
		t.Fatalf("wait 0: %v", err)
	}
	// Refused: fails at once even with a wait.
	refuse := cfg
	refuse.Wait = time.Minute
	refuse.Existing = func([]byte) Verdict { return Refuse }
	start := time.Now()
	if _, err := Register(ctx, s, refuse); !errors.Is(err, ErrTaken) || time.Since(start) > 5*time.Second {
		t.Fatalf("refuse: %v after %v", err, time.Since(start))
	}
	// A bounded wait ends with ErrTaken, and a context ending first with
	// ErrTaken and the context's error.
	cfg.Wait = 500 * time.Millisecond
	start = time.Now()
	_, err = Register(ctx, s, cfg)
	if !errors.As(err, &te) || time.Since(start) < cfg.Wait || te.Waited < cfg.Wait {
		t.Fatalf("bounded wait: %v after %v", err, time.Since(start))
	}
	cfg.Wait = time.Minute
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = Register(cctx, s, cfg)
	cancel()
	if !errors.Is(err, ErrTaken) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context ended: %v", err)
	}
	// The foreign registration going away ends the wait.
	go func() {
		time.Sleep(300 * time.Millisecond)
		other.Close(ctx)
	}()
	r := register(t, s, cfg)
	if kv, err := s.Get(ctx, "/reg/a"); err != nil || !strings.HasPrefix(string(kv.Value), "a#") || kv.Lease != r.Lease().ID() {
		t.Fatalf("after the wait: %+v, %v", kv, err)
	}
}

// A lost lease (revoked by someone else, as etcd does when keep-alives
// fail for a TTL) is reported with OnLost and the key registered again
// under a new lease, with a fresh value.
func TestRegisterAgainAfterLoss(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	m := &member{name: "a"}
	r := register(t, s, m.config("/reg/a"))
	old := r.Lease()
	if err := s.RevokeLease(ctx, old.ID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "registered again", func() bool {
		l := r.Lease()
		return l != nil && l.ID() != old.ID()
	})
	if got := m.losses(); len(got) != 1 || got[0] != old.ID() {
		t.Fatalf("losses %v, want [%x]", got, old.ID())
	}
	kv, err := s.Get(ctx, "/reg/a")
	if err != nil || kv.Lease != r.Lease().ID() || string(kv.Value) != "a#2" {
		t.Fatalf("registered again as %+v, %v", kv, err)
	}
}

// A Registration that lost its lease to a newer life of the same member
// (which took it over) does not take the key back.
func TestRegisterDoesNotFightNewerLife(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	m := &member{name: "a"}
	old := register(t, s, m.config("/reg/a"))
	cur := register(t, s, m.config("/reg/a"))
	l := cur.Lease().ID()
	waitFor(t, 10*time.Second, "the old life notices", func() bool { return len(m.losses()) == 1 })
	time.Sleep(time.Second) // a few re-registration attempts
	if old.Registered() || !errors.Is(old.Err(), ErrTaken) {
		t.Fatalf("old life: registered %v, err %v", old.Registered(), old.Err())
	}
	if kv, err := s.Get(ctx, "/reg/a"); err != nil || kv.Lease != l || !cur.Registered() {
		t.Fatalf("the newer life lost its key: %+v, %v", kv, err)
	}
	// Once the newer life is gone, the old one registers again.
	cur.Close(ctx)
	waitFor(t, 10*time.Second, "old life registered again", old.Registered)
}

// Abort leaves the key to expire with the lease.
func TestRegisterAbortExpires(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	m := &member{name: "a"}
	r := register(t, s, m.config("/reg/a"))
	r.Abort()
	if _, err := s.Get(ctx, "/reg/a"); err != nil {
		t.Fatalf("key gone at once after Abort: %v", err)
	}
	waitFor(t, 10*time.Second, "key expired", func() bool {
		_, err := s.Get(ctx, "/reg/a")
		return errors.Is(err, ErrNotFound)
	})
	if len(m.losses()) != 0 {
		t.Fatalf("OnLost called for Abort: %v", m.losses())
	}
}

func TestRegisterConfigErrors(t *testing.T) {
	for _, cfg := range []RegisterConfig{
		{TTL: time.Second, Value: func() ([]byte, error) { return nil, nil }},
		{Key: "/k", TTL: time.Second},
		{Key: "/k", Value: func() ([]byte, error) { return nil, nil }},
		{Key: "/k", TTL: time.Second, Value: func() ([]byte, error) { return nil, nil }, Wait: -1},
	} {
		if _, err := Register(context.Background(), nil, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
