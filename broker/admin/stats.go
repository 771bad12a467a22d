package admin

import (
	"net/http"
	"strconv"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

// statsOptions are the query parameters of GET .../stats and
// .../partitioned-stats that change what is sent. The others Pulsar takes
// (getPreciseBacklog, subscriptionBacklogSize, getEarliestTimeInBacklog)
// change nothing here: backlogs are always counted in entries.
type statsOptions struct {
	excludePublishers bool // ?excludePublishers=true: no publishers
	excludeConsumers  bool // ?excludeConsumers=true: no consumers in any subscription
}

// parseStatsOptions reads the options; a value that is not a boolean is a
// bad request.
func parseStatsOptions(r *http.Request) (statsOptions, error) {
	var o statsOptions
	q := r.URL.Query()
	for name, dst := range map[string]*bool{"excludePublishers": &o.excludePublishers, "excludeConsumers": &o.excludeConsumers} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, badRequestf("%s=%q: want true or false", name, v)
		}
		*dst = b
	}
	return o, nil
}

// apply drops what the options exclude from st.
func (o statsOptions) apply(st *adminapi.TopicStats) {
	if o.excludePublishers {
		st.Publishers = []adminapi.PublisherStats{}
	}
	if o.excludeConsumers {
		for k, sub := range st.Subscriptions {
			sub.Consumers = []adminapi.ConsumerStats{}
			st.Subscriptions[k] = sub
		}
	}
}

// normalizeTopicStats replaces nil lists and maps with empty ones: clients
// index into them (the Pulsar client tests read publishers[0] and
// subscriptions.<sub>.consumers[0] through untyped JSON).
func normalizeTopicStats(st *adminapi.TopicStats) {
	if st.Publishers == nil {
		st.Publishers = []adminapi.PublisherStats{}
	}
	for i := range st.Publishers {
		if st.Publishers[i].Metadata == nil {
			st.Publishers[i].Metadata = map[string]string{}
		}
	}
	if st.Subscriptions == nil {
		st.Subscriptions = map[string]adminapi.SubscriptionStats{}
	}
	for k, sub := range st.Subscriptions {
		if sub.Consumers == nil {
			sub.Consumers = []adminapi.ConsumerStats{}
		}
		for i := range sub.Consumers {
			if sub.Consumers[i].Metadata == nil {
				sub.Consumers[i].Metadata = map[string]string{}
			}
		}
		if sub.ConsumersAfterMarkDeletePosition == nil {
			sub.ConsumersAfterMarkDeletePosition = map[string]string{}
		}
		if sub.SubscriptionProperties == nil {
			sub.SubscriptionProperties = map[string]string{}
		}
		st.Subscriptions[k] = sub
	}
	if st.Replication == nil {
		st.Replication = map[string]adminapi.ReplicatorStats{}
	}
}

// aggregateStats sums the stats of a partitioned topic's partitions the
// way Pulsar's PartitionedTopicStatsImpl.add does: rates, throughputs,
// counters and sizes add up; publishers and each subscription's
// consumers are concatenated; subscriptions and replication are merged by
// name. names[i] is the partition stats[i] belongs to; n is the
// partition count. perPartition keeps each partition's stats.
func aggregateStats(n int, names []string, stats []*adminapi.TopicStats, perPartition bool) *adminapi.PartitionedTopicStats {
	ps := &adminapi.PartitionedTopicStats{
		Metadata:      adminapi.PartitionedTopicMetadata{Partitions: n},
		Publishers:    []adminapi.PublisherStats{},
		Subscriptions: map[string]adminapi.SubscriptionStats{},
		Replication:   map[string]adminapi.ReplicatorStats{},
	}
	if perPartition {
		ps.Partitions = make(map[string]adminapi.TopicStats, len(stats))
	}
	for i, st := range stats {
		ps.BacklogSize += st.BacklogSize
		ps.MsgCounterIn += st.MsgCounterIn
		ps.MsgCounterOut += st.MsgCounterOut
		ps.MsgRateIn += st.MsgRateIn
		ps.MsgRateOut += st.MsgRateOut
		ps.MsgThroughputIn += st.MsgThroughputIn
		ps.MsgThroughputOut += st.MsgThroughputOut
		ps.StorageSize += st.StorageSize
		ps.Publishers = append(ps.Publishers, st.Publishers...)
		if ps.DeDuplicationStatus == "" {
			ps.DeDuplicationStatus = st.DeDuplicationStatus
		}
		if ps.TopicCreationTimeStamp == 0 || st.TopicCreationTimeStamp != 0 && st.TopicCreationTimeStamp < ps.TopicCreationTimeStamp {
			ps.TopicCreationTimeStamp = st.TopicCreationTimeStamp
		}
		ps.LastPublishTimestamp = max(ps.LastPublishTimestamp, st.LastPublishTimestamp)
		for name, sub := range st.Subscriptions {
			ps.Subscriptions[name] = addSubscription(ps.Subscriptions[name], sub)
		}
		for name, rep := range st.Replication {
			ps.Replication[name] = addReplicator(ps.Replication[name], rep)
		}
		if perPartition {
			ps.Partitions[names[i]] = *st
		}
	}
	if ps.MsgRateIn > 0 {
		ps.AverageMsgSize = ps.MsgThroughputIn / ps.MsgRateIn
	}
	return ps
}

func addSubscription(a, b adminapi.SubscriptionStats) adminapi.SubscriptionStats {
	if a.Consumers == nil {
		// First partition: take its descriptive fields as they are.
		a = b
		a.Consumers = append([]adminapi.ConsumerStats{}, b.Consumers...)
		a.ConsumersAfterMarkDeletePosition = map[string]string{}
		for k, v := range b.ConsumersAfterMarkDeletePosition {
			a.ConsumersAfterMarkDeletePosition[k] = v
		}
		return a
	}
	a.MsgRateOut += b.MsgRateOut
	a.MsgThroughputOut += b.MsgThroughputOut
	a.MsgRateRedeliver += b.MsgRateRedeliver
	a.MsgRateExpired += b.MsgRateExpired
	a.MsgBacklog += b.MsgBacklog
	a.MsgBacklogNoDelayed += b.MsgBacklogNoDelayed
	a.MsgDelayed += b.MsgDelayed
	a.UnAckedMessages += b.UnAckedMessages
	a.BytesOutCounter += b.BytesOutCounter
	a.MsgOutCounter += b.MsgOutCounter
	a.MessageAckRate += b.MessageAckRate
	a.ChunkedMessageRate += b.ChunkedMessageRate
	a.BacklogSize += b.BacklogSize
	a.TotalMsgExpired += b.TotalMsgExpired
	a.NonContiguousDeletedMessagesRanges += b.NonContiguousDeletedMessagesRanges
	a.NonContiguousDeletedMessagesRangesSrzSize += b.NonContiguousDeletedMessagesRangesSrzSize
	a.DelayedMessageIndexSizeInBytes += b.DelayedMessageIndexSizeInBytes
	a.FilterProcessedMsgCount += b.FilterProcessedMsgCount
	a.FilterAcceptedMsgCount += b.FilterAcceptedMsgCount
	a.FilterRejectedMsgCount += b.FilterRejectedMsgCount
	a.FilterRescheduledMsgCount += b.FilterRescheduledMsgCount
	a.BlockedSubscriptionOnUnackedMsgs = a.BlockedSubscriptionOnUnackedMsgs || b.BlockedSubscriptionOnUnackedMsgs
	a.LastConsumedFlowTimestamp = max(a.LastConsumedFlowTimestamp, b.LastConsumedFlowTimestamp)
	a.LastConsumedTimestamp = max(a.LastConsumedTimestamp, b.LastConsumedTimestamp)
	a.LastAckedTimestamp = max(a.LastAckedTimestamp, b.LastAckedTimestamp)
	a.LastExpireTimestamp = max(a.LastExpireTimestamp, b.LastExpireTimestamp)
	a.LastMarkDeleteAdvancedTimestamp = max(a.LastMarkDeleteAdvancedTimestamp, b.LastMarkDeleteAdvancedTimestamp)
	if b.EarliestMsgPublishTimeInBacklog != 0 && (a.EarliestMsgPublishTimeInBacklog == 0 || b.EarliestMsgPublishTimeInBacklog < a.EarliestMsgPublishTimeInBacklog) {
		a.EarliestMsgPublishTimeInBacklog = b.EarliestMsgPublishTimeInBacklog
	}
	a.Consumers = append(a.Consumers, b.Consumers...)
	for k, v := range b.ConsumersAfterMarkDeletePosition {
		a.ConsumersAfterMarkDeletePosition[k] = v
	}
	return a
}

func addReplicator(a, b adminapi.ReplicatorStats) adminapi.ReplicatorStats {
	a.Connected = a.Connected || b.Connected
	a.MsgRateIn += b.MsgRateIn
	a.MsgRateOut += b.MsgRateOut
	a.MsgThroughputIn += b.MsgThroughputIn
	a.MsgThroughputOut += b.MsgThroughputOut
	a.MsgRateExpired += b.MsgRateExpired
	a.ReplicationBacklog += b.ReplicationBacklog
	a.ReplicationDelayInSeconds = max(a.ReplicationDelayInSeconds, b.ReplicationDelayInSeconds)
	if a.InboundConnection == "" {
		a.InboundConnection, a.InboundConnectedSince = b.InboundConnection, b.InboundConnectedSince
	}
	if a.OutboundConnection == "" {
		a.OutboundConnection, a.OutboundConnectedSince = b.OutboundConnection, b.OutboundConnectedSince
	}
	return a
}

// topicStatsOf is the aggregate ps as a TopicStats, for GET .../stats on a
// partitioned topic.
func topicStatsOf(ps *adminapi.PartitionedTopicStats) *adminapi.TopicStats {
	st := &adminapi.TopicStats{
		BacklogSize:            ps.BacklogSize,
		MsgCounterIn:           ps.MsgCounterIn,
		MsgCounterOut:          ps.MsgCounterOut,
		MsgRateIn:              ps.MsgRateIn,
		MsgRateOut:             ps.MsgRateOut,
		MsgThroughputIn:        ps.MsgThroughputIn,
		MsgThroughputOut:       ps.MsgThroughputOut,
		AverageMsgSize:         ps.AverageMsgSize,
		StorageSize:            ps.StorageSize,
		Publishers:             ps.Publishers,
		Subscriptions:          ps.Subscriptions,
		Replication:            ps.Replication,
		DeDuplicationStatus:    ps.DeDuplicationStatus,
		TopicCreationTimeStamp: ps.TopicCreationTimeStamp,
		LastPublishTimestamp:   ps.LastPublishTimestamp,
	}
	normalizeTopicStats(st)
	return st
}
