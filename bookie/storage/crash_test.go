package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// The crash sweep runs a concurrent workload (adds, overwrites, a fence, a
// delete, checkpoints, compactions) on the strict in-memory filesystem and
// takes a crash clone at a random operation. A store opened on the clone
// must hold every acknowledged entry byte for byte, every acknowledged fence
// and delete, and nothing corrupted or invented.

type key struct{ ledger, entry uint64 }

// sizeFor is the deterministic size of version v of an entry.
func sizeFor(k key, v uint64) int {
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, [3]uint64{k.ledger, k.entry, v})
	x := h.Sum64()
	if x%10 == 0 {
		return 24 + int(x>>8)%12000
	}
	return 24 + int(x>>8)%1500
}

func dataFor(k key, v uint64) []byte { return payload(k.ledger, k.entry, v, sizeFor(k, v)) }

// model is what the workload did and what was acknowledged.
type model struct {
	mu        sync.Mutex
	attempted map[key]uint64 // highest version submitted
	acked     map[key]uint64 // highest version acknowledged
	fenced    map[uint64]bool
	deleted   map[uint64]bool
	// deleting holds ledgers whose Delete was called: durable but not yet
	// acknowledged, a delete may or may not have happened.
	deleting map[uint64]bool
	acks     int
}

func newModel() *model {
	return &model{attempted: map[key]uint64{}, acked: map[key]uint64{}, fenced: map[uint64]bool{},
		deleted: map[uint64]bool{}, deleting: map[uint64]bool{}}
}

// snapshot copies the acknowledged state; call with mu held.
func (m *model) snapshotLocked() *model {
	c := newModel()
	for k, v := range m.acked {
		c.acked[k] = v
	}
	for l := range m.fenced {
		c.fenced[l] = true
	}
	for l := range m.deleted {
		c.deleted[l] = true
	}
	for l := range m.deleting {
		c.deleting[l] = true
	}
	return c
}

// crashMode chooses which operations count toward the crash point.
type crashMode int

const (
	crashAnyOp        crashMode = iota
	crashLedgerDirOp            // flush, index, checkpoint and compaction I/O
	crashInCompaction           // only while Compact runs
	crashInCheckpoint           // only while an explicit Checkpoint runs
	numCrashModes
)

func (c crashMode) String() string {
	return [...]string{"any", "ledgerdir", "compaction", "checkpoint"}[c]
}

type crashRun struct {
	seed    uint64
	mode    crashMode
	crashAt int64 // count of matching ops at which to crash; <= 0: at the end
	torn    bool

	mem        *vfs.MemFS
	cfg        Config
	model      *model
	ops        atomic.Int64
	inCompact  atomic.Bool
	inCkpt     atomic.Bool
	clone      *vfs.MemFS
	cloneModel *model
	crashedIn  string

	ackClones []ackClone // clones taken inside done(nil)
}

type ackClone struct {
	fs      *vfs.MemFS
	k       key
	version uint64
}

func (r *crashRun) takeClone(where string) {
	r.model.mu.Lock()
	defer r.model.mu.Unlock()
	if r.clone != nil {
		return
	}
	r.cloneModel = r.model.snapshotLocked()
	if r.torn {
		r.clone = r.mem.CrashCloneTorn(rand.New(rand.NewPCG(r.seed, 7)))
	} else {
		r.clone = r.mem.CrashClone()
	}
	r.crashedIn = where
}

func (r *crashRun) MaybeError(op vfs.Op, path string) error {
	count := false
	switch r.mode {
	case crashAnyOp:
		count = true
	case crashLedgerDirOp:
		count = strings.HasPrefix(path, r.cfg.LedgerDir)
	case crashInCompaction:
		count = r.inCompact.Load()
	case crashInCheckpoint:
		count = r.inCkpt.Load()
	}
	if count && r.ops.Add(1) == r.crashAt {
		where := op.String() + " " + filepath.Base(path)
		if r.inCompact.Load() {
			where += " (compaction)"
		}
		if r.inCkpt.Load() {
			where += " (checkpoint)"
		}
		r.takeClone(where)
	}
	return nil
}

func crashConfig(fsys vfs.FS) Config {
	cfg := smallConfig(fsys, "/bk")
	cfg.GroupCommitMaxBytes = 16 << 10
	cfg.JournalFileMaxBytes = 48 << 10
	cfg.WriteCacheMaxBytes = 48 << 10
	cfg.EntryLogMaxBytes = 40 << 10
	cfg.FlushInterval = 5 * time.Millisecond
	cfg.CompactionThreshold = 0.95
	return cfg
}

// run executes the workload; it returns the number of matching operations.
func (r *crashRun) run(t *testing.T) int64 {
	r.mem = vfs.NewStrictMem()
	r.model = newModel()
	r.cfg = crashConfig(nil)
	r.cfg.FS = vfs.NewErrorFS(r.mem, r)
	r.cfg.Logger = testLogger(t)
	s, err := Open(r.cfg)
	if err != nil {
		t.Fatalf("seed %d: Open: %v", r.seed, err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var workersDone atomic.Bool
	var failures sync.Map
	fail := func(format string, args ...any) { failures.Store(fmt.Sprintf(format, args...), true) }

	ackSample := rand.New(rand.NewPCG(r.seed, 3)).IntN(40) + 10
	for w := range uint64(3) {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(r.seed, w))
			ledgers := []uint64{10*w + 1, 10*w + 2, 10*w + 3}
			next := map[uint64]uint64{}
			fencedLedger := ledgers[0]
			var fenced, deleted bool
			sem := make(chan struct{}, 4)
			var inflight sync.WaitGroup
			for i := range 70 {
				if w == 0 && i == 25 {
					inflight.Wait()
					if err := s.Fence(ctx, fencedLedger); err == nil {
						r.model.mu.Lock()
						r.model.fenced[fencedLedger] = true
						r.model.mu.Unlock()
						fenced = true
						if err := addWait(s, fencedLedger, next[fencedLedger], []byte("stale writer"), false); !errors.Is(err, ErrFenced) {
							fail("non-recovery add after fence: %v", err)
						}
					} else {
						fail("fence: %v", err)
					}
				}
				if w == 1 && i == 40 {
					inflight.Wait()
					r.model.mu.Lock()
					r.model.deleting[ledgers[1]] = true
					r.model.mu.Unlock()
					if err := s.Delete(ctx, ledgers[1]); err == nil {
						r.model.mu.Lock()
						r.model.deleted[ledgers[1]] = true
						r.model.mu.Unlock()
						deleted = true
					} else {
						fail("delete: %v", err)
					}
				}
				l := ledgers[rnd.IntN(len(ledgers))]
				if deleted && l == ledgers[1] {
					l = ledgers[2]
				}
				e := next[l]
				if e > 0 && rnd.IntN(8) == 0 {
					e = uint64(rnd.IntN(int(e))) // overwrite an existing entry
				} else {
					next[l]++
				}
				k := key{l, e}
				r.model.mu.Lock()
				r.model.attempted[k]++
				v := r.model.attempted[k]
				r.model.mu.Unlock()
				sem <- struct{}{}
				inflight.Add(1)
				s.Add(l, e, dataFor(k, v), fenced && l == fencedLedger, func(err error) {
					defer inflight.Done()
					defer func() { <-sem }()
					if err != nil {
						fail("add %v: %v", k, err)
						return
					}
					r.model.mu.Lock()
					r.model.acked[k] = max(r.model.acked[k], v)
					r.model.acks++
					sample := r.model.acks%ackSample == 0 && len(r.ackClones) < 2
					if sample {
						// done(nil) for k: a power loss right now must keep it.
						r.ackClones = append(r.ackClones, ackClone{r.mem.CrashClone(), k, v})
					}
					r.model.mu.Unlock()
				})
			}
			inflight.Wait()
		})
	}
	var maint sync.WaitGroup
	maint.Go(func() {
		for i := 0; !workersDone.Load(); i++ {
			if i%3 == 2 {
				r.inCompact.Store(true)
				if _, err := s.Compact(ctx); err != nil {
					fail("compact: %v", err)
				}
				r.inCompact.Store(false)
			} else {
				r.inCkpt.Store(true)
				if err := s.Checkpoint(ctx); err != nil {
					fail("checkpoint: %v", err)
				}
				r.inCkpt.Store(false)
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	workersDone.Store(true)
	maint.Wait()
	r.takeClone("end of workload")
	if err := s.Close(); err != nil {
		t.Fatalf("seed %d: Close: %v", r.seed, err)
	}
	failures.Range(func(k, _ any) bool {
		t.Errorf("seed %d: %s", r.seed, k)
		return true
	})
	return r.ops.Load()
}

// verify opens a store on fs and checks it against the acknowledged state.
func verifyCrash(t *testing.T, label string, fsys vfs.FS, acked *model, attempted map[key]uint64) {
	t.Helper()
	cfg := crashConfig(fsys)
	cfg.Logger = testLogger(t)
	for pass := range 2 {
		s, err := Open(cfg)
		if err != nil {
			t.Fatalf("%s: reopen %d: %v", label, pass, err)
		}
		checkStore(t, label, s, acked, attempted)
		if pass == 0 {
			// The recovered store must be usable: add, checkpoint, and
			// reopen once more.
			if err := addWait(s, 999, 0, []byte("after recovery"), false); err != nil {
				t.Fatalf("%s: add after recovery: %v", label, err)
			}
			if err := s.Checkpoint(context.Background()); err != nil {
				t.Fatalf("%s: checkpoint after recovery: %v", label, err)
			}
		} else {
			expectRead(t, s, 999, 0, []byte("after recovery"))
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: close: %v", label, err)
		}
	}
}

func checkStore(t *testing.T, label string, s *Store, acked *model, attempted map[key]uint64) {
	t.Helper()
	lastAcked := map[uint64]int64{}
	for k, maxV := range attempted {
		d, err := s.Read(k.ledger, k.entry)
		ackedV, wasAcked := acked.acked[k]
		if acked.deleted[k.ledger] {
			if !errors.Is(err, ErrNoLedger) {
				t.Fatalf("%s: %v of a deleted ledger: %v", label, k, err)
			}
			continue
		}
		if acked.deleting[k.ledger] && errors.Is(err, ErrNoLedger) {
			continue // the unacknowledged delete reached the disk
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) || !isNotFound(err) || wasAcked {
				t.Fatalf("%s: read %v (acked v%d: %v): %v", label, k, ackedV, wasAcked, err)
			}
			continue
		}
		if len(d) < 24 {
			t.Fatalf("%s: %v: %d bytes", label, k, len(d))
		}
		v := binary.LittleEndian.Uint64(d[16:])
		if v == 0 || v > maxV || !bytes.Equal(d, dataFor(k, v)) {
			t.Fatalf("%s: %v read back bytes that were never written (claims v%d of %d)", label, k, v, maxV)
		}
		if wasAcked && v < ackedV {
			t.Fatalf("%s: %v: read v%d, but v%d was acknowledged", label, k, v, ackedV)
		}
		if wasAcked {
			lastAcked[k.ledger] = max(lastAcked[k.ledger], int64(k.entry))
		}
	}
	for l, e := range lastAcked {
		if last, err := s.LastEntryID(l); (err != nil || last < e) && !(acked.deleting[l] && errors.Is(err, ErrNoLedger)) {
			t.Fatalf("%s: LastEntryID(%d) = %d, %v; entry %d was acknowledged", label, l, last, err, e)
		}
	}
	for l := range acked.fenced {
		if !acked.deleted[l] && !s.Fenced(l) {
			t.Fatalf("%s: acknowledged fence of ledger %d lost", label, l)
		}
	}
	for l := range acked.deleted {
		if _, err := s.LastEntryID(l); !errors.Is(err, ErrNoLedger) {
			t.Fatalf("%s: acknowledged delete of ledger %d lost: %v", label, l, err)
		}
	}
}

var (
	crashSeed   = flag.Uint64("crash.seed", 0, "first seed of TestCrashSweep")
	crashBudget = flag.Duration("crash.budget", 0, "time TestCrashSweep spends (0: 8s, 4s with -short)")
)

func TestCrashSweep(t *testing.T) {
	budget := 8 * time.Second
	if testing.Short() {
		budget = 4 * time.Second
	}
	if *crashBudget > 0 {
		budget = *crashBudget
	}
	// Calibrate: how many operations of each kind a run does.
	total := map[crashMode]int64{}
	for mode := range numCrashModes {
		r := &crashRun{seed: 1000 + uint64(mode), mode: mode}
		total[mode] = r.run(t)
		if t.Failed() {
			return
		}
	}
	t.Logf("operations per run: %v", total)
	start := time.Now()
	seeds, ackChecks := 0, 0
	where := map[string]int{}
	for seed := *crashSeed; time.Since(start) < budget || seed < *crashSeed+8; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 11))
		mode := crashMode(seed % uint64(numCrashModes))
		r := &crashRun{seed: seed, mode: mode, torn: seed%2 == 1}
		if total[mode] > 0 {
			r.crashAt = 1 + rnd.Int64N(total[mode])
		}
		r.run(t)
		if t.Failed() {
			t.Fatalf("seed %d (%v, torn %v): workload failed", seed, mode, r.torn)
		}
		attempted := r.model.attempted
		label := fmt.Sprintf("seed %d mode %v torn %v crash at %d (%s)", seed, mode, r.torn, r.crashAt, r.crashedIn)
		verifyCrash(t, label, r.clone, r.cloneModel, attempted)
		for i, ac := range r.ackClones {
			m := newModel()
			m.acked[ac.k] = ac.version
			verifyCrash(t, fmt.Sprintf("seed %d ack clone %d of %v v%d", seed, i, ac.k, ac.version),
				ac.fs, m, map[key]uint64{ac.k: attempted[ac.k]})
			ackChecks++
		}
		seeds++
		w := r.crashedIn
		switch {
		case strings.Contains(w, "(compaction)"):
			where["compaction"]++
		case strings.Contains(w, "(checkpoint)"):
			where["checkpoint"]++
		case strings.Contains(w, "end of workload"):
			where["end"]++
		default:
			where["other"]++
		}
	}
	t.Logf("%d crash points verified (%v), %d clones taken inside done(nil)", seeds, where, ackChecks)
}
