package adminapi

// The JSON types below mirror Pulsar's admin REST types field for field
// (names and JSON types as in pulsaradmin/pkg/utils/data.go of
// pulsar-client-go v0.19.0), because pulsaradmin decodes whole objects.

// TopicStats is Pulsar's TopicStats (admin JSON).
type TopicStats struct {
	BacklogSize            int64                        `json:"backlogSize"`
	MsgCounterIn           int64                        `json:"msgInCounter"`
	MsgCounterOut          int64                        `json:"msgOutCounter"`
	MsgRateIn              float64                      `json:"msgRateIn"`
	MsgRateOut             float64                      `json:"msgRateOut"`
	MsgThroughputIn        float64                      `json:"msgThroughputIn"`
	MsgThroughputOut       float64                      `json:"msgThroughputOut"`
	AverageMsgSize         float64                      `json:"averageMsgSize"`
	StorageSize            int64                        `json:"storageSize"`
	Publishers             []PublisherStats             `json:"publishers"`
	Subscriptions          map[string]SubscriptionStats `json:"subscriptions"`
	Replication            map[string]ReplicatorStats   `json:"replication"`
	DeDuplicationStatus    string                       `json:"deduplicationStatus"`
	TopicCreationTimeStamp int64                        `json:"topicCreationTimeStamp,omitempty"`
	LastPublishTimestamp   int64                        `json:"lastPublishTimestamp,omitempty"`
	// SyncReplication is an Isobar extension: the topic's synchronous
	// replication, when its policy asks for it.
	SyncReplication *SyncReplicationStats `json:"syncReplication,omitempty"`
}

// States of SyncReplicationStats.
const (
	// SyncStateSync: publishes are acknowledged once enough other
	// regions hold them.
	SyncStateSync = "sync"
	// SyncStateDegraded: the fallback acknowledged publishes the other
	// regions had not confirmed in time; until they catch up, publishes
	// are acknowledged from the local copy alone.
	SyncStateDegraded = "degraded"
)

// SyncReplicationStats is a topic's synchronous replication state
// (policy.SyncReplication) on the broker that serves it.
type SyncReplicationStats struct {
	Regions              int    `json:"regions"`
	FallbackAfterSeconds int    `json:"fallbackAfterSeconds"`
	State                string `json:"state"`
	// Waiting publishes, and how long the oldest has waited.
	Waiting      int   `json:"waiting"`
	OldestWaitMs int64 `json:"oldestWaitMs"`
	// DegradedSince is when the state became degraded (RFC 3339).
	DegradedSince string `json:"degradedSince,omitempty"`
	// Confirmed is, per other region, the last position of this region's
	// log it confirmed holding ("<ledger>:<entry>").
	Confirmed map[string]string `json:"confirmed,omitempty"`
}

// PublisherStats is Pulsar's PublisherStats (admin JSON).
type PublisherStats struct {
	AccessMode                string            `json:"accessMode"`
	ProducerID                int64             `json:"producerId"`
	MsgRateIn                 float64           `json:"msgRateIn"`
	MsgThroughputIn           float64           `json:"msgThroughputIn"`
	AverageMsgSize            float64           `json:"averageMsgSize"`
	ChunkedMessageRate        float64           `json:"chunkedMessageRate"`
	IsSupportsPartialProducer bool              `json:"supportsPartialProducer"`
	ProducerName              string            `json:"producerName"`
	Address                   string            `json:"address"`
	ConnectedSince            string            `json:"connectedSince"`
	ClientVersion             string            `json:"clientVersion"`
	Metadata                  map[string]string `json:"metadata"`
}

// SubscriptionStats is Pulsar's SubscriptionStats (admin JSON).
type SubscriptionStats struct {
	BlockedSubscriptionOnUnackedMsgs          bool              `json:"blockedSubscriptionOnUnackedMsgs"`
	IsReplicated                              bool              `json:"isReplicated"`
	LastConsumedFlowTimestamp                 int64             `json:"lastConsumedFlowTimestamp"`
	LastConsumedTimestamp                     int64             `json:"lastConsumedTimestamp"`
	LastAckedTimestamp                        int64             `json:"lastAckedTimestamp"`
	MsgRateOut                                float64           `json:"msgRateOut"`
	MsgThroughputOut                          float64           `json:"msgThroughputOut"`
	MsgRateRedeliver                          float64           `json:"msgRateRedeliver"`
	MsgRateExpired                            float64           `json:"msgRateExpired"`
	MsgBacklog                                int64             `json:"msgBacklog"`
	MsgBacklogNoDelayed                       int64             `json:"msgBacklogNoDelayed"`
	MsgDelayed                                int64             `json:"msgDelayed"`
	UnAckedMessages                           int64             `json:"unackedMessages"`
	SubType                                   string            `json:"type"`
	ActiveConsumerName                        string            `json:"activeConsumerName"`
	BytesOutCounter                           int64             `json:"bytesOutCounter"`
	MsgOutCounter                             int64             `json:"msgOutCounter"`
	MessageAckRate                            float64           `json:"messageAckRate"`
	ChunkedMessageRate                        float64           `json:"chunkedMessageRate"`
	BacklogSize                               int64             `json:"backlogSize"`
	EarliestMsgPublishTimeInBacklog           int64             `json:"earliestMsgPublishTimeInBacklog"`
	TotalMsgExpired                           int64             `json:"totalMsgExpired"`
	LastExpireTimestamp                       int64             `json:"lastExpireTimestamp"`
	LastMarkDeleteAdvancedTimestamp           int64             `json:"lastMarkDeleteAdvancedTimestamp"`
	Consumers                                 []ConsumerStats   `json:"consumers"`
	IsDurable                                 bool              `json:"isDurable"`
	AllowOutOfOrderDelivery                   bool              `json:"allowOutOfOrderDelivery"`
	ConsumersAfterMarkDeletePosition          map[string]string `json:"consumersAfterMarkDeletePosition"`
	NonContiguousDeletedMessagesRanges        int               `json:"nonContiguousDeletedMessagesRanges"`
	NonContiguousDeletedMessagesRangesSrzSize int               `json:"nonContiguousDeletedMessagesRangesSerializedSize"`
	DelayedMessageIndexSizeInBytes            int64             `json:"delayedMessageIndexSizeInBytes"`
	SubscriptionProperties                    map[string]string `json:"subscriptionProperties"`
	FilterProcessedMsgCount                   int64             `json:"filterProcessedMsgCount"`
	FilterAcceptedMsgCount                    int64             `json:"filterAcceptedMsgCount"`
	FilterRejectedMsgCount                    int64             `json:"filterRejectedMsgCount"`
	FilterRescheduledMsgCount                 int64             `json:"filterRescheduledMsgCount"`
}

// ConsumerStats is Pulsar's ConsumerStats (admin JSON).
type ConsumerStats struct {
	BlockedConsumerOnUnAckedMsgs bool              `json:"blockedConsumerOnUnackedMsgs"`
	AvailablePermits             int               `json:"availablePermits"`
	UnAckedMessages              int               `json:"unackedMessages"`
	MsgRateOut                   float64           `json:"msgRateOut"`
	MsgThroughputOut             float64           `json:"msgThroughputOut"`
	MsgRateRedeliver             float64           `json:"msgRateRedeliver"`
	ConsumerName                 string            `json:"consumerName"`
	BytesOutCounter              int64             `json:"bytesOutCounter"`
	MsgOutCounter                int64             `json:"msgOutCounter"`
	MessageAckRate               float64           `json:"messageAckRate"`
	ChunkedMessageRate           float64           `json:"chunkedMessageRate"`
	AvgMessagesPerEntry          int               `json:"avgMessagesPerEntry"`
	Address                      string            `json:"address"`
	ConnectedSince               string            `json:"connectedSince"`
	ClientVersion                string            `json:"clientVersion"`
	LastAckedTimestamp           int64             `json:"lastAckedTimestamp"`
	LastConsumedTimestamp        int64             `json:"lastConsumedTimestamp"`
	LastConsumedFlowTimestamp    int64             `json:"lastConsumedFlowTimestamp"`
	Metadata                     map[string]string `json:"metadata"`
}

// ReplicatorStats is Pulsar's ReplicatorStats (admin JSON).
type ReplicatorStats struct {
	Connected                 bool    `json:"connected"`
	MsgRateIn                 float64 `json:"msgRateIn"`
	MsgRateOut                float64 `json:"msgRateOut"`
	MsgThroughputIn           float64 `json:"msgThroughputIn"`
	MsgThroughputOut          float64 `json:"msgThroughputOut"`
	MsgRateExpired            float64 `json:"msgRateExpired"`
	ReplicationBacklog        int64   `json:"replicationBacklog"`
	ReplicationDelayInSeconds int64   `json:"replicationDelayInSeconds"`
	InboundConnection         string  `json:"inboundConnection"`
	InboundConnectedSince     string  `json:"inboundConnectedSince"`
	OutboundConnection        string  `json:"outboundConnection"`
	OutboundConnectedSince    string  `json:"outboundConnectedSince"`
	// Isobar extensions: the backlog in bytes (estimated from the
	// average entry size) and whether replication to the remote has made
	// no progress for the broker's stall threshold while it has a backlog.
	ReplicationBacklogBytes int64 `json:"replicationBacklogBytes"`
	Stalled                 bool  `json:"stalled"`
}

// PersistentTopicInternalStats is Pulsar's PersistentTopicInternalStats (admin JSON).
type PersistentTopicInternalStats struct {
	WaitingCursorsCount                int                    `json:"waitingCursorsCount"`
	PendingAddEntriesCount             int                    `json:"pendingAddEntriesCount"`
	EntriesAddedCounter                int64                  `json:"entriesAddedCounter"`
	NumberOfEntries                    int64                  `json:"numberOfEntries"`
	TotalSize                          int64                  `json:"totalSize"`
	CurrentLedgerEntries               int64                  `json:"currentLedgerEntries"`
	CurrentLedgerSize                  int64                  `json:"currentLedgerSize"`
	LastLedgerCreatedTimestamp         string                 `json:"lastLedgerCreatedTimestamp"`
	LastLedgerCreationFailureTimestamp string                 `json:"lastLedgerCreationFailureTimestamp"`
	LastConfirmedEntry                 string                 `json:"lastConfirmedEntry"`
	State                              string                 `json:"state"`
	Ledgers                            []LedgerInfo           `json:"ledgers"`
	Cursors                            map[string]CursorStats `json:"cursors"`
	SchemaLedgers                      []SchemaLedger         `json:"schemaLedgers"`
	CompactedLedger                    CompactedLedger        `json:"compactedLedger"`
}

// LedgerInfo is Pulsar's LedgerInfo (admin JSON).
type LedgerInfo struct {
	LedgerID        int64  `json:"ledgerId"`
	Entries         int64  `json:"entries"`
	Size            int64  `json:"size"`
	Timestamp       int64  `json:"timestamp"`
	Offloaded       bool   `json:"offloaded"`
	MetaData        string `json:"metadata"`
	UnderReplicated bool   `json:"underReplicated"`
}

// CursorStats is Pulsar's CursorStats (admin JSON).
type CursorStats struct {
	MarkDeletePosition                       string           `json:"markDeletePosition"`
	ReadPosition                             string           `json:"readPosition"`
	WaitingReadOp                            bool             `json:"waitingReadOp"`
	PendingReadOps                           int              `json:"pendingReadOps"`
	MessagesConsumedCounter                  int64            `json:"messagesConsumedCounter"`
	CursorLedger                             int64            `json:"cursorLedger"`
	CursorLedgerLastEntry                    int64            `json:"cursorLedgerLastEntry"`
	IndividuallyDeletedMessages              string           `json:"individuallyDeletedMessages"`
	LastLedgerWitchTimestamp                 string           `json:"lastLedgerWitchTimestamp"`
	State                                    string           `json:"state"`
	NumberOfEntriesSinceFirstNotAckedMessage int64            `json:"numberOfEntriesSinceFirstNotAckedMessage"`
	TotalNonContiguousDeletedMessagesRange   int              `json:"totalNonContiguousDeletedMessagesRange"`
	Properties                               map[string]int64 `json:"properties"`
}

// SchemaLedger is Pulsar's SchemaLedger (admin JSON).
type SchemaLedger struct {
	LedgerID    int64 `json:"ledgerId"`
	Entries     int64 `json:"entries"`
	Size        int64 `json:"size"`
	Timestamp   int64 `json:"timestamp"`
	IsOffloaded bool  `json:"isOffloaded"`
}

// CompactedLedger is Pulsar's CompactedLedger (admin JSON).
type CompactedLedger struct {
	LedgerID        int64 `json:"ledgerId"`
	Entries         int64 `json:"entries"`
	Size            int64 `json:"size"`
	Offloaded       bool  `json:"offloaded"`
	UnderReplicated bool  `json:"underReplicated"`
}

// PartitionedTopicStats is Pulsar's PartitionedTopicStats (admin JSON).
type PartitionedTopicStats struct {
	// BacklogSize, MsgCounterIn and MsgCounterOut are sent by Pulsar but
	// not decoded by pulsaradmin.
	BacklogSize            int64                        `json:"backlogSize"`
	MsgCounterIn           int64                        `json:"msgInCounter"`
	MsgCounterOut          int64                        `json:"msgOutCounter"`
	MsgRateIn              float64                      `json:"msgRateIn"`
	MsgRateOut             float64                      `json:"msgRateOut"`
	MsgThroughputIn        float64                      `json:"msgThroughputIn"`
	MsgThroughputOut       float64                      `json:"msgThroughputOut"`
	AverageMsgSize         float64                      `json:"averageMsgSize"`
	StorageSize            int64                        `json:"storageSize"`
	Publishers             []PublisherStats             `json:"publishers"`
	Subscriptions          map[string]SubscriptionStats `json:"subscriptions"`
	Replication            map[string]ReplicatorStats   `json:"replication"`
	DeDuplicationStatus    string                       `json:"deduplicationStatus"`
	Metadata               PartitionedTopicMetadata     `json:"metadata"`
	Partitions             map[string]TopicStats        `json:"partitions,omitempty"`
	TopicCreationTimeStamp int64                        `json:"topicCreationTimeStamp,omitempty"`
	LastPublishTimestamp   int64                        `json:"lastPublishTimestamp,omitempty"`
}

// PartitionedTopicMetadata is Pulsar's PartitionedTopicMetadata (admin JSON).
type PartitionedTopicMetadata struct {
	Partitions int `json:"partitions"`
}

// LookupData is Pulsar's LookupData (admin JSON).
type LookupData struct {
	BrokerURL    string `json:"brokerUrl"`
	BrokerURLTLS string `json:"brokerUrlTls"`
	HTTPURL      string `json:"httpUrl"`
	HTTPURLTLS   string `json:"httpUrlTls"`
}

// MessageID is Pulsar's admin message id. BatchIndex is not part of the
// JSON form (as in pulsaradmin); -1 means none.
type MessageID struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int   `json:"partitionIndex"`
	BatchIndex     int   `json:"-"`
}

// Earliest and Latest are the special message ids Pulsar uses for the
// oldest and newest positions of a topic.
var (
	Earliest = MessageID{LedgerID: -1, EntryID: -1, PartitionIndex: -1, BatchIndex: -1}
	Latest   = MessageID{LedgerID: 0x7fffffffffffffff, EntryID: 0x7fffffffffffffff, PartitionIndex: -1, BatchIndex: -1}
)
