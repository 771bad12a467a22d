package txncoord

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/errkind"
)

// memLog is a log in memory that can be told to fail.
type memLog struct {
	mu   sync.Mutex
	recs [][]byte
	fail bool
	snap []byte // the last checkpoint's (recs are those after it)
	// block, when set, makes appends wait for it (or fail when their
	// context ends, as a managed ledger's add does).
	block chan struct{}
}

func (l *memLog) Append(ctx context.Context, data []byte) error {
	if l.block != nil {
		select {
		case <-l.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return errors.New("bookies gone")
	}
	l.recs = append(l.recs, slices.Clone(data))
	return nil
}

func (l *memLog) Checkpoint(_ context.Context, snapshot func() []byte) error {
	l.mu.Lock()
	n := len(l.recs)
	l.mu.Unlock()
	s := snapshot()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snap, l.recs = s, slices.Clone(l.recs[n:])
	return nil
}

func (l *memLog) Replay(_ context.Context, restore func([]byte) error, fn func([]byte) error) error {
	l.mu.Lock()
	recs, snap := slices.Clone(l.recs), l.snap
	l.mu.Unlock()
	if snap != nil {
		if err := restore(snap); err != nil {
			return err
		}
	}
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) Close(context.Context) error { return nil }

// ender records the ends told, failing the first failFirst of each.
type ender struct {
	mu        sync.Mutex
	told      []string
	failFirst int
	tries     map[string]int
	block     chan struct{} // when set, ends wait for it
}

func (e *ender) tell(ctx context.Context, what string) error {
	if e.block != nil {
		select {
		case <-e.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tries == nil {
		e.tries = map[string]int{}
	}
	e.tries[what]++
	if e.tries[what] <= e.failFirst {
		return errors.New("owner unreachable")
	}
	e.told = append(e.told, what)
	return nil
}

func (e *ender) EndOnPartition(ctx context.Context, topic string, id txn.ID, a txn.Action) error {
	return e.tell(ctx, a.String()+" "+id.String()+" "+topic)
}

func (e *ender) EndOnSubscription(ctx context.Context, s txn.Sub, id txn.ID, a txn.Action) error {
	return e.tell(ctx, a.String()+" "+id.String()+" "+s.Topic+"/"+s.Subscription)
}

func (e *ender) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := slices.Clone(e.told)
	slices.Sort(out)
	return out
}

func start(t *testing.T, l *memLog, e *ender) *Coordinator { return startTC(t, 2, l, e) }

func startTC(t *testing.T, tc uint64, l *memLog, e *ender) *Coordinator {
	t.Helper()
	c, err := Start(context.Background(), Config{TC: tc}, l, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestCommitTellsEveryone(t *testing.T) {
	ctx := context.Background()
	l, e := &memLog{}, &ender{failFirst: 2}
	c := start(t, l, e)
	id, err := c.NewTxn(ctx, time.Minute)
	if err != nil || id.Most != 2 {
		t.Fatal(id, err)
	}
	if err := c.AddPartitions(ctx, id, []string{"t1", "t2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSubscriptions(ctx, id, []txn.Sub{{Topic: "t3", Subscription: "s"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.End(ctx, id, txn.Commit); err != nil {
		t.Fatal(err)
	}
	want := []string{"commit (2,0) t1", "commit (2,0) t2", "commit (2,0) t3/s"}
	if got := e.got(); !slices.Equal(got, want) {
		t.Fatalf("told %v, want %v", got, want)
	}
	if err := c.End(ctx, id, txn.Commit); !errors.Is(err, errkind.ErrTransactionNotFound) {
		t.Fatalf("second commit: %v", err)
	}
	if err := c.AddPartitions(ctx, txn.ID{Most: 2, Least: 9}, []string{"x"}); !errors.Is(err, errkind.ErrTransactionNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}

// TestRecovery: a coordinator that stopped in the middle of an end is
// replaced by one recovered from its log, which finishes it; open
// transactions come back open.
func TestRecovery(t *testing.T) {
	ctx := context.Background()
	l, e := &memLog{}, &ender{block: make(chan struct{})}
	c, err := Start(ctx, Config{TC: 0}, l, e)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := c.NewTxn(ctx, time.Hour)
	ending, _ := c.NewTxn(ctx, time.Hour)
	c.AddPartitions(ctx, ending, []string{"p"})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = c.End(short, ending, txn.Abort)
	cancel()
	if !errors.Is(err, errkind.ErrServiceNotReady) {
		t.Fatalf("end with blocked fan-out: %v", err)
	}
	c.Close(ctx)
	if _, err := c.NewTxn(ctx, 0); !IsClosed(err) {
		t.Fatalf("closed coordinator: %v", err)
	}
	close(e.block)
	e.block = nil
	r := startTC(t, 0, l, e)
	waitFor(t, func() bool { _, ok := r.Info(ending); return !ok })
	if got := e.got(); !slices.Equal(got, []string{"abort (0,1) p"}) {
		t.Fatalf("told %v", got)
	}
	if info, ok := r.Info(open); !ok || info.Status != txn.Open {
		t.Fatalf("open transaction after recovery: %+v %v", info, ok)
	}
	if id, _ := r.NewTxn(ctx, 0); id.Least != 2 {
		t.Fatalf("counter resumed at %v", id)
	}
	// Its stats: two held (open 0, the new 2), numbers from 0 given
	// out up to 2, the recovery's times.
	st := r.Stats()
	if st.Held != 2 || st.Lowest != 0 || st.Next != 3 || st.Broken || st.RecoverStart.IsZero() || st.RecoverEnd.Before(st.RecoverStart) {
		t.Fatalf("stats after recovery: %+v", st)
	}
	if held := r.Held(); len(held) != 2 || held[0].ID != open || held[1].ID.Least != 2 {
		t.Fatalf("held %+v", held)
	}
}

func TestTimeoutAborts(t *testing.T) {
	ctx := context.Background()
	l, e := &memLog{}, &ender{}
	c := start(t, l, e)
	id, _ := c.NewTxn(ctx, 30*time.Millisecond)
	c.AddPartitions(ctx, id, []string{"p"})
	keep, _ := c.NewTxn(ctx, time.Hour)
	waitFor(t, func() bool { _, ok := c.Info(id); return !ok })
	if got := e.got(); !slices.Equal(got, []string{"abort (2,0) p"}) {
		t.Fatalf("told %v", got)
	}
	if err := c.End(ctx, id, txn.Commit); !errors.Is(err, errkind.ErrTransactionNotFound) {
		t.Fatalf("commit after timeout: %v", err)
	}
	if info, _ := c.Info(keep); info.Status != txn.Open {
		t.Fatalf("other transaction %v", info.Status)
	}
}

func TestLogFailureBreaks(t *testing.T) {
	ctx := context.Background()
	l, e := &memLog{}, &ender{}
	c := start(t, l, e)
	id, _ := c.NewTxn(ctx, time.Minute)
	l.mu.Lock()
	l.fail = true
	l.mu.Unlock()
	if err := c.AddPartitions(ctx, id, []string{"p"}); !errors.Is(err, errkind.ErrTransactionCoordinatorNotFound) {
		t.Fatalf("add with a failing log: %v", err)
	}
	if !c.Broken() {
		t.Fatal("not broken")
	}
	if err := c.End(ctx, id, txn.Commit); !IsClosed(err) {
		t.Fatalf("end on a broken coordinator: %v", err)
	}
}

// TestRequestGoneDoesNotBreak: a request whose context ends while its
// record is being written (its client went away) does not give up the
// coordinator: the write completes and the coordinator serves on.
func TestRequestGoneDoesNotBreak(t *testing.T) {
	l, e := &memLog{}, &ender{}
	c := start(t, l, e)
	l.block = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.NewTxn(ctx, time.Minute)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // the write is under way
	cancel()
	time.Sleep(20 * time.Millisecond)
	close(l.block)
	if err := <-errc; err != nil {
		t.Fatalf("new transaction whose request ended during its write: %v", err)
	}
	if c.Broken() {
		t.Fatal("the coordinator gave up because a request's context ended")
	}
	id, err := c.NewTxn(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.End(context.Background(), id, txn.Commit); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	n := len(l.recs)
	l.mu.Unlock()
	if n < 3 {
		t.Fatalf("%d records logged, want both transactions and the end", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCheckpoint: with a checkpoint every few records the log stays
// short, and a coordinator recovered from it knows what the old one
// knew.
func TestCheckpoint(t *testing.T) {
	ctx := context.Background()
	l, e := &memLog{}, &ender{}
	c, err := Start(ctx, Config{TC: 1, CheckpointEvery: 4}, l, e)
	if err != nil {
		t.Fatal(err)
	}
	var open []txn.ID
	for i := range 20 {
		id, err := c.NewTxn(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c.AddPartitions(ctx, id, []string{"p"})
		if i%2 == 0 {
			if err := c.End(ctx, id, txn.Commit); err != nil {
				t.Fatal(err)
			}
			continue
		}
		open = append(open, id)
	}
	c.Close(ctx)
	l.mu.Lock()
	kept, snapped := len(l.recs), l.snap != nil
	l.mu.Unlock()
	if !snapped || kept >= 8 {
		t.Fatalf("log of %d records after checkpoints (snapshot %v)", kept, snapped)
	}
	r := startTC(t, 1, l, e)
	for _, id := range open {
		if info, ok := r.Info(id); !ok || info.Status != txn.Open || len(info.Partitions) != 1 {
			t.Fatalf("%v after recovery: %+v %v", id, info, ok)
		}
	}
	if id, _ := r.NewTxn(ctx, 0); id.Least != 20 {
		t.Fatalf("counter resumed at %v", id)
	}
}
