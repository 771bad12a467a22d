package mledger

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/isobar-mq/isobar/broker/mledger/memledger"
	"github.com/isobar-mq/isobar/metastore"
)

// memWorld is a region kept in memory, shared by a test's managed ledgers
// as a cluster is: a metadata store (the operations the managed ledger
// performs: Get, CAS, DeleteIf; and List for tests) and ledgers
// (memledger). Each owner gets its own connection to both (env), which
// crashMem closes. No etcd, no bookies.
type memWorld struct {
	region  string
	ledgers *memledger.Store

	// mu guards rev and kvs.
	mu  sync.Mutex
	rev int64
	kvs map[string]metastore.KV
}

func newMemWorld(t *testing.T) *memWorld {
	t.Helper()
	return &memWorld{region: "test", ledgers: memledger.New(memledger.Config{}), kvs: map[string]metastore.KV{}}
}

// env is a new owner's configuration, as testConfig: its own metadata
// connection and ledger client.
func (w *memWorld) env(perLedger int64) testEnv {
	return testEnv{
		Deps:   Deps{Meta: w.connect(), Ledgers: w.ledgers.Client(), Region: w.region, Logger: slog.New(slog.DiscardHandler)},
		Config: Config{MaxEntriesPerLedger: perLedger, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2},
	}
}

// connect returns a new connection to the metadata store.
func (w *memWorld) connect() *memConn { return &memConn{w: w} }

// keys lists the keys under prefix.
func (w *memWorld) keys(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ledgerExists reports whether the bookies still hold ledger id.
func (w *memWorld) ledgerExists(id int64) bool {
	_, ok := w.ledgers.Metadata(uint64(id))
	return ok
}

// memConn is one connection to a memWorld's metadata store. The
// operations the managed ledger does not perform are not implemented
// (the nil Meta makes them panic).
type memConn struct {
	metastore.Meta
	w      *memWorld
	closed atomic.Bool
}

// Close closes the connection: its later operations fail.
func (c *memConn) Close() { c.closed.Store(true) }

func (c *memConn) check() error {
	if c.closed.Load() {
		return metastore.ErrClosed
	}
	return nil
}

func (c *memConn) Get(ctx context.Context, key string) (metastore.KV, error) {
	if err := c.check(); err != nil {
		return metastore.KV{}, err
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	kv, ok := c.w.kvs[key]
	if !ok {
		return metastore.KV{}, fmt.Errorf("%s: %w", key, metastore.ErrNotFound)
	}
	kv.Value = slices.Clone(kv.Value)
	return kv, nil
}

func (c *memConn) List(ctx context.Context, prefix string) ([]metastore.KV, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var out []metastore.KV
	for _, k := range c.w.keys(prefix) {
		kv, err := c.Get(ctx, k)
		if err == nil {
			out = append(out, kv)
		}
	}
	return out, nil
}

func (c *memConn) CAS(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if kv, ok := c.w.kvs[key]; ok && kv.Rev != rev || !ok && rev != 0 {
		return 0, fmt.Errorf("%s at revision %d: %w", key, rev, metastore.ErrConflict)
	}
	c.w.rev++
	c.w.kvs[key] = metastore.KV{Key: key, Value: slices.Clone(value), Rev: c.w.rev}
	return c.w.rev, nil
}

func (c *memConn) DeleteIf(ctx context.Context, key string, rev int64) error {
	if err := c.check(); err != nil {
		return err
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if kv, ok := c.w.kvs[key]; !ok || kv.Rev != rev {
		return fmt.Errorf("%s at revision %d: %w", key, rev, metastore.ErrConflict)
	}
	c.w.rev++
	delete(c.w.kvs, key)
	return nil
}

// crashMem stops m as if its process died, as crash does: its metadata
// connection and its ledger client go at once (the writer's ledger stays
// open), so nothing more is written anywhere. The adds it had not
// completed then fail with ErrClosed (a dead process's callers hear
// nothing; a test waits for every callback).
func crashMem(m *ManagedLedger) {
	m.deps.Meta.(*memConn).Close()
	m.deps.Ledgers.(*memledger.Client).Close()
	m.addMu.Lock()
	m.closing = true
	m.addMu.Unlock()
	m.stopDrivers()
	lv := m.lv.Load()
	if lv == nil {
		return // dormant: nothing queued or issued
	}
	if lv.w != nil {
		lv.inflight.Wait() // the closed client failed them
	}
	m.failAllFailed(ErrClosed)
	for lv.queue != nil && len(lv.queue) > 0 {
		m.failAdds([]addRequest{<-lv.queue}, ErrClosed)
	}
}
