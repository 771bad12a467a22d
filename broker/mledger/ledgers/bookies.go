package ledgers

import (
	"context"

	"github.com/isobar-mq/isobar/bookie/ledger"
)

// OnBookies is the Store of ledgers on the region's bookies, through c;
// nil when c is nil. Writers are c's *ledger.Writer, readers its
// *ledger.Reader; Recover is c.OpenRecover.
func OnBookies(c *ledger.Client) Store {
	if c == nil {
		return nil
	}
	return bookies{c}
}

type bookies struct{ c *ledger.Client }

func (b bookies) Create(ctx context.Context, o ledger.CreateOptions) (Writer, error) {
	w, err := b.c.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (b bookies) Recover(ctx context.Context, id uint64) (ledger.Metadata, error) {
	r, err := b.c.OpenRecover(ctx, id)
	if err != nil {
		return ledger.Metadata{}, err
	}
	return r.Metadata(), nil
}

func (b bookies) OpenReader(ctx context.Context, id uint64) (Reader, error) {
	r, err := b.c.OpenNoRecovery(ctx, id)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (b bookies) Delete(ctx context.Context, id uint64) error { return b.c.Delete(ctx, id) }

var (
	_ Writer = (*ledger.Writer)(nil)
	_ Reader = (*ledger.Reader)(nil)
)
