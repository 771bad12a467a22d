package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// maxProtocolVersion is the highest protocol version this broker speaks.
const maxProtocolVersion = 21

// maxOutBuffer bounds the bytes queued for a connection's writer; senders
// block (the dispatcher of a slow consumer, mostly) while it is full.
const maxOutBuffer = 8 << 20

// conn is one client connection: a reader loop (serve) that handles
// commands in order, and a writer goroutine that writes what senders
// queue, many frames per write.
type conn struct {
	b   *Broker
	nc  net.Conn
	log *slog.Logger

	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc

	// wmu guards the output and closed; wcond signals room. The output
	// is wpieces then wbuf[wmark:]: frames copied into wbuf, large
	// entries in their own buffers between its pieces; wlen counts it.
	wmu     sync.Mutex
	wcond   *sync.Cond
	wbuf    []byte
	wmark   int
	wpieces net.Buffers
	wlen    int
	wclosed bool
	wkick   chan struct{}

	// mu guards the producer and consumer tables.
	mu        sync.Mutex
	producers map[uint64]*producer
	consumers map[uint64]*consumer

	clientVersion   string
	protocolVersion int32
	partialProducer bool      // the client's CONNECT says it supports partial producers
	lastRead        time.Time // reader goroutine only
	slow            sync.WaitGroup
	pending         atomic.Int64 // async handlers running (bounded by MaxPendingRequests)
	closeOnce       sync.Once
	drain           bool     // reader goroutine, read by serve after it
	auth            connAuth // the authenticated role (connauth.go)
}

func newConn(b *Broker, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(b.ctx)
	c := &conn{
		b: b, nc: nc,
		log:       b.log.With("remote", nc.RemoteAddr().String()),
		ctx:       ctx,
		cancel:    cancel,
		wkick:     make(chan struct{}, 1),
		producers: map[uint64]*producer{},
		consumers: map[uint64]*consumer{},
	}
	c.wcond = sync.NewCond(&c.wmu)
	return c
}

// serve runs the connection until the peer goes or it is closed.
func (c *conn) serve() {
	wdone := make(chan struct{})
	go func() { defer close(wdone); c.writeLoop() }()
	kdone := make(chan struct{})
	go func() { defer close(kdone); c.keepAlive() }()
	err := c.readLoop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Debug("connection closed", "err", err)
	}
	c.close()
	<-wdone // the writer flushed what was queued (a final error, say)
	if c.drain {
		// The peer may still be sending the frame we refused: half-close
		// and read it away (bounded) so it reads our reply, not a reset.
		if hc, ok := c.nc.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
			c.nc.SetReadDeadline(time.Now().Add(time.Second))
			_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, 64<<20))
		}
	}
	c.nc.Close()
	c.stopAuth()
	c.slow.Wait()
	c.release()
	<-kdone
}

// close stops the connection: the reader wakes up, the writer flushes
// what is queued and stops, serve cleans up.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wmu.Lock()
		c.wclosed = true
		c.wcond.Broadcast()
		c.wmu.Unlock()
		select {
		case c.wkick <- struct{}{}:
		default:
		}
		c.nc.SetReadDeadline(time.Now())
		c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	})
}

// release removes the connection's producers and consumers.
func (c *conn) release() {
	c.mu.Lock()
	prods := make([]*producer, 0, len(c.producers))
	for _, p := range c.producers {
		prods = append(prods, p)
	}
	cons := make([]*consumer, 0, len(c.consumers))
	for _, k := range c.consumers {
		cons = append(cons, k)
	}
	c.producers, c.consumers = map[uint64]*producer{}, map[uint64]*consumer{}
	c.mu.Unlock()
	for _, p := range prods {
		p.t.removeProducer(p)
	}
	for _, k := range cons {
		k.sub.removeConsumer(k)
	}
}

// send queues a frame for the writer. It blocks while the buffer is full
// and drops the frame once the connection is closed.
func (c *conn) send(frame []byte) { c.sendEntry(frame, nil) }

// sendEntryMin is the entry size from which sendEntry queues the entry
// itself rather than a copy.
const sendEntryMin = 16 << 10

// sendEntry queues a frame whose last part, entry, is not in head (an
// entry command's, wire.AppendEntryCommandHead). A large entry is
// written from its own buffer, which must not change afterwards (entries
// read or cached never do).
func (c *conn) sendEntry(head, entry []byte) {
	c.wmu.Lock()
	for c.wlen > maxOutBuffer && !c.wclosed {
		c.wcond.Wait()
	}
	if c.wclosed {
		c.wmu.Unlock()
		return
	}
	c.wbuf = append(c.wbuf, head...)
	if len(entry) < sendEntryMin {
		c.wbuf = append(c.wbuf, entry...)
	} else {
		c.wpieces = append(c.wpieces, c.wbuf[c.wmark:], entry)
		c.wmark = len(c.wbuf)
	}
	c.wlen += len(head) + len(entry)
	c.wmu.Unlock()
	select {
	case c.wkick <- struct{}{}:
	default:
	}
}

// sendCmd queues a simple command.
func (c *conn) sendCmd(cmd *pb.BaseCommand) {
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		c.log.Error("encode command", "type", cmd.GetType(), "err", err)
		return
	}
	c.send(f)
}

func (c *conn) writeLoop() {
	var buf []byte
	var pieces net.Buffers
	for range c.wkick {
		c.wmu.Lock()
		if len(c.wbuf) > c.wmark {
			c.wpieces = append(c.wpieces, c.wbuf[c.wmark:])
		}
		pieces, c.wpieces = c.wpieces, pieces[:0]
		buf, c.wbuf = c.wbuf, buf[:0]
		c.wmark, c.wlen = 0, 0
		closed := c.wclosed
		c.wcond.Broadcast()
		c.wmu.Unlock()
		if len(pieces) > 0 {
			if !closed {
				c.nc.SetWriteDeadline(time.Now().Add(2 * c.b.cfg.KeepAlive))
			}
			batch := pieces // WriteTo consumes its receiver
			if _, err := batch.WriteTo(c.nc); err != nil {
				c.close()
				c.nc.Close()
				return
			}
		}
		if closed {
			return
		}
		clear(pieces) // let the entries go
		if cap(buf) > 4*maxOutBuffer {
			buf = nil
		}
	}
}

// keepAlive pings an idle peer and closes the connection when it stays
// silent for two intervals.
func (c *conn) keepAlive() {
	t := time.NewTicker(c.b.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	}
}

func (c *conn) readLoop() error {
	maxFrame := c.b.cfg.MaxMessageSize + wire.FramePadding
	connected := false
	for {
		limit := maxFrame
		if connected {
			c.nc.SetReadDeadline(time.Now().Add(2*c.b.cfg.KeepAlive + time.Second))
		} else {
			// Before CONNECT: a small frame, soon, so a connection that
			// never says who it is costs little and not for long.
			limit = min(maxFrame, maxHandshakeFrame)
			c.nc.SetReadDeadline(time.Now().Add(c.b.cfg.Limits.HandshakeTimeout))
		}
		if err := c.ctx.Err(); err != nil {
			return err
		}
		raw, err := wire.ReadFrame(c.nc, limit, nil)
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, wire.ErrFrameTooLarge) && !connected:
				c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: %s (before CONNECT at most %d bytes)", errkind.ErrNotAllowed, wireReason(err), limit)))
				c.drainAndClose()
			case errors.Is(err, wire.ErrFrameTooLarge):
				c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: %s (max message size %d)", errkind.ErrNotAllowed, wireReason(err), c.b.cfg.MaxMessageSize)))
				c.drainAndClose()
			case errors.As(err, &ne) && ne.Timeout() && !connected:
				err = fmt.Errorf("broker: no CONNECT within %v: %w", c.b.cfg.Limits.HandshakeTimeout, err)
			case errors.As(err, &ne) && ne.Timeout():
				err = fmt.Errorf("broker: peer silent for %v: %w", 2*c.b.cfg.KeepAlive, err)
			}
			return err
		}
		f, derr := wire.DecodeFrame(raw)
		if derr != nil && f.Cmd == nil {
			c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: %s", errkind.ErrUnknown, wireReason(derr))))
			c.drainAndClose()
			return derr
		}
		if !connected {
			if f.Cmd.GetType() != pb.BaseCommand_CONNECT {
				c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: expected CONNECT first, got %v", errkind.ErrNotAllowed, f.Cmd.GetType())))
				c.drainAndClose()
				return fmt.Errorf("broker: %v before CONNECT", f.Cmd.GetType())
			}
			if err := c.handleConnect(f.Cmd.Connect); err != nil {
				c.log.Info("connection refused", "err", err)
				c.sendCmd(wire.NewErrorCommand(0, err))
				c.drainAndClose()
				return err
			}
			connected = true
			continue
		}
		if err := c.handle(f, derr); err != nil {
			return err
		}
	}
}

// maxHandshakeFrame bounds the frames a connection may send before its
// CONNECT (which carries at most a client version and credentials).
const maxHandshakeFrame = 64 << 10

// drainAndClose makes serve send what is queued, then read away what the
// peer still sends before closing (see serve).
func (c *conn) drainAndClose() { c.drain = true }

func (c *conn) handleConnect(cmd *pb.CommandConnect) error {
	// Set before authenticate arms the credential's refresh timer, whose
	// challenge reads the protocol version from its own goroutine.
	c.clientVersion = cmd.GetClientVersion()
	c.partialProducer = cmd.GetFeatureFlags().GetSupportsPartialProducer()
	c.protocolVersion = min(cmd.GetProtocolVersion(), maxProtocolVersion)
	if err := c.authenticate(cmd); err != nil {
		return err
	}
	mms := int32(c.b.cfg.MaxMessageSize)
	c.sendCmd(&pb.BaseCommand{
		Type: pb.BaseCommand_CONNECTED.Enum(),
		Connected: &pb.CommandConnected{
			ServerVersion:   strp(Version),
			ProtocolVersion: &c.protocolVersion,
			MaxMessageSize:  &mms,
			FeatureFlags:    &pb.FeatureFlags{SupportsPartialProducer: boolp(true)},
		},
	})
	c.log = c.log.With("client", c.clientVersion)
	return nil
}

// handle dispatches one command. Commands that may block on the metadata
// store or the bookies run in their own goroutine (clients wait for their
// replies before depending on them); the rest run in order here.
func (c *conn) handle(f wire.Frame, derr error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.b.panics.Add(1)
			c.log.Error("panic handling command", "type", f.Cmd.GetType(), "panic", r)
			err = fmt.Errorf("broker: panic handling %v: %v", f.Cmd.GetType(), r)
		}
	}()
	cmd := f.Cmd
	switch cmd.GetType() {
	case pb.BaseCommand_PING:
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}})
	case pb.BaseCommand_PONG:
	case pb.BaseCommand_SEND:
		c.handleSend(cmd.Send, f, derr)
	case pb.BaseCommand_ACK:
		c.handleAck(cmd.Ack)
	case pb.BaseCommand_FLOW:
		if k := c.consumer(cmd.Flow.GetConsumerId()); k != nil {
			k.sub.flow(k, int64(cmd.Flow.GetMessagePermits()))
		}
	case pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		r := cmd.RedeliverUnacknowledgedMessages
		if k := c.consumer(r.GetConsumerId()); k != nil {
			k.sub.redeliver(k, msgIDsToPositions(r.GetMessageIds()))
		}
	case pb.BaseCommand_PARTITIONED_METADATA:
		c.asyncLookup(cmd.PartitionMetadata.GetRequestId(), func() { c.handlePartitionedMetadata(cmd.PartitionMetadata) })
	case pb.BaseCommand_LOOKUP:
		c.asyncLookup(cmd.LookupTopic.GetRequestId(), func() { c.handleLookup(cmd.LookupTopic) })
	case pb.BaseCommand_PRODUCER:
		c.async(cmd.Producer.GetRequestId(), func() { c.handleProducer(cmd.Producer) })
	case pb.BaseCommand_CLOSE_PRODUCER:
		c.handleCloseProducer(cmd.CloseProducer)
	case pb.BaseCommand_SUBSCRIBE:
		c.async(cmd.Subscribe.GetRequestId(), func() { c.handleSubscribe(cmd.Subscribe) })
	case pb.BaseCommand_CLOSE_CONSUMER:
		c.handleCloseConsumer(cmd.CloseConsumer)
	case pb.BaseCommand_UNSUBSCRIBE:
		c.async(cmd.Unsubscribe.GetRequestId(), func() { c.handleUnsubscribe(cmd.Unsubscribe) })
	case pb.BaseCommand_SEEK:
		c.async(cmd.Seek.GetRequestId(), func() { c.handleSeek(cmd.Seek) })
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		c.async(cmd.GetLastMessageId.GetRequestId(), func() { c.handleGetLastMessageID(cmd.GetLastMessageId) })
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		c.async(cmd.GetTopicsOfNamespace.GetRequestId(), func() { c.handleGetTopics(cmd.GetTopicsOfNamespace) })
	case pb.BaseCommand_CONSUMER_STATS:
		c.handleConsumerStats(cmd.ConsumerStats)
	case pb.BaseCommand_GET_SCHEMA:
		c.async(cmd.GetSchema.GetRequestId(), func() { c.handleGetSchema(cmd.GetSchema) })
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		c.async(cmd.GetOrCreateSchema.GetRequestId(), func() { c.handleGetOrCreateSchema(cmd.GetOrCreateSchema) })
	case pb.BaseCommand_AUTH_RESPONSE:
		return c.handleAuthResponse(cmd.AuthResponse)
	case pb.BaseCommand_CONNECT:
		c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: CONNECT on a connected connection", errkind.ErrNotAllowed)))
	default:
		if c.handleTxn(cmd) { // transactions.go
			return nil
		}
		c.sendCmd(wire.NewErrorCommand(0, fmt.Errorf("%w: command %v is not supported by this broker", errkind.ErrNotAllowed, cmd.GetType())))
	}
	return nil
}

// async runs fn, the handler of request reqID, in a goroutine the
// connection waits for on close. A connection with MaxPendingRequests
// handlers running gets TooManyRequests (retriable) for more: the broker
// sheds load rather than queueing it without bound.
func (c *conn) async(reqID uint64, fn func()) {
	if c.pending.Add(1) > int64(c.b.cfg.Limits.MaxPendingRequests) {
		c.pending.Add(-1)
		c.sendError(reqID, fmt.Errorf("%w: %d requests in progress on this connection", errkind.ErrTooManyRequests, c.b.cfg.Limits.MaxPendingRequests))
		return
	}
	c.slow.Add(1)
	go func() {
		defer c.slow.Done()
		defer c.pending.Add(-1)
		defer func() {
			if r := recover(); r != nil {
				c.b.panics.Add(1)
				c.log.Error("panic in command handler", "panic", r)
				c.close()
			}
		}()
		fn()
	}()
}

// asyncLookup is async for lookups and partitioned-metadata requests,
// which are also bounded broker-wide by MaxConcurrentLookups.
func (c *conn) asyncLookup(reqID uint64, fn func()) {
	if c.b.lookups.Add(1) > int64(c.b.cfg.Limits.MaxConcurrentLookups) {
		c.b.lookups.Add(-1)
		c.sendError(reqID, fmt.Errorf("%w: %d lookups in progress", errkind.ErrTooManyRequests, c.b.cfg.Limits.MaxConcurrentLookups))
		return
	}
	c.async(reqID, func() {
		defer c.b.lookups.Add(-1)
		fn()
	})
}

func (c *conn) consumer(id uint64) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumers[id]
}

func (c *conn) producer(id uint64) *producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producers[id]
}

// wireReason is the text of a framing error of package wire for the
// client, without the package's prefix ("frame too large: totalSize
// 1234 > 1024").
func wireReason(err error) string {
	return strings.TrimPrefix(err.Error(), "wire: ")
}

// serverError returns err as the broker answers it: as is when it is of a
// kind of errkind's table (every sentinel a client can meet is), else
// as a storage failure (PersistenceError, which the client retries): an
// error of no kind comes from the bookies or the metadata store.
func serverError(err error) error {
	if errkind.HasKind(err) {
		return err
	}
	return fmt.Errorf("%w: %w", errkind.ErrPersistence, err)
}

func (c *conn) sendError(reqID uint64, err error) {
	c.sendCmd(wire.NewErrorCommand(reqID, serverError(err)))
}

// failer returns the function that answers request id, of type
// requestType, that failed with err (wire.NewFailure of serverError(err)).
func (c *conn) failer(requestType pb.BaseCommand_Type, id uint64) func(err error) {
	return func(err error) { c.sendCmd(wire.NewFailure(requestType, id, serverError(err))) }
}

func (c *conn) sendSuccess(reqID uint64) {
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_SUCCESS.Enum(), Success: &pb.CommandSuccess{RequestId: &reqID}})
}

// opCtx is the context of a slow command: the connection's, bounded.
func (c *conn) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, 30*time.Second)
}

func (c *conn) handlePartitionedMetadata(cmd *pb.CommandPartitionedTopicMetadata) {
	id := cmd.GetRequestId()
	fail := c.failer(pb.BaseCommand_PARTITIONED_METADATA, id)
	name, err := topic.Parse(cmd.GetTopic())
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if err := c.authorizeLookup(ctx, name); err != nil {
		fail(err)
		return
	}
	if isTCAssign(name) {
		un := c.b.tcPartitions() // transactions.go
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(), PartitionMetadataResponse: &pb.CommandPartitionedTopicMetadataResponse{
			RequestId: &id, Partitions: &un, Response: pb.CommandPartitionedTopicMetadataResponse_Success.Enum(),
		}})
		return
	}
	n, err := c.b.partitions(ctx, name, true)
	if err != nil {
		fail(err)
		return
	}
	un := uint32(n)
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(), PartitionMetadataResponse: &pb.CommandPartitionedTopicMetadataResponse{
		RequestId: &id, Partitions: &un, Response: pb.CommandPartitionedTopicMetadataResponse_Success.Enum(),
	}})
}

func (c *conn) handleLookup(cmd *pb.CommandLookupTopic) {
	id := cmd.GetRequestId()
	fail := c.failer(pb.BaseCommand_LOOKUP, id)
	name, err := topic.Parse(cmd.GetTopic())
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if err := c.authorizeLookup(ctx, name); err != nil {
		fail(err)
		return
	}
	if _, ok := tcAssignPartition(name); ok {
		// A transaction coordinator: placed as a topic, never redirected
		// to another region (transactions.go).
		c.lookupPlaced(ctx, id, name, cmd.GetAuthoritative())
		return
	}
	pol, err := c.b.deps.Namespaces.Policy(ctx, name.NamespaceName())
	if err != nil {
		fail(err)
		return
	}
	pol = pol.ForTopic(name)
	if url, ok := c.b.redirectToPrimary(pol, c.mayReplicate()); ok && c.b.awaitPrimaryBack(ctx, name, pol, url) {
		// A failover happened meanwhile (or the primary came back): decide
		// on the policy as it is now.
		if pol, err = c.b.deps.Namespaces.Policy(ctx, name.NamespaceName()); err != nil {
			fail(err)
			return
		}
		pol = pol.ForTopic(name)
	}
	if url, ok := c.b.redirectToPrimary(pol, c.mayReplicate()); ok {
		if url == "" {
			fail(fmt.Errorf("%w: topic %s is active-standby and its primary region %s has no broker service URL", errkind.ErrServiceNotReady, name, pol.Failover.Primary))
			return
		}
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
			RequestId: &id, Response: pb.CommandLookupTopicResponse_Redirect.Enum(), BrokerServiceUrl: strp(url),
			BrokerServiceUrlTls: optStr(pol.PrimaryServiceURLTLS), Authoritative: boolp(false), ProxyThroughServiceUrl: boolp(false),
		}})
		return
	}
	if err := c.b.lapsedPrimary(pol, name, c.mayReplicate()); err != nil {
		c.b.countRefused("lookup")
		fail(err)
		return
	}
	c.lookupPlaced(ctx, id, name, cmd.GetAuthoritative())
}

// lookupPlaced answers a lookup with the broker the placement names.
func (c *conn) lookupPlaced(ctx context.Context, id uint64, name topic.Name, authoritative bool) {
	r, err := c.b.deps.Placement.Lookup(ctx, name, authoritative)
	if err != nil {
		c.failer(pb.BaseCommand_LOOKUP, id)(err)
		return
	}
	resp := pb.CommandLookupTopicResponse_Connect
	if !r.Self {
		resp = pb.CommandLookupTopicResponse_Redirect
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
		RequestId: &id, Response: resp.Enum(), BrokerServiceUrl: strp(r.ServiceURL), BrokerServiceUrlTls: optStr(r.ServiceURLTLS),
		Authoritative: boolp(r.Authoritative), ProxyThroughServiceUrl: boolp(false),
	}})
}

func (c *conn) handleProducer(cmd *pb.CommandProducer) {
	reqID, pid := cmd.GetRequestId(), cmd.GetProducerId()
	name, err := topic.Parse(cmd.GetTopic())
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	pname := cmd.GetProducerName()
	if err := c.authorizeProducer(ctx, name, pname, cmd.GetInitialSubscriptionName()); err != nil {
		// Before the topic is loaded: a refused producer creates nothing.
		c.sendError(reqID, err)
		return
	}
	mode := autoCreate
	if strings.HasPrefix(pname, replication.Prefix) {
		mode = replicaCreate // (authorizeProducer let only a replicator through)
	}
	t, err := c.b.getTopic(ctx, name, mode)
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if pname == "" {
		pname = fmt.Sprintf("%s-%d", c.b.cfg.Cluster, c.b.nextProducer.Add(1))
	}
	p := &producer{
		c: c, id: pid, name: pname, t: t, access: cmd.GetProducerAccessMode(),
		metadata: kvMap(cmd.GetMetadata()), since: c.b.deps.Now(),
	}
	if strings.HasPrefix(pname, replication.Prefix) {
		src, ok := replication.ProducerSource(pname)
		switch {
		case !ok:
			err = fmt.Errorf("%w: replicator producer name %q must be %s<source cluster>[.<worker>]", ErrInvalidArgument, pname, replication.Prefix)
		case src == c.b.cfg.Cluster:
			err = fmt.Errorf("%w: replicator producer %q names this cluster as its source", ErrInvalidArgument, pname)
		case t.ml == nil:
			err = fmt.Errorf("%w: non-persistent topic %s is not replicated", ErrInvalidArgument, name)
		default:
			err = t.dedupState().ensureLoaded(ctx)
		}
		if err != nil {
			c.sendError(reqID, err)
			return
		}
		p.replFrom = src
	} else if err := c.b.waitPrimary(ctx, name); err != nil {
		c.b.countRefused("producer")
		c.sendError(reqID, err)
		return
	}
	if err := checkProducerEncryption(t, cmd, p.replFrom != ""); err != nil {
		c.sendError(reqID, err)
		return
	}
	if p.replFrom == "" {
		// Replicator producers copy entries whose schema versions the
		// global registry already holds.
		if p.schemaV, err = c.b.useSchema(ctx, name, cmd.GetSchema()); err != nil {
			c.sendError(reqID, err)
			return
		}
	}
	c.mu.Lock()
	if old, dup := c.producers[pid]; dup {
		c.mu.Unlock()
		c.duplicateProducer(reqID, pid, old, name, cmd.GetProducerName())
		return
	}
	c.producers[pid] = p
	c.mu.Unlock()
	if sub := cmd.GetInitialSubscriptionName(); sub != "" && t.ml != nil {
		// Created with the producer so nothing it sends is missed (the
		// client's dead-letter producer asks for this).
		err := ValidSubscriptionName(sub)
		if err == nil && strings.HasPrefix(sub, ReservedPrefix) {
			err = fmt.Errorf("%w: subscription names starting with %q are reserved", ErrInvalidArgument, ReservedPrefix)
		}
		if err != nil {
			c.mu.Lock()
			delete(c.producers, pid)
			c.mu.Unlock()
			c.sendError(reqID, err)
			return
		}
		if _, err := t.ml.OpenCursor(ctx, sub, mledger.Latest); err != nil {
			c.mu.Lock()
			delete(c.producers, pid)
			c.mu.Unlock()
			c.sendError(reqID, err)
			return
		}
	}
	p.reqID = reqID
	lastSeq, err := t.addProducer(p)
	if errors.Is(err, errMustWait) {
		// Not ready yet: the client keeps waiting for a second
		// PRODUCER_SUCCESS, sent by producerReady.
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
			RequestId: &reqID, ProducerName: &pname, LastSequenceId: proto64(-1), ProducerReady: boolp(false), SchemaVersion: p.schemaV,
		}})
		return
	}
	if err != nil {
		c.mu.Lock()
		delete(c.producers, pid)
		c.mu.Unlock()
		c.sendError(reqID, err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
		RequestId: &reqID, ProducerName: &pname, LastSequenceId: &lastSeq, ProducerReady: boolp(true), SchemaVersion: p.schemaV,
	}})
}

// duplicateProducer answers a PRODUCER whose id is already in use on the
// connection, as Pulsar does: a client that gave up waiting for the
// first answer asks again with the same id. The same producer, attached
// to its topic: success again (its name and schema version); the same
// producer still being created: retriable ServiceNotReady; anything
// else: ProducerBusy.
func (c *conn) duplicateProducer(reqID, pid uint64, old *producer, name topic.Name, pname string) {
	same := old.t.name == name && (pname == "" || pname == old.name)
	switch {
	case same && old.t.hasProducer(old):
		oname := old.name
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
			RequestId: &reqID, ProducerName: &oname, LastSequenceId: proto64(-1), ProducerReady: boolp(true), SchemaVersion: old.schemaV,
		}})
	case same:
		c.sendError(reqID, fmt.Errorf("%w: producer id %d is already present on the connection and not ready yet", errkind.ErrServiceNotReady, pid))
	default:
		c.sendError(reqID, fmt.Errorf("%w: producer id %d is already in use on this connection", errkind.ErrProducerBusy, pid))
	}
}

// producerReady tells a WaitForExclusive producer it now has the topic.
func (c *conn) producerReady(p *producer, lastSeq int64) {
	reqID, name := p.reqID, p.name
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: &pb.CommandProducerSuccess{
		RequestId: &reqID, ProducerName: &name, LastSequenceId: &lastSeq, ProducerReady: boolp(true), SchemaVersion: p.schemaV,
	}})
}

func proto64(v int64) *int64 { return &v }

func (c *conn) handleCloseProducer(cmd *pb.CommandCloseProducer) {
	if p := c.producer(cmd.GetProducerId()); p != nil {
		c.closeProducer(p, false)
	}
	c.sendSuccess(cmd.GetRequestId())
}

// closeProducer forgets p and, when notify, tells the client to
// reconnect it (CLOSE_PRODUCER).
func (c *conn) closeProducer(p *producer, notify bool) {
	c.mu.Lock()
	if c.producers[p.id] == p {
		delete(c.producers, p.id)
	}
	c.mu.Unlock()
	p.t.removeProducer(p)
	if notify {
		id := p.id
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{ProducerId: &id, RequestId: u64p(0)}})
	}
}

func (c *conn) handleSend(cmd *pb.CommandSend, f wire.Frame, derr error) {
	pid, seq := cmd.GetProducerId(), cmd.GetSequenceId()
	p := c.producer(pid)
	if p == nil {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, fmt.Errorf("%w: no producer %d on this connection", errkind.ErrNotAllowed, pid)))
		return
	}
	if derr != nil {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, derr))
		return
	}
	if f.Entry == nil {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, fmt.Errorf("%w: SEND without a message", errkind.ErrNotAllowed)))
		return
	}
	if n := len(f.Payload); n > c.b.cfg.MaxMessageSize {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, fmt.Errorf("%w: message of %d bytes exceeds the maximum message size %d", errkind.ErrNotAllowed, n, c.b.cfg.MaxMessageSize)))
		return
	}
	// A replicated message was accepted in its region: the topic's limit
	// is not applied to it again.
	if max := p.t.maxMessageSize.Load(); max > 0 && p.replFrom == "" && int64(len(f.Payload)) > max {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, fmt.Errorf("%w: message of %d bytes exceeds the maximum message size %d of topic %s (maxMessageSize)", errkind.ErrNotAllowed, len(f.Payload), max, p.t.name)))
		return
	}
	if err := p.checkEncrypted(f.Metadata); err != nil {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, err))
		return
	}
	nm := int(cmd.GetNumMessages())
	if nm <= 0 {
		nm = 1
	}
	highest := cmd.GetHighestSequenceId()
	if err := c.b.checkSend(p.t, seq, highest, f.Metadata); err != nil {
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, err))
		return
	}
	if p.replFrom != "" && isSubState(f.Metadata) {
		// Another region's subscription state: applied, not stored.
		ctx, cancel := c.opCtx()
		err := p.t.receiveSubState(ctx, p.replFrom, f.Metadata, f.Payload)
		cancel()
		if err != nil {
			c.sendCmd(wire.NewSendErrorCommand(pid, seq, serverError(err)))
			return
		}
		ctl := uint64(math.MaxUint64)
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
			ProducerId: &pid, SequenceId: &seq, MessageId: &pb.MessageIdData{LedgerId: &ctl, EntryId: &ctl}, HighestSequenceId: &highest,
		}})
		return
	}
	src, srcPos, replicated, rerr := sourcePosition(f.Metadata)
	switch {
	case p.replFrom == "" && f.Metadata.GetReplicatedFrom() != "":
		rerr = fmt.Errorf("%w: only replicator producers (%s<source>) may send replicated messages", errkind.ErrNotAllowed, replication.Prefix)
	case p.replFrom != "" && rerr == nil && !replicated:
		rerr = fmt.Errorf("%w: replicator producer %s sent an entry without replicated_from", errkind.ErrNotAllowed, p.name)
	case p.replFrom != "" && src != p.replFrom:
		rerr = fmt.Errorf("%w: replicator producer %s sent an entry replicated from %q", errkind.ErrNotAllowed, p.name, src)
	}
	if rerr != nil {
		if !errors.Is(rerr, errkind.ErrNotAllowed) {
			rerr = fmt.Errorf("%w: %w", errkind.ErrNotAllowed, rerr)
		}
		c.sendCmd(wire.NewSendErrorCommand(pid, seq, rerr))
		return
	}
	if !replicated {
		if err := c.b.holdPrimary(p.t.name); err != nil {
			c.b.countRefused("publish")
			// As for a retriable store failure: the client reconnects the
			// producer (to the primary, through a new lookup) and resends.
			c.closeProducer(p, true)
			return
		}
	}
	entry := f.Entry
	var txnStored func(mledger.Position)
	if tid, ok := sendTxn(cmd); ok && !replicated {
		// A transactional message: stored with its transaction id in its
		// metadata, held from dispatch until the transaction ends
		// (transactions.go).
		var err error
		if !c.b.cfg.Transactions.Enabled {
			err = errTxnOff
		} else if p.t.ml == nil {
			err = fmt.Errorf("%w: transactions need persistent topics", errkind.ErrNotAllowed)
		} else if entry, err = withTxnID(entry, tid); err == nil {
			ctx, cancel := c.opCtx()
			txnStored, err = p.t.beginTxnSend(ctx, tid)
			cancel()
		}
		if err != nil {
			c.sendCmd(wire.NewSendErrorCommand(pid, seq, serverError(err)))
			return
		}
	}
	p.msgIn.Add(int64(nm))
	p.bytesIn.Add(int64(len(f.Payload)))
	partition := int32(p.t.name.Partition())
	// Chunks of one message share its sequence id: only the last one takes
	// part in de-duplication, as in Pulsar.
	dedup := !cmd.GetIsChunk() || f.Metadata.GetChunkId() >= f.Metadata.GetNumChunksFromMsg()-1
	publish := func(done func(mledger.Position, bool, error)) {
		p.t.publish(c.ctx, p, seq, highest, nm, dedup, entry, done)
	}
	if replicated {
		publish = func(done func(mledger.Position, bool, error)) {
			p.t.publishReplicated(c.ctx, p, src, srcPos, originSeq{f.Metadata.GetProducerName(), int64(max(f.Metadata.GetSequenceId(), f.Metadata.GetHighestSequenceId())), int64(f.Metadata.GetSequenceId())}, nm, f.Entry, done)
		}
	}
	arrived := c.b.deps.Now()
	endSpan := c.b.tracePublish(p.t, f.Metadata, src)
	defer c.throttlePublish(p, nm, len(f.Payload))
	publish(func(pos mledger.Position, stored bool, err error) {
		endSpan(err)
		if err == nil && stored && txnStored != nil {
			txnStored(pos)
		}
		if err == nil {
			c.b.recordIn(p.t, int64(nm), int64(len(f.Payload)), arrived, src)
			if stored {
				p.t.lastPublish.Store(c.b.deps.Now().UnixMilli())
			}
		}
		if err != nil {
			// The producer is closed (CLOSE_PRODUCER): the client
			// reconnects it and resends its pending messages, this one
			// first, so later sends of this producer never land before
			// it. A retriable failure gets nothing else: a SEND_ERROR as
			// well makes the Go client drop the whole connection while the
			// CLOSE_PRODUCER reconnects the producer, and the two
			// reconnections race (the second meets the first's producer:
			// ProducerBusy, for good). A failure a resend cannot cure is
			// answered with SEND_ERROR.
			// A terminated topic is told on the reconnection: a
			// SEND_ERROR would make the Go client forget the producer,
			// and the CLOSE_PRODUCER with it.
			if err = serverError(err); !wire.ErrorFor(wire.CodeOf(err)).Retriable && errkind.KindOf(err) != errkind.ErrTopicTerminated {
				c.sendCmd(wire.NewSendErrorCommand(pid, seq, err))
			}
			c.closeProducer(p, true)
			return
		}
		id := &pb.MessageIdData{LedgerId: u64p(uint64(pos.Ledger)), EntryId: u64p(uint64(pos.Entry)), Partition: &partition}
		if !stored {
			id = &pb.MessageIdData{LedgerId: u64p(^uint64(0)), EntryId: u64p(^uint64(0)), Partition: &partition}
		}
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
			ProducerId: &pid, SequenceId: &seq, MessageId: id, HighestSequenceId: &highest,
		}})
	})
}

func (c *conn) handleSubscribe(cmd *pb.CommandSubscribe) {
	reqID, cid := cmd.GetRequestId(), cmd.GetConsumerId()
	name, err := topic.Parse(cmd.GetTopic())
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if err := ValidSubscriptionName(cmd.GetSubscription()); err != nil {
		c.sendError(reqID, err)
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if !c.mayReplicate() {
		if err := c.b.authz.Consume(ctx, c.role(), name, cmd.GetSubscription()); err != nil {
			c.sendError(reqID, err)
			return
		}
	}
	mode := autoCreate
	if cmd.ForceTopicCreation != nil && !cmd.GetForceTopicCreation() {
		mode = mustExist
	}
	t, err := c.b.getTopic(ctx, name, mode)
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if !strings.HasPrefix(cmd.GetSubscription(), replication.Prefix) {
		if err := c.b.waitPrimary(ctx, name); err != nil {
			c.b.countRefused("subscribe")
			c.sendError(reqID, err)
			return
		}
	}
	if err := c.b.checkConsumerSchema(ctx, name, cmd.GetSchema()); err != nil {
		c.sendError(reqID, err)
		return
	}
	if err := c.checkSubscribeRate(t, cmd); err != nil {
		c.sendError(reqID, err)
		return
	}
	k := &consumer{
		c: c, id: cid, name: cmd.GetConsumerName(), priority: cmd.GetPriorityLevel(),
		metadata: kvMap(cmd.GetMetadata()), since: c.b.deps.Now(),
	}
	if km := cmd.GetKeySharedMeta(); km != nil && km.GetKeySharedMode() == pb.KeySharedMode_STICKY {
		for _, r := range km.GetHashRanges() {
			k.ranges = append(k.ranges, [2]int32{r.GetStart(), r.GetEnd()})
		}
	}
	c.mu.Lock()
	if old, dup := c.consumers[cid]; dup {
		c.mu.Unlock()
		c.duplicateConsumer(reqID, cid, old, name, cmd.GetSubscription())
		return
	}
	c.consumers[cid] = k
	c.mu.Unlock()
	err = t.subscribe(ctx, cmd, k)
	if err != nil {
		c.mu.Lock()
		delete(c.consumers, cid)
		c.mu.Unlock()
		c.sendError(reqID, err)
		return
	}
	k.attached.Store(true)
	c.sendSuccess(reqID)
	k.sub.consumerReady(k)
}

// duplicateConsumer answers a SUBSCRIBE whose consumer id is taken on this
// connection, as Pulsar does: the same consumer already attached (a client
// that resubscribes on the connection it has, pulsar-client-go's
// reconnect): Success; the same one still being attached: retriable
// ServiceNotReady; anything else: ConsumerBusy.
func (c *conn) duplicateConsumer(reqID, cid uint64, old *consumer, name topic.Name, sub string) {
	same := old.attached.Load() && old.sub.t.name == name && old.sub.name == sub
	switch {
	case same:
		c.sendSuccess(reqID)
	case !old.attached.Load():
		c.sendError(reqID, fmt.Errorf("%w: consumer id %d is already present on the connection and not ready yet", errkind.ErrServiceNotReady, cid))
	default:
		c.sendError(reqID, fmt.Errorf("%w: consumer id %d is already in use on this connection", ErrBusy, cid))
	}
}

func (c *conn) handleCloseConsumer(cmd *pb.CommandCloseConsumer) {
	if k := c.consumer(cmd.GetConsumerId()); k != nil {
		c.closeConsumer(k, false)
		k.sub.removeConsumer(k)
	}
	c.sendSuccess(cmd.GetRequestId())
}

// closeConsumer forgets k and, when notify, tells the client to
// resubscribe (CLOSE_CONSUMER).
func (c *conn) closeConsumer(k *consumer, notify bool) {
	c.mu.Lock()
	if c.consumers[k.id] == k {
		delete(c.consumers, k.id)
	}
	c.mu.Unlock()
	if notify {
		id := k.id
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: &id, RequestId: u64p(0)}})
	}
}

func (c *conn) handleUnsubscribe(cmd *pb.CommandUnsubscribe) {
	reqID := cmd.GetRequestId()
	k := c.consumer(cmd.GetConsumerId())
	if k == nil {
		c.sendError(reqID, fmt.Errorf("%w: no consumer %d on this connection", errkind.ErrConsumerNotFound, cmd.GetConsumerId()))
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if err := k.sub.unsubscribe(ctx, k, cmd.GetForce()); err != nil {
		c.sendError(reqID, err)
		return
	}
	c.mu.Lock()
	delete(c.consumers, k.id)
	c.mu.Unlock()
	c.sendSuccess(reqID)
}

func (c *conn) handleSeek(cmd *pb.CommandSeek) {
	reqID := cmd.GetRequestId()
	k := c.consumer(cmd.GetConsumerId())
	if k == nil {
		c.sendError(reqID, fmt.Errorf("%w: no consumer %d on this connection", errkind.ErrConsumerNotFound, cmd.GetConsumerId()))
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	var err error
	switch {
	case cmd.MessageId != nil:
		id := cmd.MessageId
		err = k.sub.seek(ctx, msgIDToPosition(id))
	case cmd.MessagePublishTime != nil:
		err = k.sub.seekTime(ctx, clientTime(cmd.GetMessagePublishTime()))
	default:
		err = fmt.Errorf("%w: SEEK without a message id or publish time", ErrInvalidArgument)
	}
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	// CLOSE_CONSUMER first: the client clears its queue at SUCCESS, so
	// nothing from before the seek may arrive after it.
	k.sub.disconnectAll()
	c.sendSuccess(reqID)
}

func (c *conn) handleGetLastMessageID(cmd *pb.CommandGetLastMessageId) {
	reqID := cmd.GetRequestId()
	k := c.consumer(cmd.GetConsumerId())
	if k == nil {
		c.sendError(reqID, fmt.Errorf("%w: no consumer %d on this connection", errkind.ErrConsumerNotFound, cmd.GetConsumerId()))
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	last, batchIdx, err := k.sub.t.lastMessageID(ctx)
	if err == nil && k.compacted {
		last, batchIdx, err = k.sub.t.lastCompactedMessageID(ctx, last, batchIdx)
	}
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	part := int32(k.sub.t.name.Partition())
	resp := &pb.CommandGetLastMessageIdResponse{
		RequestId:     &reqID,
		LastMessageId: &pb.MessageIdData{LedgerId: u64p(uint64(last.Ledger)), EntryId: u64p(uint64(last.Entry)), Partition: &part, BatchIndex: &batchIdx},
	}
	if md, ok := k.sub.markDelete(); ok {
		resp.ConsumerMarkDeletePosition = &pb.MessageIdData{LedgerId: u64p(uint64(md.Ledger)), EntryId: u64p(uint64(md.Entry)), Partition: &part}
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE.Enum(), GetLastMessageIdResponse: resp})
}

func (c *conn) handleConsumerStats(cmd *pb.CommandConsumerStats) {
	reqID := cmd.GetRequestId()
	k := c.consumer(cmd.GetConsumerId())
	if k == nil {
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS_RESPONSE.Enum(), ConsumerStatsResponse: &pb.CommandConsumerStatsResponse{
			RequestId: &reqID, ErrorCode: pb.ServerError_ConsumerNotFound.Enum(), ErrorMessage: strp("no such consumer"),
		}})
		return
	}
	st := k.stats()
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS_RESPONSE.Enum(), ConsumerStatsResponse: &pb.CommandConsumerStatsResponse{
		RequestId: &reqID, ConsumerName: &k.name, AvailablePermits: u64p(uint64(max(0, st.permits))),
		UnackedMessages: u64p(uint64(st.unacked)), MsgBacklog: u64p(uint64(max(0, k.sub.backlog()))),
		Type: strp(k.sub.subType().String()), ConnectedSince: strp(k.since.UTC().Format(time.RFC3339)),
		Address: strp(c.nc.RemoteAddr().String()),
	}})
}

func (c *conn) handleAck(cmd *pb.CommandAck) {
	k := c.consumer(cmd.GetConsumerId())
	respond := func(err error) {
		if cmd.RequestId == nil {
			return
		}
		r := &pb.CommandAckResponse{ConsumerId: u64p(cmd.GetConsumerId()), RequestId: cmd.RequestId}
		if err != nil {
			err = serverError(err)
			r.Error, r.Message = wire.CodeOf(err).Enum(), strp(errkind.MessageOf(err))
		}
		c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: r})
	}
	if k == nil {
		respond(fmt.Errorf("%w: no consumer %d on this connection", errkind.ErrConsumerNotFound, cmd.GetConsumerId()))
		return
	}
	if cmd.TxnidMostBits != nil || cmd.TxnidLeastBits != nil {
		// Held until the transaction ends (pendingack.go).
		var ps []mledger.Position
		for _, id := range cmd.GetMessageId() {
			if partialAck(id) {
				respond(fmt.Errorf("%w: batch index acknowledgements in a transaction are not supported yet", errkind.ErrNotAllowed))
				return
			}
			ps = append(ps, msgIDToPosition(id))
		}
		// Answered once its record is stored (or refused).
		k.sub.txnAck(k, txnID(cmd.GetTxnidMostBits(), cmd.GetTxnidLeastBits()), ps, cmd.GetAckType() == pb.CommandAck_Cumulative, respond)
		return
	}
	if !strings.HasPrefix(k.sub.name, replication.Prefix) {
		if err := c.b.holdPrimary(k.sub.t.name); err != nil {
			c.b.countRefused("ack")
			// Not stored here: the consumer reconnects to the primary,
			// which redelivers what this ack meant.
			respond(err)
			c.closeConsumer(k, true)
			k.sub.removeConsumer(k)
			return
		}
	}
	var ps []mledger.Position
	var errs []error
	for _, id := range cmd.GetMessageId() {
		if partialAck(id) {
			// Some messages of a batch (a cumulative one counts for its
			// own entry only: the entries before it stay as they are).
			errs = append(errs, k.sub.ackBatch(k, msgIDToPosition(id), id.GetAckSet()))
			continue
		}
		ps = append(ps, msgIDToPosition(id))
	}
	errs = append(errs, k.sub.ack(k, ps, cmd.GetAckType() == pb.CommandAck_Cumulative))
	respond(errors.Join(errs...))
}

// partialAck reports an acknowledgement of some messages of a batch (bits
// still set in ack_set mean messages not yet acknowledged).
func partialAck(id *pb.MessageIdData) bool {
	for _, w := range id.GetAckSet() {
		if w != 0 {
			return true
		}
	}
	return false
}

func (c *conn) handleGetTopics(cmd *pb.CommandGetTopicsOfNamespace) {
	reqID := cmd.GetRequestId()
	if _, _, err := topic.ParseNamespace(cmd.GetNamespace()); err != nil {
		c.sendError(reqID, err) // InvalidTopicName, not the policy store's PreconditionFailed
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if tenant, ns, _ := topic.ParseNamespace(cmd.GetNamespace()); !c.mayReplicate() {
		if err := c.b.authz.ListTopics(ctx, c.role(), tenant, ns); err != nil {
			c.sendError(reqID, err)
			return
		}
	}
	topics, err := c.b.TopicsOfNamespace(ctx, cmd.GetNamespace(), cmd.GetMode())
	if errors.Is(err, ErrNamespace) {
		topics, err = nil, nil // as Pulsar: an unknown namespace has no topics
	}
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	resp := &pb.CommandGetTopicsOfNamespaceResponse{RequestId: &reqID}
	if pat := cmd.GetTopicsPattern(); pat != "" {
		if filtered, err := filterTopics(topics, pat); err == nil {
			topics = filtered
			resp.Filtered = boolp(true)
		}
	}
	hash := topicsHash(topics)
	resp.TopicsHash = &hash
	if cmd.TopicsHash != nil && cmd.GetTopicsHash() == hash {
		resp.Changed = boolp(false)
	} else {
		resp.Topics = topics
		resp.Changed = boolp(true)
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE.Enum(), GetTopicsOfNamespaceResponse: resp})
}

// handleGetSchema serves a topic's schema, the latest or the version
// asked for, to a role that may look the topic up.
func (c *conn) handleGetSchema(cmd *pb.CommandGetSchema) {
	id := cmd.GetRequestId()
	fail := c.failer(pb.BaseCommand_GET_SCHEMA, id)
	name, err := topic.Parse(cmd.GetTopic())
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if err := c.authorizeLookup(ctx, name); err != nil {
		fail(err)
		return
	}
	reg := c.b.deps.Schemas
	if reg == nil {
		fail(fmt.Errorf("%w: no schema stored for the topic (this broker has no schema registry)", errkind.ErrTopicNotFound))
		return
	}
	var v schema.Version
	if b := cmd.GetSchemaVersion(); len(b) == 0 {
		v, err = reg.Latest(ctx, name)
	} else if len(b) != 8 {
		err = fmt.Errorf("%w: a schema version is 8 bytes, not %d", ErrInvalidArgument, len(b))
	} else {
		v, err = reg.Get(ctx, name, int64(binary.BigEndian.Uint64(b)))
	}
	if errors.Is(err, schema.ErrNotFound) {
		err = fmt.Errorf("%w: %w", errkind.ErrTopicNotFound, err) // what Pulsar answers
	}
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: &pb.CommandGetSchemaResponse{
		RequestId: &id, Schema: schemaPB(name, v), SchemaVersion: schemaVersionBytes(v.Version),
	}})
}

// handleGetOrCreateSchema returns the version of a producer's schema,
// adding it if the namespace's strategy allows, for a role that may
// produce to the topic.
func (c *conn) handleGetOrCreateSchema(cmd *pb.CommandGetOrCreateSchema) {
	id := cmd.GetRequestId()
	fail := c.failer(pb.BaseCommand_GET_OR_CREATE_SCHEMA, id)
	name, err := topic.Parse(cmd.GetTopic())
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.opCtx()
	defer cancel()
	if err := c.b.authz.Produce(ctx, c.role(), name); err != nil {
		fail(err)
		return
	}
	// Without a registry a schema is taken unchecked, as version 0; with
	// one, a message without a schema (BYTES) gets no version.
	v := make([]byte, 8)
	if c.b.deps.Schemas != nil {
		if v, err = c.b.useSchema(ctx, name, cmd.GetSchema()); err != nil {
			fail(err)
			return
		}
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE.Enum(), GetOrCreateSchemaResponse: &pb.CommandGetOrCreateSchemaResponse{
		RequestId: &id, SchemaVersion: v,
	}})
}

func msgIDToPosition(id *pb.MessageIdData) mledger.Position {
	return mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}
}

func msgIDsToPositions(ids []*pb.MessageIdData) []mledger.Position {
	out := make([]mledger.Position, 0, len(ids))
	for _, id := range ids {
		out = append(out, msgIDToPosition(id))
	}
	return out
}

func kvMap(kvs []*pb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

func strp(s string) *string { return &s }
func boolp(b bool) *bool    { return &b }
func u64p(v uint64) *uint64 { return &v }

// optStr is s as an optional protobuf field: absent when empty.
func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
