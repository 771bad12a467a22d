package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/broker/txncoord"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Transactions (docs/transactions.md): the coordinators this broker
// hosts, the commands of the protocol, and each topic's transaction
// buffer.

// TransactionsConfig turns transactions on (docs/transactions.md).
type TransactionsConfig struct {
	// Enabled serves Pulsar's transaction commands; off, they are
	// answered NotAllowed and clients with transactions enabled fail to
	// start (the coordinator assign topic has no partitions). Off by
	// default; on by default in isobar standalone and isobar dev.
	Enabled bool `yaml:"enabled"`
	// Coordinators is the number of transaction coordinators (TC
	// partitions) of the region; zero means 1. Every broker of a region
	// must have the same.
	Coordinators int `yaml:"coordinators"`
	// MaxTimeout is the longest a transaction may stay open (and the
	// timeout of one that asks for none); zero means 6h.
	MaxTimeout time.Duration `yaml:"maxTimeout"`
}

func (c TransactionsConfig) coordinators() int {
	if c.Coordinators <= 0 {
		return 1
	}
	return c.Coordinators
}

// TCAssignTopic is the partitioned topic whose partition N names the
// owner of transaction coordinator N (the name Pulsar's clients look up).
const TCAssignTopic = "persistent://pulsar/system/transaction_coordinator_assign"

// txnCursor is the cursor whose properties hold a topic's transaction
// buffer snapshot; a topic without it never had a transactional entry.
const txnCursor = ReservedPrefix + "txn"

// txnSnapshotProp is the snapshot's property.
const txnSnapshotProp = "buffer"

// tcLogName is the managed ledger of coordinator n.
func tcLogName(n uint64) string {
	return "pulsar/system/persistent/__transaction_log_" + strconv.FormatUint(n, 10)
}

// refuseTxnSystemTopic refuses to serve a coordinator's log, or the
// assign topic, as a topic: the log's only writer is its coordinator,
// and the assign topic is only a name to look up.
func refuseTxnSystemTopic(name topic.Name) error {
	if name.Tenant != "pulsar" || name.Namespace != "system" {
		return nil
	}
	if strings.HasPrefix(name.Local, "__transaction_log_") || name.Base().String() == TCAssignTopic {
		return fmt.Errorf("%w: %s is a transaction coordinator's, not a topic to serve", errkind.ErrNotAllowed, name)
	}
	return nil
}

// tcAssignPartition says whether name is partition n of the coordinator
// assign topic.
func tcAssignPartition(name topic.Name) (uint64, bool) {
	if name.Partition() < 0 || name.Base().String() != TCAssignTopic {
		return 0, false
	}
	return uint64(name.Partition()), true
}

// isTCAssign says whether name is the coordinator assign topic itself.
func isTCAssign(name topic.Name) bool { return name.String() == TCAssignTopic }

// txnCoordinators are the coordinators this broker runs.
type txnCoordinators struct {
	mu  sync.Mutex
	tcs map[uint64]*tcSlot
	// mk serialises making topics' transaction buffers (txnBuffer).
	mk sync.Mutex
}

type tcSlot struct {
	ready chan struct{}
	c     *txncoord.Coordinator
	err   error
}

var errTxnOff = fmt.Errorf("%w: transactions are not enabled on this broker (broker.transactions.enabled)", errkind.ErrNotAllowed)

// coordinator returns coordinator n, recovering it when this broker owns
// it and runs none (or a broken one).
func (b *Broker) coordinator(ctx context.Context, n uint64) (*txncoord.Coordinator, error) {
	if !b.cfg.Transactions.Enabled {
		return nil, errTxnOff
	}
	if n >= uint64(b.cfg.Transactions.coordinators()) {
		return nil, fmt.Errorf("%w: transaction coordinator %d does not exist (there are %d)", errkind.ErrTransactionCoordinatorNotFound, n, b.cfg.Transactions.coordinators())
	}
	assign, err := topic.Parse(TCAssignTopic + "-partition-" + strconv.FormatUint(n, 10))
	if err != nil {
		return nil, err
	}
	tx := &b.txns
	for {
		if !b.deps.Placement.Owns(assign) {
			b.dropCoordinator(n)
			return nil, fmt.Errorf("%w: transaction coordinator %d is not served by this broker", errkind.ErrTransactionCoordinatorNotFound, n)
		}
		b.mu.Lock()
		down := b.shutdown
		b.mu.Unlock()
		if down {
			return nil, ErrClosed
		}
		tx.mu.Lock()
		if tx.tcs == nil {
			tx.tcs = map[uint64]*tcSlot{}
		}
		s := tx.tcs[n]
		if s == nil {
			s = &tcSlot{ready: make(chan struct{})}
			tx.tcs[n] = s
			tx.mu.Unlock()
			s.c, s.err = b.startCoordinator(ctx, n)
			if s.err != nil {
				tx.mu.Lock()
				delete(tx.tcs, n)
				tx.mu.Unlock()
			}
			close(s.ready)
			if s.err != nil {
				return nil, fmt.Errorf("%w: transaction coordinator %d: %w", errkind.ErrTransactionCoordinatorNotFound, n, s.err)
			}
			return s.c, nil
		}
		tx.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.err != nil {
			return nil, fmt.Errorf("%w: transaction coordinator %d: %w", errkind.ErrTransactionCoordinatorNotFound, n, s.err)
		}
		if !s.c.Broken() {
			return s.c, nil
		}
		b.dropSlot(n, s)
	}
}

func (b *Broker) startCoordinator(ctx context.Context, n uint64) (*txncoord.Coordinator, error) {
	ml, err := mledger.OpenShared(ctx, b.ledgerDeps(), b.cfg.Ledger, tcLogName(n))
	if err != nil {
		return nil, err
	}
	cur, err := ml.OpenCursor(ctx, tcCursor, mledger.Earliest)
	if err != nil {
		_ = ml.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	c, err := txncoord.Start(ctx, txncoord.Config{TC: n, MaxTimeout: b.cfg.Transactions.MaxTimeout, Now: b.deps.Now, Logger: b.log},
		&tcLog{ml: ml, cur: cur}, txnEnder{b})
	if err != nil {
		_ = ml.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// dropCoordinator closes coordinator n if this broker runs it.
func (b *Broker) dropCoordinator(n uint64) {
	b.txns.mu.Lock()
	s := b.txns.tcs[n]
	b.txns.mu.Unlock()
	if s != nil {
		b.dropSlot(n, s)
	}
}

func (b *Broker) dropSlot(n uint64, s *tcSlot) {
	<-s.ready
	b.txns.mu.Lock()
	if b.txns.tcs[n] == s {
		delete(b.txns.tcs, n)
	}
	b.txns.mu.Unlock()
	if s.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.c.Close(ctx)
	}
}

// dropCoordinatorsMatching closes the coordinators whose assign
// partitions in reports true (their bundle is lost or given away): the
// clients reconnect and the next owner recovers them.
func (b *Broker) dropCoordinatorsMatching(in func(topic.Name) bool) {
	b.txns.mu.Lock()
	var ns []uint64
	for n := range b.txns.tcs {
		if assign, err := topic.Parse(TCAssignTopic + "-partition-" + strconv.FormatUint(n, 10)); err == nil && in(assign) {
			ns = append(ns, n)
		}
	}
	b.txns.mu.Unlock()
	for _, n := range ns {
		b.dropCoordinator(n)
	}
}

// closeCoordinators closes every coordinator (shutdown).
func (b *Broker) closeCoordinators() {
	b.txns.mu.Lock()
	ns := make([]uint64, 0, len(b.txns.tcs))
	for n := range b.txns.tcs {
		ns = append(ns, n)
	}
	b.txns.mu.Unlock()
	for _, n := range ns {
		b.dropCoordinator(n)
	}
}

// tcCursor is the cursor of a coordinator's log: its mark-delete
// position is the last checkpoint's, its properties hold the snapshot.
const tcCursor = ReservedPrefix + "tc"

// tcLog is a coordinator's log on a managed ledger.
type tcLog struct {
	ml  *mledger.ManagedLedger
	cur *mledger.Cursor

	mu   sync.Mutex
	last mledger.Position // the last record stored (adds confirm in order)
	any  bool
}

func (l *tcLog) Append(ctx context.Context, data []byte) error {
	p, err := l.ml.AddEntry(ctx, data)
	if err != nil {
		return err
	}
	l.mu.Lock()
	if !l.any || p.Compare(l.last) > 0 {
		l.last, l.any = p, true
	}
	l.mu.Unlock()
	return nil
}

func (l *tcLog) Checkpoint(ctx context.Context, snapshot func() []byte) error {
	l.mu.Lock()
	p, ok := l.last, l.any
	l.mu.Unlock()
	if !ok {
		return nil
	}
	// Moving the mark-delete position trims the ledgers before it.
	return l.cur.MarkDeleteWithProperties(ctx, p, map[string]string{"snapshot": string(snapshot())})
}

func (l *tcLog) Replay(ctx context.Context, restore func([]byte) error, fn func([]byte) error) error {
	if s := l.cur.Properties()["snapshot"]; s != "" {
		if err := restore([]byte(s)); err != nil {
			return err
		}
	}
	md := l.cur.MarkDelete()
	from := mledger.Position{Ledger: md.Ledger, Entry: md.Entry + 1}
	for {
		es, next, err := l.ml.Read(ctx, from, 256)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return nil
		}
		for _, e := range es {
			if err := fn(e.Data); err != nil {
				return err
			}
		}
		from = next
	}
}

func (l *tcLog) Close(ctx context.Context) error { return l.ml.Close(ctx) }

// txnEnder tells topics and subscriptions that a transaction ended.
type txnEnder struct{ b *Broker }

func (e txnEnder) EndOnPartition(ctx context.Context, name string, id txn.ID, a txn.Action) error {
	t, owner, err := e.b.txnTopic(ctx, name)
	if err != nil {
		return err
	}
	if owner != "" {
		return e.b.endRemote(ctx, owner, &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_PARTITION.Enum(), EndTxnOnPartition: &pb.CommandEndTxnOnPartition{
			RequestId: u64p(1), TxnidMostBits: &id.Most, TxnidLeastBits: &id.Least, Topic: &name, TxnAction: pb.TxnAction(a).Enum()}})
	}
	if t == nil {
		return nil
	}
	return t.endTxn(ctx, id, a)
}

func (e txnEnder) EndOnSubscription(ctx context.Context, sub txn.Sub, id txn.ID, a txn.Action) error {
	t, owner, err := e.b.txnTopic(ctx, sub.Topic)
	if err != nil {
		return err
	}
	if owner != "" {
		return e.b.endRemote(ctx, owner, &pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION.Enum(), EndTxnOnSubscription: &pb.CommandEndTxnOnSubscription{
			RequestId: u64p(1), TxnidMostBits: &id.Most, TxnidLeastBits: &id.Least, TxnAction: pb.TxnAction(a).Enum(),
			Subscription: &pb.Subscription{Topic: &sub.Topic, Subscription: &sub.Subscription}}})
	}
	if t == nil {
		return nil
	}
	return t.endTxnAcks(ctx, sub.Subscription, id, a)
}

// txnTopic finds a topic for a transaction's end: loaded, when this
// broker owns it, else the service URL of its owner (txnremote.go).
func (b *Broker) txnTopic(ctx context.Context, name string) (*Topic, string, error) {
	n, err := topic.Parse(name)
	if err != nil {
		return nil, "", err
	}
	r, err := b.deps.Placement.Lookup(ctx, n, false)
	if err != nil {
		return nil, "", err
	}
	if !r.Self {
		return nil, r.ServiceURL, nil
	}
	t, err := b.getTopic(ctx, n, mustExist)
	if errors.Is(err, ErrTopicNotFound) {
		return nil, "", nil // never written (or deleted): nothing to end
	}
	return t, "", err
}

// --- the commands ---

func txnID(most, least uint64) txn.ID { return txn.ID{Most: most, Least: least} }

// handleTxn serves a transaction command; false for other commands.
func (c *conn) handleTxn(cmd *pb.BaseCommand) bool {
	switch cmd.GetType() {
	case pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST:
		r := cmd.TcClientConnectRequest
		c.async(r.GetRequestId(), func() { c.handleTCConnect(r) })
	case pb.BaseCommand_NEW_TXN:
		r := cmd.NewTxn
		c.async(r.GetRequestId(), func() { c.handleNewTxn(r) })
	case pb.BaseCommand_ADD_PARTITION_TO_TXN:
		r := cmd.AddPartitionToTxn
		c.async(r.GetRequestId(), func() { c.handleAddPartitions(r) })
	case pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		r := cmd.AddSubscriptionToTxn
		c.async(r.GetRequestId(), func() { c.handleAddSubscriptions(r) })
	case pb.BaseCommand_END_TXN:
		r := cmd.EndTxn
		c.async(r.GetRequestId(), func() { c.handleEndTxn(r) })
	case pb.BaseCommand_END_TXN_ON_PARTITION:
		r := cmd.EndTxnOnPartition
		c.async(r.GetRequestId(), func() { c.handleEndTxnOnPartition(r) })
	case pb.BaseCommand_END_TXN_ON_SUBSCRIPTION:
		r := cmd.EndTxnOnSubscription
		c.async(r.GetRequestId(), func() { c.handleEndTxnOnSubscription(r) })
	default:
		return false
	}
	return true
}

// txnOp is the context of a coordinator request: requests wait for
// their log write, and an end for its fan-out.
func (c *conn) txnOp() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, 30*time.Second)
}

func (c *conn) handleTCConnect(r *pb.CommandTcClientConnectRequest) {
	id := r.GetRequestId()
	ctx, cancel := c.txnOp()
	defer cancel()
	if _, err := c.b.coordinator(ctx, r.GetTcId()); err != nil {
		c.sendCmd(wire.NewFailure(pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST, id, serverError(err)))
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE.Enum(), TcClientConnectResponse: &pb.CommandTcClientConnectResponse{RequestId: &id}})
}

func (c *conn) handleNewTxn(r *pb.CommandNewTxn) {
	id := r.GetRequestId()
	fail := c.failer(pb.BaseCommand_NEW_TXN, id)
	ctx, cancel := c.txnOp()
	defer cancel()
	tc, err := c.b.coordinator(ctx, r.GetTcId())
	if err != nil {
		fail(err)
		return
	}
	// txn_ttl_seconds carries milliseconds (as Pulsar's clients send it).
	ttl := r.GetTxnTtlSeconds()
	timeout := time.Duration(min(ttl, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
	tid, err := tc.NewTxn(ctx, timeout)
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN_RESPONSE.Enum(), NewTxnResponse: &pb.CommandNewTxnResponse{
		RequestId: &id, TxnidMostBits: &tid.Most, TxnidLeastBits: &tid.Least}})
}

func (c *conn) handleAddPartitions(r *pb.CommandAddPartitionToTxn) {
	id := r.GetRequestId()
	fail := c.failer(pb.BaseCommand_ADD_PARTITION_TO_TXN, id)
	ctx, cancel := c.txnOp()
	defer cancel()
	tid := txnID(r.GetTxnidMostBits(), r.GetTxnidLeastBits())
	parts := make([]string, 0, len(r.GetPartitions()))
	for _, p := range r.GetPartitions() {
		n, err := topic.Parse(p)
		if err != nil {
			fail(err)
			return
		}
		if n.Domain != topic.Persistent {
			fail(fmt.Errorf("%w: transactions need persistent topics, not %s", errkind.ErrNotAllowed, n))
			return
		}
		parts = append(parts, p) // kept as sent: the admin API names it so (as Pulsar's)
	}
	tc, err := c.b.coordinator(ctx, tid.Most)
	if err == nil {
		err = tc.AddPartitions(ctx, tid, parts)
	}
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE.Enum(), AddPartitionToTxnResponse: &pb.CommandAddPartitionToTxnResponse{
		RequestId: &id, TxnidMostBits: &tid.Most, TxnidLeastBits: &tid.Least}})
}

func (c *conn) handleAddSubscriptions(r *pb.CommandAddSubscriptionToTxn) {
	id := r.GetRequestId()
	fail := c.failer(pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN, id)
	ctx, cancel := c.txnOp()
	defer cancel()
	tid := txnID(r.GetTxnidMostBits(), r.GetTxnidLeastBits())
	subs := make([]txn.Sub, 0, len(r.GetSubscription()))
	for _, s := range r.GetSubscription() {
		n, err := topic.Parse(s.GetTopic())
		if err != nil {
			fail(err)
			return
		}
		if n.Domain != topic.Persistent {
			fail(fmt.Errorf("%w: transactions need persistent topics, not %s", errkind.ErrNotAllowed, n))
			return
		}
		subs = append(subs, txn.Sub{Topic: s.GetTopic(), Subscription: s.GetSubscription()})
	}
	tc, err := c.b.coordinator(ctx, tid.Most)
	if err == nil {
		err = tc.AddSubscriptions(ctx, tid, subs)
	}
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE.Enum(), AddSubscriptionToTxnResponse: &pb.CommandAddSubscriptionToTxnResponse{
		RequestId: &id, TxnidMostBits: &tid.Most, TxnidLeastBits: &tid.Least}})
}

func txnAction(a *pb.TxnAction) (txn.Action, error) {
	switch {
	case a == nil:
		return 0, fmt.Errorf("%w: transaction action missing", errkind.ErrNotAllowed)
	case *a == pb.TxnAction_COMMIT:
		return txn.Commit, nil
	case *a == pb.TxnAction_ABORT:
		return txn.Abort, nil
	}
	return 0, fmt.Errorf("%w: unknown transaction action %d", errkind.ErrNotAllowed, *a)
}

func (c *conn) handleEndTxn(r *pb.CommandEndTxn) {
	id := r.GetRequestId()
	fail := c.failer(pb.BaseCommand_END_TXN, id)
	a, err := txnAction(r.TxnAction)
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.txnOp()
	defer cancel()
	tid := txnID(r.GetTxnidMostBits(), r.GetTxnidLeastBits())
	tc, err := c.b.coordinator(ctx, tid.Most)
	if err == nil {
		err = tc.End(ctx, tid, a)
	}
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_RESPONSE.Enum(), EndTxnResponse: &pb.CommandEndTxnResponse{
		RequestId: &id, TxnidMostBits: &tid.Most, TxnidLeastBits: &tid.Least}})
}

// handleEndTxnOnPartition serves a coordinator of another broker (or
// another implementation) ending a transaction on a topic owned here.
func (c *conn) handleEndTxnOnPartition(r *pb.CommandEndTxnOnPartition) {
	id := r.GetRequestId()
	fail := c.failer(pb.BaseCommand_END_TXN_ON_PARTITION, id)
	if !c.b.cfg.Transactions.Enabled {
		fail(errTxnOff)
		return
	}
	a, err := txnAction(r.TxnAction)
	if err != nil {
		fail(err)
		return
	}
	name, err := topic.Parse(r.GetTopic())
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.txnOp()
	defer cancel()
	tid := txnID(r.GetTxnidMostBits(), r.GetTxnidLeastBits())
	t, err := c.b.getTopic(ctx, name, mustExist)
	switch {
	case errors.Is(err, ErrTopicNotFound):
		err = nil // never written: nothing to end
	case err == nil:
		err = t.endTxn(ctx, tid, a)
	}
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_PARTITION_RESPONSE.Enum(), EndTxnOnPartitionResponse: &pb.CommandEndTxnOnPartitionResponse{
		RequestId: &id, TxnidMostBits: &tid.Most, TxnidLeastBits: &tid.Least}})
}

// handleEndTxnOnSubscription serves a coordinator ending a transaction
// on a subscription of a topic owned here.
func (c *conn) handleEndTxnOnSubscription(r *pb.CommandEndTxnOnSubscription) {
	id := r.GetRequestId()
	fail := c.failer(pb.BaseCommand_END_TXN_ON_SUBSCRIPTION, id)
	if !c.b.cfg.Transactions.Enabled {
		fail(errTxnOff)
		return
	}
	a, err := txnAction(r.TxnAction)
	if err != nil {
		fail(err)
		return
	}
	if r.Subscription == nil {
		fail(fmt.Errorf("%w: END_TXN_ON_SUBSCRIPTION without a subscription", errkind.ErrNotAllowed))
		return
	}
	name, err := topic.Parse(r.Subscription.GetTopic())
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := c.txnOp()
	defer cancel()
	tid := txnID(r.GetTxnidMostBits(), r.GetTxnidLeastBits())
	t, err := c.b.getTopic(ctx, name, mustExist)
	switch {
	case errors.Is(err, ErrTopicNotFound):
		err = nil // gone: nothing to end
	case err == nil:
		err = t.endTxnAcks(ctx, r.Subscription.GetSubscription(), tid, a)
	}
	if err != nil {
		fail(err)
		return
	}
	c.sendCmd(&pb.BaseCommand{Type: pb.BaseCommand_END_TXN_ON_SUBSCRIPTION_RESPONSE.Enum(), EndTxnOnSubscriptionResponse: &pb.CommandEndTxnOnSubscriptionResponse{
		RequestId: &id, TxnidMostBits: &tid.Most, TxnidLeastBits: &tid.Least}})
}

// sendTxn says whether a SEND is transactional.
func sendTxn(cmd *pb.CommandSend) (txn.ID, bool) {
	if cmd.TxnidMostBits == nil && cmd.TxnidLeastBits == nil {
		return txn.ID{}, false
	}
	return txnID(cmd.GetTxnidMostBits(), cmd.GetTxnidLeastBits()), true
}

// withTxnID returns entry ([u32 size][metadata][payload]) with the
// transaction id added to its metadata: the two fields appended to the
// metadata bytes (protobuf takes the last occurrence of a field), nothing
// re-encoded.
func withTxnID(entry []byte, id txn.ID) ([]byte, error) {
	if len(entry) < 4 {
		return nil, fmt.Errorf("%w: entry too short", errkind.ErrNotAllowed)
	}
	size := binary.BigEndian.Uint32(entry)
	if uint64(size) > uint64(len(entry)-4) {
		return nil, fmt.Errorf("%w: bad metadata size", errkind.ErrNotAllowed)
	}
	meta, payload := entry[4:4+size], entry[4+size:]
	var extra []byte
	extra = protowire.AppendTag(extra, 22, protowire.VarintType) // txnid_least_bits
	extra = protowire.AppendVarint(extra, id.Least)
	extra = protowire.AppendTag(extra, 23, protowire.VarintType) // txnid_most_bits
	extra = protowire.AppendVarint(extra, id.Most)
	out := make([]byte, 0, len(entry)+len(extra))
	out = binary.BigEndian.AppendUint32(out, size+uint32(len(extra)))
	out = append(out, meta...)
	out = append(out, extra...)
	return append(out, payload...), nil
}

// --- the transaction buffer of a topic ---

// topicTxn is a topic's transaction buffer and its snapshot cursor.
type topicTxn struct {
	// ending serialises the writes of commit and abort markers, the ends
	// of pending acknowledgements and snapshots: a snapshot never misses
	// one of them stored before it. The records of pending
	// acknowledgements are written without it (txn.Acks.SnapshotAt says
	// where a snapshot may stand while some are in flight).
	ending sync.Mutex
	mu     sync.Mutex
	// buf holds the subscriptions' pending acknowledgements too
	// (pendingack.go).
	buf *txn.Buffer
	cur *mledger.Cursor
}

// loadTxnBuffer restores the transaction buffer of a topic that has one
// (its cursor exists): the snapshot, then the entries after it.
func (t *Topic) loadTxnBuffer(ctx context.Context) error {
	if t.ml == nil || !t.b.cfg.Transactions.Enabled {
		return nil
	}
	found := false
	for _, name := range t.ml.Cursors() {
		if name == txnCursor {
			found = true
		}
	}
	if !found {
		return nil
	}
	cur, err := t.ml.OpenCursor(ctx, txnCursor, mledger.Latest)
	if err != nil {
		return err
	}
	buf := txn.NewBuffer()
	if s := cur.Properties()[txnSnapshotProp]; s != "" {
		if buf, err = txn.RestoreBuffer([]byte(s)); err != nil {
			return fmt.Errorf("topic %s: %w", t.name, err)
		}
	}
	md := cur.MarkDelete()
	from := mledger.Position{Ledger: md.Ledger, Entry: md.Entry + 1}
	for {
		es, next, err := t.ml.Read(ctx, from, 256)
		if err != nil {
			return fmt.Errorf("topic %s: transaction buffer replay: %w", t.name, err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			meta, payload, err := wire.DecodeEntry(e.Data)
			if err != nil || (meta.TxnidMostBits == nil && meta.TxnidLeastBits == nil) || meta.GetReplicatedFrom() != "" {
				continue
			}
			if err := buf.Replay(txnID(meta.GetTxnidMostBits(), meta.GetTxnidLeastBits()), e.Position, meta.GetMarkerType(), payload); err != nil {
				t.b.log.Error("transaction record unreadable; skipped", "topic", t.name.String(), "position", e.Position.String(), "err", err)
			}
		}
		from = next
	}
	t.tx.Store(&topicTxn{buf: buf, cur: cur})
	return nil
}

// txnBuffer returns the topic's transaction buffer, making it (and its
// cursor) at the first transactional entry.
func (t *Topic) txnBuffer(ctx context.Context) (*topicTxn, error) {
	if tt := t.tx.Load(); tt != nil {
		return tt, nil
	}
	if t.ml == nil {
		return nil, fmt.Errorf("%w: transactions need persistent topics", errkind.ErrNotAllowed)
	}
	// Made once per topic: the coordinators' lock serves, briefly.
	t.b.txns.mk.Lock()
	defer t.b.txns.mk.Unlock()
	if tt := t.tx.Load(); tt != nil {
		return tt, nil
	}
	cur, err := t.ml.OpenCursor(ctx, txnCursor, mledger.Latest)
	if err != nil {
		return nil, err
	}
	tt := &topicTxn{buf: txn.NewBuffer(), cur: cur}
	t.tx.Store(tt)
	return tt, nil
}

// beginTxnSend registers a transactional entry about to be added; the
// returned function is called with its position once it is stored.
func (t *Topic) beginTxnSend(ctx context.Context, id txn.ID) (func(mledger.Position), error) {
	tt, err := t.txnBuffer(ctx)
	if err != nil {
		return nil, err
	}
	tt.mu.Lock()
	err = tt.buf.Write(id, t.ml.LastConfirmed())
	tt.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func(p mledger.Position) {
		tt.mu.Lock()
		tt.buf.Written(id, p)
		tt.mu.Unlock()
	}, nil
}

// endTxn writes the commit or abort marker of id and applies it:
// dispatch reads on past a commit, skips an abort's entries.
func (t *Topic) endTxn(ctx context.Context, id txn.ID, a txn.Action) error {
	tt := t.tx.Load()
	if tt == nil && a == txn.Commit {
		return nil // nothing of it here
	}
	tt, err := t.txnBuffer(ctx)
	if err != nil {
		return err
	}
	tt.ending.Lock()
	defer tt.ending.Unlock()
	marker := int32(txn.MarkerCommit)
	if a == txn.Abort {
		marker = txn.MarkerAbort
	}
	entry, err := t.txnMarkerEntry(id, marker, nil)
	if err != nil {
		return err
	}
	pos, err := t.ml.AddEntry(ctx, entry)
	t.addFailed(err)
	if err != nil {
		return err
	}
	tt.mu.Lock()
	tt.buf.End(id, a, pos)
	if first, ok := t.ml.FirstPosition(); ok {
		tt.buf.Trim(first)
	}
	// The snapshot stands at the marker (a replay starts after it), or
	// earlier while records of pending acknowledgements are in flight.
	at := tt.buf.Acks().SnapshotAt(pos)
	snap := tt.buf.Snapshot()
	tt.mu.Unlock()
	if err := tt.storeSnapshot(ctx, at, snap); err != nil {
		t.b.log.Debug("transaction buffer snapshot not stored", "topic", t.name.String(), "err", err)
	}
	t.kickAll()
	return nil
}

// storeSnapshot stores snap, the buffer's state, as standing at at
// (tt.ending held): the records after at are replayed over it. A
// snapshot stands only after the last one (the cursor's mark-delete
// position never goes back; storing one earlier would make a replay
// start too late for it): an earlier one is not stored, and the next
// end or maintenance pass takes one.
//
// Why at may be earlier than where the snapshot was meant to stand: the
// record of a pending acknowledgement is written without tt.ending. One
// whose add has confirmed in the log but whose completion has not been
// applied yet is behind the log's end, yet not in the state: a snapshot
// at the log's end would lose it. Standing no later than the log's end
// when the oldest such write began (txn.Acks.SnapshotAt), the snapshot
// has every record before it, and those after it are replayed
// (replaying a record the state has already changes nothing).
func (tt *topicTxn) storeSnapshot(ctx context.Context, at mledger.Position, snap []byte) error {
	if at.Compare(tt.cur.MarkDelete()) <= 0 {
		return nil
	}
	err := tt.cur.MarkDeleteWithProperties(ctx, at, map[string]string{txnSnapshotProp: string(snap)})
	if errors.Is(err, mledger.ErrInvalidPosition) {
		return nil // (not an entry: the log's end moved meanwhile, or the ledger list is empty)
	}
	return err
}

// snapshotTxnBuffer moves the transaction buffer's snapshot to the end of
// the log (maintenance), so that a topic whose transactions ended long
// ago neither replays nor keeps (retention) what came after them.
func (t *Topic) snapshotTxnBuffer(ctx context.Context) error {
	tt := t.tx.Load()
	if tt == nil {
		return nil
	}
	tt.ending.Lock()
	defer tt.ending.Unlock()
	last := t.ml.LastConfirmed()
	if last.Compare(tt.cur.MarkDelete()) <= 0 {
		return nil
	}
	tt.mu.Lock()
	if first, ok := t.ml.FirstPosition(); ok {
		tt.buf.Trim(first)
	}
	at := tt.buf.Acks().SnapshotAt(last)
	snap := tt.buf.Snapshot()
	tt.mu.Unlock()
	return tt.storeSnapshot(ctx, at, snap)
}

// kickAll wakes every dispatcher of the topic.
func (t *Topic) kickAll() {
	t.mu.Lock()
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.kick()
	}
}

// txnLimit is the last position dispatch may read because of open
// transactions.
func (t *Topic) txnLimit() (mledger.Position, bool) {
	tt := t.tx.Load()
	if tt == nil {
		return mledger.Position{}, false
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.buf.Limit()
}

// txnSkip says whether an entry is never delivered: a transaction's
// marker (commit, abort, pending acknowledgements), or an entry of an
// aborted transaction. Markers are skipped even on a topic whose buffer
// is not loaded (transactions turned off since they were written).
func (t *Topic) txnSkip(meta *pb.MessageMetadata) bool {
	marker := txn.IsMarker(meta.GetMarkerType())
	tt := t.tx.Load()
	if tt == nil {
		return marker
	}
	hasTxn := meta.TxnidMostBits != nil || meta.TxnidLeastBits != nil
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.buf.Skip(txnID(meta.GetTxnidMostBits(), meta.GetTxnidLeastBits()), hasTxn, marker, meta.GetReplicatedFrom() != "")
}

// minLimit combines two dispatch limits.
func minLimit(a mledger.Position, aok bool, b mledger.Position, bok bool) (mledger.Position, bool) {
	switch {
	case !aok:
		return b, bok
	case !bok:
		return a, aok
	case a.Compare(b) <= 0:
		return a, true
	}
	return b, true
}

// txnPartitionsResponse answers the partitioned metadata of the
// coordinator assign topic: the number of coordinators, 0 when
// transactions are off.
func (b *Broker) tcPartitions() uint32 {
	if !b.cfg.Transactions.Enabled {
		return 0
	}
	return uint32(b.cfg.Transactions.coordinators())
}
