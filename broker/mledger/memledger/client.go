package memledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/mledger/ledgers"
)

// Client is one broker's ledger client over a Store (a ledgers.Store):
// what it does happens to the store's ledgers, and Close stops it as
// closing a broker's ledger client (or the broker dying) does.
type Client struct {
	s *Store

	// mu guards closed and writers (the writers not closed yet).
	mu      sync.Mutex
	closed  bool
	writers map[*Writer]struct{}
}

var _ ledgers.Store = (*Client)(nil)

// Client returns a new client of s.
func (s *Store) Client() *Client { return &Client{s: s, writers: map[*Writer]struct{}{}} }

func (c *Client) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("memledger client: %w", ledger.ErrClosed)
	}
	return nil
}

// Close stops the client: its writers stop without closing their
// ledgers (appends not yet stored fail with ledger.ErrClosed, and so
// does Close; the ledgers stay open until recovered), and its later
// operations fail with ledger.ErrClosed.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	ws := slices.Collect(maps.Keys(c.writers))
	clear(c.writers)
	c.mu.Unlock()
	for _, w := range ws {
		w.abort()
	}
}

func (c *Client) forget(w *Writer) {
	c.mu.Lock()
	delete(c.writers, w)
	c.mu.Unlock()
}

// Create implements ledgers.Store.
func (c *Client) Create(ctx context.Context, o ledger.CreateOptions) (ledgers.Writer, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	w, err := c.s.create(ctx, o, c)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		w.abort()
		return nil, fmt.Errorf("memledger client: %w", ledger.ErrClosed)
	}
	c.writers[w] = struct{}{}
	return w, nil
}

// Recover implements ledgers.Store.
func (c *Client) Recover(ctx context.Context, id uint64) (ledger.Metadata, error) {
	if err := c.checkOpen(); err != nil {
		return ledger.Metadata{}, err
	}
	return c.s.Recover(ctx, id)
}

// OpenReader implements ledgers.Store.
func (c *Client) OpenReader(ctx context.Context, id uint64) (ledgers.Reader, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	return c.s.OpenReader(ctx, id)
}

// Delete implements ledgers.Store.
func (c *Client) Delete(ctx context.Context, id uint64) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	return c.s.Delete(ctx, id)
}
