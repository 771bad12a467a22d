package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
)

// HeartbeatPrefix starts the names of the brokers' heartbeat managed
// ledgers: HeartbeatPrefix + the broker's name. They are the broker's own
// (named after it), live in no namespace, and are never served to
// clients.
const HeartbeatPrefix = "isobar-system/heartbeat/persistent/"

// Heartbeat round-trips an entry through this broker's heartbeat managed
// ledger: the entry goes to a quorum of bookies, the ledger's metadata to
// the metadata store, and the entry is read back. It is what Pulsar's
// health check does through its heartbeat topic: a broker that answers it
// can store and serve a message now. name is the broker's name.
func (b *Broker) Heartbeat(ctx context.Context, name string) error {
	b.hbMu.Lock()
	defer b.hbMu.Unlock()
	if b.hb == nil {
		ml, err := mledger.OpenShared(ctx, b.ledgerDeps(), b.cfg.Ledger, HeartbeatPrefix+name)
		if err != nil {
			return fmt.Errorf("heartbeat: open: %w", err)
		}
		c, err := ml.OpenCursor(ctx, "heartbeat", mledger.Latest)
		if err != nil {
			ml.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("heartbeat: cursor: %w", err)
		}
		b.hb, b.hbCursor = ml, c
	}
	fail := func(err error) error {
		// Start afresh next time (a fenced or broken ledger).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		b.hb.Close(cctx)
		cancel()
		b.hb, b.hbCursor = nil, nil
		return fmt.Errorf("heartbeat: %w", err)
	}
	data := []byte("heartbeat " + strconv.FormatInt(b.deps.Now().UnixNano(), 10))
	p, err := b.hb.AddEntry(ctx, data)
	if err != nil {
		return fail(err)
	}
	es, _, err := b.hb.Read(ctx, p, 1)
	if err != nil {
		return fail(err)
	}
	if len(es) != 1 || es[0].Position != p || !bytes.Equal(es[0].Data, data) {
		return fail(errors.New("read back something else than was written"))
	}
	// Acknowledged, so the heartbeat ledger trims what it no longer needs.
	if err := b.hbCursor.AckCumulative(ctx, p); err != nil {
		return fail(err)
	}
	return nil
}

// closeHeartbeat closes the heartbeat managed ledger, if open.
func (b *Broker) closeHeartbeat(ctx context.Context) {
	b.hbMu.Lock()
	defer b.hbMu.Unlock()
	if b.hb != nil {
		b.hb.Close(ctx)
		b.hb, b.hbCursor = nil, nil
	}
}
