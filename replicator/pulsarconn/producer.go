package pulsarconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Bounds of a producer's sends awaiting their callbacks.
const (
	maxInflight      = 1000
	maxInflightBytes = 8 << 20
)

// ProducerOptions says where to produce.
type ProducerOptions struct {
	// Topic is the full topic name.
	Topic string
	// Name is the producer name (the broker picks one when empty).
	Name string
}

// Producer publishes raw entries to one topic. Callbacks run on a
// goroutine of the producer, one at a time, in send order.
type Producer struct {
	cn    *conn
	id    uint64
	topic string
	name  string // as the broker confirmed it
	last  int64  // the broker's last stored sequence id for name

	// sendMu makes SendAsync queue and write in one order.
	sendMu sync.Mutex

	// mu guards the fields below.
	mu            sync.Mutex
	pending       []*sendOp // in send order, callback not yet started
	inflight      int       // len(pending)
	inflightBytes int
	sent, called  uint64 // sends accepted; callbacks returned
	err           error  // set once closed
	running       bool   // the callback goroutine runs
	wake          chan struct{}
}

// sendOp is one send awaiting its callback.
type sendOp struct {
	seq  uint64
	size int
	cb   func(MessageID, error)
	done bool // id or err is set
	id   MessageID
	err  error
}

// CreateProducer looks the topic up and creates a producer on the owner
// broker, waiting until the broker says it is ready. It retries retriable
// failures until ctx ends or OperationTimeout has passed.
func (c *Client) CreateProducer(ctx context.Context, o ProducerOptions) (*Producer, error) {
	if o.Topic == "" {
		return nil, errors.New("pulsarconn: create producer: Topic is required")
	}
	ctx, cancel := c.opCtx(ctx)
	defer cancel()
	var p *Producer
	err := c.retry(ctx, "create producer", func(ctx context.Context) error {
		var err error
		p, err = c.createProducerOnce(ctx, o)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pulsarconn: create producer %q on %s: %w", o.Name, o.Topic, err)
	}
	return p, nil
}

func (c *Client) createProducerOnce(ctx context.Context, o ProducerOptions) (*Producer, error) {
	cn, err := c.lookup(ctx, o.Topic)
	if err != nil {
		return nil, err
	}
	p := &Producer{cn: cn, id: c.nextID.Add(1), topic: o.Topic, name: o.Name, running: true}
	if !cn.register(p, nil) {
		return nil, cn.lostErr()
	}
	reqID := c.nextReq.Add(1)
	cmd := &pb.CommandProducer{Topic: &o.Topic, ProducerId: &p.id, RequestId: &reqID}
	if o.Name != "" {
		cmd.ProducerName, cmd.UserProvidedProducerName = &o.Name, boolp(true)
	}
	resp, err := cn.request(ctx, reqID, &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: cmd})
	if err == nil && resp.GetProducerSuccess() == nil {
		err = fmt.Errorf("%w: %v in reply to PRODUCER", wire.ErrBadCommand, resp.GetType())
	}
	if err != nil {
		cn.unregisterProducer(p)
		p.fail(fmt.Errorf("%w: create failed", ErrClosed))
		p.mu.Lock()
		p.running = false // never started
		p.mu.Unlock()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// The broker may still create it: close it (best effort).
			c.goroutine(func() { p.sendClose(context.Background()) })
		}
		return nil, err
	}
	p.name = resp.GetProducerSuccess().GetProducerName()
	p.last = resp.GetProducerSuccess().GetLastSequenceId()
	if !c.goroutine(p.callbacks) {
		cn.unregisterProducer(p)
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
		p.fail(fmt.Errorf("%w: client closed", ErrClosed))
		return nil, fmt.Errorf("%w: client closed", ErrClosed)
	}
	return p, nil
}

// Name returns the producer name the broker confirmed.
func (p *Producer) Name() string { return p.name }

// LastSequenceID returns the highest sequence id the broker had stored for
// this producer name when the producer was created (PRODUCER_SUCCESS
// last_sequence_id), -1 if none: with de-duplication on, sends at or below
// it are dropped as duplicates (receipt position {-1, -1}).
func (p *Producer) LastSequenceID() int64 { return p.last }

// SendAsync publishes one entry: data is [u32 metadataSize]
// [MessageMetadata][payload] as in Entry.Data, sent unchanged with
// sequence id seq, numMessages messages (at least 1; the batch size) and,
// when sourceID is not nil, sourceID as the entry's original position. cb
// runs exactly once, on the producer's callback goroutine, in send order,
// with the stored position or an error: the broker's SEND_ERROR (wrapping
// its *errkind.Error), or one wrapping ErrClosed when the producer or its
// connection closed before the receipt (the entry may or may not have been
// stored). A position of {-1, -1} means the broker dropped the entry as a
// duplicate.
//
// At most 1000 entries or 8 MiB may await their callbacks; SendAsync
// blocks while that is full, so cb must not call SendAsync or Flush on the
// same producer. After a SEND_ERROR the producer is closed: the sends
// after the failed one get ErrClosed.
func (p *Producer) SendAsync(data []byte, seq uint64, numMessages int, sourceID *MessageID, cb func(MessageID, error)) {
	op := &sendOp{seq: seq, size: len(data), cb: cb}
	nm := int32(max(1, min(numMessages, 1<<31-1)))
	send := &pb.CommandSend{ProducerId: &p.id, SequenceId: &seq, NumMessages: &nm}
	if sourceID != nil {
		send.MessageId = sourceID.toPB()
	}
	frame, ferr := wire.AppendEntryCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: send}, nil, data)
	if ferr == nil && (len(data) < 4 || uint64(binary.BigEndian.Uint32(data)) > uint64(len(data)-4)) {
		ferr = fmt.Errorf("%w: %d bytes do not hold an entry", wire.ErrMalformed, len(data))
	}

	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.mu.Lock()
	for p.err == nil && ferr == nil && p.inflight > 0 &&
		(p.inflight >= maxInflight || p.inflightBytes+op.size > maxInflightBytes) {
		wake := p.waitLocked()
		p.mu.Unlock()
		<-wake
		p.mu.Lock()
	}
	p.sent++
	if p.err != nil || ferr != nil {
		op.done, op.err = true, p.err
		if ferr != nil {
			op.err = fmt.Errorf("pulsarconn: send %d: %w", seq, ferr)
		}
		if !p.running {
			// Closed and drained: nothing earlier is waiting.
			p.mu.Unlock()
			cb(MessageID{}, op.err)
			p.mu.Lock()
			p.called++
			p.wakeLocked()
			p.mu.Unlock()
			return
		}
	}
	p.pending = append(p.pending, op)
	p.inflight++
	p.inflightBytes += op.size
	p.wakeLocked()
	p.mu.Unlock()
	if op.done {
		return
	}
	// A write error fails the connection, which fails op.
	p.cn.write(frame)
}

// receipt records the broker's answer to send seq (reader goroutine).
func (p *Producer) receipt(seq uint64, id MessageID, err error) {
	p.mu.Lock()
	var op *sendOp
	for _, o := range p.pending {
		if !o.done && o.seq == seq {
			op = o
			break
		}
	}
	if op == nil {
		p.mu.Unlock()
		p.cn.log.Debug("receipt for no pending send", "producer", p.id, "seq", seq, "err", err)
		return
	}
	op.done, op.id, op.err = true, id, err
	p.wakeLocked()
	p.mu.Unlock()
	if err != nil {
		// Later sends must not land before this one: close the producer,
		// as the broker does.
		p.cn.unregisterProducer(p)
		p.fail(fmt.Errorf("%w: producer %d closed after a send error", ErrClosed, p.id))
		reqID := p.cn.cl.nextReq.Add(1)
		p.cn.writeCmd(closeProducerCmd(p.id, reqID))
	}
}

// fail closes the producer locally: every send without an answer gets err.
func (p *Producer) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	p.err = err
	for _, op := range p.pending {
		if !op.done {
			op.done, op.err = true, err
		}
	}
	p.wakeLocked()
}

// callbacks runs the callbacks in send order until the producer is closed
// and drained.
func (p *Producer) callbacks() {
	p.mu.Lock()
	for {
		if len(p.pending) > 0 && p.pending[0].done {
			op := p.pending[0]
			p.pending[0] = nil
			p.pending = p.pending[1:]
			p.inflight--
			p.inflightBytes -= op.size
			p.wakeLocked()
			p.mu.Unlock()
			op.cb(op.id, op.err)
			p.mu.Lock()
			p.called++
			p.wakeLocked()
			continue
		}
		if p.err != nil && len(p.pending) == 0 {
			p.running = false
			p.wakeLocked()
			p.mu.Unlock()
			return
		}
		wake := p.waitLocked()
		p.mu.Unlock()
		<-wake
		p.mu.Lock()
	}
}

func (p *Producer) waitLocked() chan struct{} {
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	return p.wake
}

func (p *Producer) wakeLocked() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
}

// Flush waits until every send made before it has had its callback run.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	target := p.sent
	for p.called < target {
		wake := p.waitLocked()
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("pulsarconn: flush producer %d on %s: %w", p.id, p.topic, ctx.Err())
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// Close closes the producer on the broker (CLOSE_PRODUCER, waiting for its
// reply as long as ctx and OperationTimeout allow) and then locally: sends
// still without a receipt get ErrClosed (call Flush first to wait for
// them). It does not wait for the callbacks to run.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	already := p.err != nil
	p.mu.Unlock()
	var err error
	if !already {
		err = p.sendClose(ctx)
	}
	p.cn.unregisterProducer(p)
	p.fail(fmt.Errorf("%w: producer closed", ErrClosed))
	return err
}

func (p *Producer) sendClose(ctx context.Context) error {
	ctx, cancel := p.cn.cl.opCtx(ctx)
	defer cancel()
	reqID := p.cn.cl.nextReq.Add(1)
	if _, err := p.cn.request(ctx, reqID, closeProducerCmd(p.id, reqID)); err != nil {
		return fmt.Errorf("pulsarconn: close producer %d on %s: %w", p.id, p.topic, err)
	}
	return nil
}

func closeProducerCmd(id, reqID uint64) *pb.BaseCommand {
	return &pb.BaseCommand{
		Type:          pb.BaseCommand_CLOSE_PRODUCER.Enum(),
		CloseProducer: &pb.CommandCloseProducer{ProducerId: &id, RequestId: &reqID},
	}
}
