package drill

import "time"

// Key names one workload message: its producer and its sequence number
// in that producer's stream.
type Key struct {
	Producer int
	Seq      int64
}

// Send is one message handed to a producer.
type Send struct {
	Key
	Sent time.Time
	// Acked is when the client reported the message stored; zero if it
	// never did.
	Acked time.Time
	// Err is the send's error, when the client gave up on it.
	Err string
}

// Delivery is one message a consumer's Receive returned, in the order
// the consumers returned them.
type Delivery struct {
	Key
	Consumer int
	// Partition is the partition the message came from (0 for a topic
	// that is not partitioned).
	Partition int
	At        time.Time
	// Late: the message carried LateProperty.
	Late bool
}

// Copy is one message a scan of a region's topic found.
type Copy struct {
	Key
	Late bool
}

// Scan is a read of a region's copy of the topic from its earliest
// message.
type Scan struct {
	Region string
	// Started and Done bound the read; Done is zero when it did not
	// finish.
	Started, Done time.Time
	Copies        []Copy
	// Foreign counts messages of other runs or applications.
	Foreign int
}

// Log is everything a drill recorded, the only input of Analyze. Times
// of phases that did not happen are zero.
type Log struct {
	Producers, Consumers int
	// Start is when the workload started; Steady when its warm-up ended
	// (every producer acknowledged, the consumer receiving).
	Start, Steady time.Time
	// Fault is when the drill asked for the fault.
	Fault time.Time
	// Detected is the first sign of the fault the drill saw after it:
	// DetectedBy says which.
	Detected   time.Time
	DetectedBy string
	// Promoted is when the promotion of the new primary was acknowledged
	// (by the drill's set-primary) or first seen (automatic failover);
	// PromotedBy says which.
	Promoted   time.Time
	PromotedBy string
	// Writable is when the new primary first acknowledged a publish of
	// the drill's probe (a producer of its own that reaches only the new
	// primary, started at the promotion): its fence taken.
	Writable time.Time
	// Healed is when the fault was undone (a killed region running again,
	// the WAN links back up).
	Healed time.Time
	// FailbackStart is when the planned move back was asked for (zero
	// without --fail-back).
	FailbackStart time.Time
	// Stop is when the producers stopped sending.
	Stop time.Time

	Sends      []Send
	Deliveries []Delivery
	// Foreign counts deliveries of messages that are not this run's.
	Foreign int
	// Client errors besides failed sends (which are in Sends).
	ReceiveErrors, AckErrors         int
	ProducersClosed, ConsumersClosed int

	// AtCut is the new primary's copy just before the heal: what had
	// reached it while the old primary was cut off.
	AtCut *Scan
	// Survivor is the new primary's copy after the heal and the drain.
	Survivor *Scan
	// FailbackCopy is the old primary's copy after the fail-back and the
	// final drain.
	FailbackCopy *Scan

	// Errors are what went wrong in the run itself (a phase that could not
	// complete); each fails the drill.
	Errors []string
}
