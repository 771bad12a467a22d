package pulsarconn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// defaultReceiverQueue is the permits a consumer grants when
// SubscribeOptions.ReceiverQueue is 0.
const defaultReceiverQueue = 1000

// MessageID is the position of an entry in a topic's log.
type MessageID struct {
	Ledger, Entry int64
}

func (id MessageID) String() string { return fmt.Sprintf("%d:%d", id.Ledger, id.Entry) }

// Entry is one entry of a topic as stored: a single message or a whole
// batch.
type Entry struct {
	ID MessageID
	// Data is [u32 metadataSize][MessageMetadata][payload] as sent by the
	// producer (see wire.Frame.Entry and wire.DecodeEntry). It belongs to
	// the caller.
	Data            []byte
	RedeliveryCount uint32
	// Control is set on a record that is not an entry of the topic (its
	// message id is replication.ControlID): a subscription's state sent
	// by the broker beside the entries. It took no permit and is never
	// acknowledged.
	Control bool
}

// SubscribeOptions says what to consume.
type SubscribeOptions struct {
	// Topic is the full topic name, persistent://tenant/ns/name (a
	// partition such as ...-partition-3 included).
	Topic        string
	Subscription string
	ConsumerName string
	// Type is the subscription type; zero is Exclusive. Cumulative
	// acknowledgement needs Exclusive or Failover.
	Type pb.CommandSubscribe_SubType
	// InitialPosition is where a new subscription starts: Latest (zero) or
	// Earliest.
	InitialPosition pb.CommandSubscribe_InitialPosition
	// ReceiverQueue is how many messages the broker may send ahead of
	// Receive (the FLOW permits; a batched entry takes one per message,
	// but the broker sends a whole entry while any permit is left); 0
	// means 1000. Permits are granted again, half the queue at a time, as
	// Receive hands entries out.
	ReceiverQueue int
}

// Consumer receives the entries of a durable subscription. Its methods are
// safe for concurrent use.
type Consumer struct {
	cn    *conn
	id    uint64
	topic string
	queue int

	active atomic.Bool

	// mu guards the fields below.
	mu       sync.Mutex
	entries  []queued // received, not yet handed out
	consumed int      // messages handed out since the last FLOW
	err      error    // set once the consumer is closed
	wake     chan struct{}
}

// Subscribe looks the topic up, subscribes on the owner broker and grants
// ReceiverQueue permits. It retries retriable failures until ctx ends or
// OperationTimeout has passed.
func (c *Client) Subscribe(ctx context.Context, o SubscribeOptions) (*Consumer, error) {
	if o.Topic == "" || o.Subscription == "" {
		return nil, errors.New("pulsarconn: subscribe: Topic and Subscription are required")
	}
	if o.ReceiverQueue < 0 {
		return nil, fmt.Errorf("pulsarconn: subscribe: ReceiverQueue %d is negative", o.ReceiverQueue)
	}
	if o.ReceiverQueue == 0 {
		o.ReceiverQueue = defaultReceiverQueue
	}
	ctx, cancel := c.opCtx(ctx)
	defer cancel()
	var co *Consumer
	err := c.retry(ctx, "subscribe", func(ctx context.Context) error {
		var err error
		co, err = c.subscribeOnce(ctx, o)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pulsarconn: subscribe %s to %s: %w", o.Subscription, o.Topic, err)
	}
	return co, nil
}

func (c *Client) subscribeOnce(ctx context.Context, o SubscribeOptions) (*Consumer, error) {
	cn, err := c.lookup(ctx, o.Topic)
	if err != nil {
		return nil, err
	}
	co := &Consumer{cn: cn, id: c.nextID.Add(1), topic: o.Topic, queue: o.ReceiverQueue}
	co.active.Store(o.Type != pb.CommandSubscribe_Failover)
	// Registered before SUBSCRIBE: the broker may talk to it right after
	// its reply.
	if !cn.register(nil, co) {
		return nil, cn.lostErr()
	}
	reqID := c.nextReq.Add(1)
	_, err = cn.request(ctx, reqID, &pb.BaseCommand{
		Type: pb.BaseCommand_SUBSCRIBE.Enum(),
		Subscribe: &pb.CommandSubscribe{
			Topic: &o.Topic, Subscription: &o.Subscription, SubType: o.Type.Enum(),
			ConsumerId: &co.id, RequestId: &reqID, ConsumerName: &o.ConsumerName,
			Durable: boolp(true), InitialPosition: o.InitialPosition.Enum(),
		},
	})
	if err == nil {
		err = cn.writeCmd(flowCmd(co.id, o.ReceiverQueue))
	}
	if err != nil {
		cn.unregisterConsumer(co)
		co.fail(fmt.Errorf("%w: subscribe failed", ErrClosed))
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// The broker may still attach it: detach it (best effort).
			c.goroutine(func() { co.sendClose(context.Background()) })
		}
		return nil, err
	}
	return co, nil
}

func flowCmd(id uint64, n int) *pb.BaseCommand {
	permits := uint32(n)
	return &pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{ConsumerId: &id, MessagePermits: &permits}}
}

// queued is a received entry and the permits it took (its messages).
type queued struct {
	e    Entry
	msgs int
}

// deliver queues an entry of msgs messages from the broker (reader
// goroutine). More than twice the permits granted means the broker
// ignores flow control.
func (co *Consumer) deliver(e Entry, msgs int) error {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.err != nil {
		return nil
	}
	if len(co.entries) >= 2*co.queue {
		return fmt.Errorf("%w: consumer %d: broker sent more than %d entries unasked", wire.ErrMalformed, co.id, 2*co.queue)
	}
	if e.Control {
		msgs = 0 // outside flow control
	} else {
		msgs = max(1, msgs)
	}
	co.entries = append(co.entries, queued{e, msgs})
	co.wakeLocked()
	return nil
}

func (co *Consumer) wakeLocked() {
	if co.wake != nil {
		close(co.wake)
		co.wake = nil
	}
}

// fail closes the consumer locally with err (wrapping ErrClosed).
func (co *Consumer) fail(err error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.err != nil {
		return
	}
	co.err = err
	co.entries = nil
	co.wakeLocked()
}

func (co *Consumer) setActive(active bool) { co.active.Store(active) }

// Receive returns the next entry, blocking until one arrives, ctx ends or
// the consumer is closed. Once the consumer is closed (by Close, by the
// broker or with its connection) it returns an error wrapping ErrClosed
// and entries buffered but not yet returned are dropped: they were not
// acknowledged, so a new subscription gets them again from the
// mark-delete position.
func (co *Consumer) Receive(ctx context.Context) (Entry, error) {
	for {
		co.mu.Lock()
		if co.err != nil {
			err := co.err
			co.mu.Unlock()
			return Entry{}, err
		}
		if len(co.entries) > 0 {
			q := co.entries[0]
			co.entries[0] = queued{}
			co.entries = co.entries[1:]
			co.consumed += q.msgs
			var grant int
			if co.consumed >= max(1, co.queue/2) {
				grant, co.consumed = co.consumed, 0
			}
			co.mu.Unlock()
			if grant > 0 {
				// A failure here fails the connection, which Receive reports next.
				co.cn.writeCmd(flowCmd(co.id, grant))
			}
			return q.e, nil
		}
		if co.wake == nil {
			co.wake = make(chan struct{})
		}
		wake := co.wake
		co.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Entry{}, ctx.Err()
		}
	}
}

// Active reports whether the broker last said this consumer is the active
// one of its Failover subscription (false until it says so); always true
// for the other subscription types.
func (co *Consumer) Active() bool { return co.active.Load() }

// AckCumulative acknowledges every entry up to and including id and waits
// for the broker to confirm it has persisted the position.
func (co *Consumer) AckCumulative(ctx context.Context, id MessageID) error {
	co.mu.Lock()
	err := co.err
	co.mu.Unlock()
	if err != nil {
		return fmt.Errorf("pulsarconn: ack %v: %w", id, err)
	}
	ctx, cancel := co.cn.cl.opCtx(ctx)
	defer cancel()
	reqID := co.cn.cl.nextReq.Add(1)
	resp, err := co.cn.request(ctx, reqID, &pb.BaseCommand{
		Type: pb.BaseCommand_ACK.Enum(),
		Ack: &pb.CommandAck{
			ConsumerId: &co.id, AckType: pb.CommandAck_Cumulative.Enum(),
			MessageId: []*pb.MessageIdData{id.toPB()}, RequestId: &reqID,
		},
	})
	if err != nil {
		return fmt.Errorf("pulsarconn: ack %v on %s: %w", id, co.topic, err)
	}
	if r := resp.GetAckResponse(); r != nil && r.Error != nil {
		return fmt.Errorf("pulsarconn: ack %v on %s: %w", id, co.topic, serverError(r.GetError(), r.GetMessage()))
	}
	return nil
}

// Close detaches the consumer from the broker (CLOSE_CONSUMER, waiting for
// its reply as long as ctx and OperationTimeout allow) and closes it
// locally whatever the outcome; the error reports the broker's side.
func (co *Consumer) Close(ctx context.Context) error {
	co.mu.Lock()
	already := co.err != nil
	co.mu.Unlock()
	co.cn.unregisterConsumer(co)
	co.fail(fmt.Errorf("%w: consumer closed", ErrClosed))
	if already {
		return nil
	}
	return co.sendClose(ctx)
}

func (co *Consumer) sendClose(ctx context.Context) error {
	ctx, cancel := co.cn.cl.opCtx(ctx)
	defer cancel()
	reqID := co.cn.cl.nextReq.Add(1)
	_, err := co.cn.request(ctx, reqID, &pb.BaseCommand{
		Type:          pb.BaseCommand_CLOSE_CONSUMER.Enum(),
		CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: &co.id, RequestId: &reqID},
	})
	if err != nil {
		return fmt.Errorf("pulsarconn: close consumer %d on %s: %w", co.id, co.topic, err)
	}
	return nil
}
