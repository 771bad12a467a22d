package replicator

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
)

// The seams of a worker: what it does with NATS (Transport), with its
// region's brokers (Source to read replication cursors, Sink to write
// what it receives) and with the policy store (Policies). Production
// hands it NATSTransport, its own pulsarconn.Client and a *policy.Store;
// tests hand it in-memory fakes (no NATS server, no brokers) or wrappers
// that inject faults, as metastore/metafault does for the metadata store.

// Transport carries a worker's frames between regions: requests that
// wait for a reply, and the sink's queue subscription that answers them.
// NATSTransport is the production one.
type Transport interface {
	// Request sends msg (its Subject set) and waits for the reply until
	// ctx ends. When nobody subscribes to the subject it fails at once
	// with an error matching nats.ErrNoResponders.
	Request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error)
	// QueueServe subscribes h to subject (which may hold wildcards) in
	// queue group queue, and returns once the subscription is in place.
	// h is called for each request, one at a time, in order of arrival.
	QueueServe(subject, queue string, h Handler) (Subscription, error)
}

// Handler handles one request of a Transport subscription. respond sends
// the reply (nil: an empty one), at most once, from any goroutine; it
// does nothing when the request wants no reply.
type Handler func(req *nats.Msg, respond func(reply *nats.Msg))

// Subscription is a Transport subscription (*nats.Subscription).
type Subscription interface {
	// Drain stops delivering new requests and lets those delivered finish.
	Drain() error
	// Unsubscribe stops at once.
	Unsubscribe() error
}

// NATSTransport is the Transport of a NATS connection: requests are NATS
// requests, a subscription is a NATS queue subscription flushed to the
// server before QueueServe returns.
func NATSTransport(nc *nats.Conn) Transport { return natsTransport{nc} }

type natsTransport struct{ nc *nats.Conn }

func (t natsTransport) Request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	return t.nc.RequestMsgWithContext(ctx, msg)
}

func (t natsTransport) QueueServe(subject, queue string, h Handler) (Subscription, error) {
	sub, err := t.nc.QueueSubscribe(subject, queue, func(m *nats.Msg) {
		h(m, func(reply *nats.Msg) {
			switch {
			case m.Reply == "":
			case reply == nil:
				_ = m.Respond(nil)
			default:
				_ = m.RespondMsg(reply)
			}
		})
	})
	if err != nil {
		return nil, err
	}
	if err := t.nc.FlushTimeout(10 * time.Second); err != nil {
		_ = sub.Drain()
		return nil, err
	}
	return sub, nil
}

// Source reads the replication cursors of the region's brokers: one
// subscription per stream session. A *pulsarconn.Client is one (through
// the worker's thin adapter).
type Source interface {
	Subscribe(ctx context.Context, o pulsarconn.SubscribeOptions) (Cursor, error)
}

// Cursor is one subscription on a replication cursor
// (a *pulsarconn.Consumer).
type Cursor interface {
	// Receive returns the next entry, in the cursor's order; a
	// subscription state (Entry.Control) comes between them.
	Receive(ctx context.Context) (pulsarconn.Entry, error)
	// AckCumulative acknowledges every entry up to id.
	AckCumulative(ctx context.Context, id pulsarconn.MessageID) error
	Close(ctx context.Context) error
}

// Sink writes what the sink side received into the region's brokers,
// through one replicator producer per (topic, source region). A
// *pulsarconn.Client is one (through the worker's thin adapter).
type Sink interface {
	CreateProducer(ctx context.Context, o pulsarconn.ProducerOptions) (Writer, error)
}

// Writer is a replicator producer (a *pulsarconn.Producer).
type Writer interface {
	// SendAsync sends one entry with sequence id seq; cb gets its
	// receipt (once, from any goroutine). sourceID is the entry's source
	// position, by which the broker drops a copy it already stored (and
	// still answers it with success).
	SendAsync(data []byte, seq uint64, numMessages int, sourceID *pulsarconn.MessageID, cb func(pulsarconn.MessageID, error))
	Close(ctx context.Context) error
}

// Policies is what a worker reads of the policy store: which clusters a
// namespace, or a topic of its own, replicates across. A *policy.Store
// is one.
type Policies interface {
	Namespace(ctx context.Context, namespace string) (*policy.Policies, error)
	TopicPolicies(ctx context.Context, name topic.Name) (policy.TopicPolicies, bool, error)
	// ReplicationClusters is a topic's own list, else its namespace's.
	ReplicationClusters(ctx context.Context, name topic.Name) ([]string, error)
}

var _ Policies = (*policy.Store)(nil)

// brokers is a pulsarconn.Client as a Source and a Sink.
type brokers struct{ c *pulsarconn.Client }

func (b brokers) Subscribe(ctx context.Context, o pulsarconn.SubscribeOptions) (Cursor, error) {
	co, err := b.c.Subscribe(ctx, o)
	if err != nil {
		return nil, err
	}
	return co, nil
}

func (b brokers) CreateProducer(ctx context.Context, o pulsarconn.ProducerOptions) (Writer, error) {
	p, err := b.c.CreateProducer(ctx, o)
	if err != nil {
		return nil, err
	}
	return p, nil
}

var (
	_ Cursor = (*pulsarconn.Consumer)(nil)
	_ Writer = (*pulsarconn.Producer)(nil)
)
