package broker

import (
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/broker/dispatch"
	"github.com/isobar-mq/isobar/wire/pb"
)

// producer is a producer attached to a topic through a connection.
type producer struct {
	c        *conn
	id       uint64
	name     string
	t        *Topic
	access   pb.ProducerAccessMode
	metadata map[string]string
	since    time.Time
	reqID    uint64 // the PRODUCER request (answered again when a wait ends)
	replFrom string // a replicator producer: the source cluster
	schemaV  []byte // the version of its schema (nil: none), sent in PRODUCER_SUCCESS

	msgIn, bytesIn atomic.Int64
}

// consumer is a consumer attached to a subscription through a connection.
// Its permits and pending entries are guarded by its subscription's mu.
type consumer struct {
	c        *conn
	id       uint64
	name     string
	priority int32
	metadata map[string]string
	since    time.Time
	ranges   [][2]int32 // Key_Shared sticky hash ranges (inclusive)
	sub      *subscription
	// attached: its SUBSCRIBE succeeded (sub is set for good).
	attached atomic.Bool
	// compacted: it reads the compacted view (read_compacted); set
	// before it is attached.
	compacted bool

	// Guarded by sub.mu.
	d              *dispatch.Consumer // its dispatch state, from the time it is attached
	flowed         bool               // it sent a FLOW: the client knows it
	told, toldOnce bool               // the activity last notified
	toldEnd        bool               // REACHED_END_OF_TOPIC was sent

	detached bool // guarded by sub.sendMu: nothing more is sent to it

	msgOut, bytesOut, redelivered atomic.Int64
	// When it last sent a FLOW, was last sent an entry and last
	// acknowledged, Unix ms (0: never).
	lastFlow, lastConsumed, lastAcked atomic.Int64
}

type consumerStats struct {
	permits int64
	unacked int
}

func (k *consumer) stats() consumerStats {
	k.sub.mu.Lock()
	defer k.sub.mu.Unlock()
	return consumerStats{permits: k.d.Permits(), unacked: k.d.Unacked()}
}
