package replicator

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The rules of both sides that need no I/O and read no clock: what a
// stream sends, how it gathers a frame, how it paces retries and probes,
// what its requests carry, and what a sink accepts and how it marks what
// it stores (docs/replication.md, "The path of a replicated entry"). The
// stream and the sink (source.go, sink.go) do the I/O around them.

// minBackoff is a failing stream's first retry delay, and the first
// wait before probing a remote found unreachable (or ProbeInterval, if
// shorter).
const minBackoff = 100 * time.Millisecond

// warnEvery is how often a stream that keeps failing logs a warning.
const warnEvery = 30 * time.Second

// backoff paces retries: first, then doubling, capped at max (the
// first delay is first even when max is below it), until reset.
type backoff struct{ first, cur, max time.Duration }

func newBackoff(first, max time.Duration) backoff {
	return backoff{first: first, cur: first, max: max}
}

// next is the delay to wait now; the one after it doubles.
func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d
}

// reset starts again from first (the stream made progress).
func (b *backoff) reset() { b.cur = b.first }

// warnDue says whether the failing-th failure in a row, at now, is
// logged: the first of a run, then one every warnEvery after the last
// warning.
func warnDue(failing int, lastWarned, now time.Time) bool {
	return failing == 1 || now.Sub(lastWarned) >= warnEvery
}

// keepFor says whether an entry goes to remote: not when it was itself
// replicated (no loops in a full mesh) or when its replicate_to list
// leaves remote out (the client's DisableReplication sends
// ["__local__"]). An entry that does not decode goes: the remote broker
// judges it as the local one did.
func keepFor(remote string, entry []byte) bool {
	meta, _, err := wire.DecodeEntry(entry)
	if err != nil {
		return true
	}
	if meta.GetReplicatedFrom() != "" {
		return false
	}
	if to := meta.GetReplicateTo(); len(to) > 0 && !slices.Contains(to, remote) {
		return false
	}
	return true
}

// add takes an entry received from the replication cursor into the frame
// being gathered for remote: a subscription state joins the states, an
// entry for remote the entries; any other is skipped (true). Every entry
// but a state, skipped or not, moves the position to acknowledge.
func (p *prepared) add(e pulsarconn.Entry, remote string) (skipped bool) {
	switch {
	case e.Control:
		p.states = append(p.states, e.Data)
	case keepFor(remote, e.Data):
		p.entries = append(p.entries, frame.Entry{Pos: frame.Pos{Ledger: e.ID.Ledger, Entry: e.ID.Entry}, Data: e.Data})
		p.raw += len(e.Data)
	default:
		skipped = true
	}
	if !e.Control {
		p.ack, p.hasAck = e.ID, true
	}
	return skipped
}

// pending says whether p holds anything to hand to the session: entries,
// states, or only a position to acknowledge (every entry skipped).
func (p *prepared) pending() bool {
	return len(p.entries)+len(p.states) > 0 || p.hasAck
}

// full says whether p takes no more: maxEntries entries and states, or
// maxBytes raw bytes of entries.
func (p *prepared) full(maxEntries, maxBytes int) bool {
	return len(p.entries)+len(p.states) >= maxEntries || p.raw >= maxBytes
}

// frameRequest is the request carrying a frame of entries of topic
// (body: encoded; raw: their size before compression) from region
// source to region dest.
func frameRequest(source, dest, topicName string, entries []frame.Entry, raw int, body []byte) *nats.Msg {
	msg := nats.NewMsg(Subject(dest, source))
	msg.Data = body
	msg.Header.Set(HeaderSource, source)
	msg.Header.Set(HeaderTopic, topicName)
	msg.Header.Set(HeaderFirst, entries[0].Pos.String())
	msg.Header.Set(HeaderLast, entries[len(entries)-1].Pos.String())
	msg.Header.Set(HeaderCount, strconv.Itoa(len(entries)))
	msg.Header.Set(HeaderRaw, strconv.Itoa(raw))
	return msg
}

// statesRequest is the request carrying n subscription states of topic,
// encoded as one frame (body), from source to dest.
func statesRequest(source, dest, topicName string, n int, body []byte) *nats.Msg {
	msg := nats.NewMsg(Subject(dest, source))
	msg.Data = body
	msg.Header.Set(HeaderSource, source)
	msg.Header.Set(HeaderTopic, topicName)
	msg.Header.Set(HeaderKind, KindSubState)
	msg.Header.Set(HeaderCount, strconv.Itoa(n))
	return msg
}

// probeRequest is the probe of a stream of topic from source to dest.
func probeRequest(source, dest, topicName string) *nats.Msg {
	msg := nats.NewMsg(Subject(dest, source))
	msg.Header.Set(HeaderSource, source)
	msg.Header.Set(HeaderTopic, topicName)
	msg.Header.Set(HeaderKind, KindProbe)
	return msg
}

// refusal is the remote's refusal in a reply, nil when it stored the frame.
func refusal(reply *nats.Msg) error {
	if e := reply.Header.Get(HeaderError); e != "" {
		return &replyError{msg: e, code: reply.Header.Get(HeaderErrorCode)}
	}
	return nil
}

// checkRequest checks what a sink of region learns of a frame from its
// request alone: its source region (another region, matching the
// subject), its topic (persistent) and its kind (entries or states).
func checkRequest(region string, msg *nats.Msg) (string, topic.Name, error) {
	src := msg.Header.Get(HeaderSource)
	if src == "" || src == region {
		return "", topic.Name{}, fmt.Errorf("%w: source region %q", ErrBadFrame, src)
	}
	if want := Subject(region, src); msg.Subject != want {
		return "", topic.Name{}, fmt.Errorf("%w: subject %s does not match source %s", ErrBadFrame, msg.Subject, src)
	}
	name, err := topic.Parse(msg.Header.Get(HeaderTopic))
	if err != nil || name.Domain != topic.Persistent {
		return "", topic.Name{}, fmt.Errorf("%w: topic %q: not a persistent topic name", ErrBadFrame, msg.Header.Get(HeaderTopic))
	}
	if k := msg.Header.Get(HeaderKind); k != "" && k != KindSubState {
		return "", topic.Name{}, fmt.Errorf("%w: unknown kind %q", ErrBadFrame, k)
	}
	return src, name, nil
}

// checkReplicates says whether a topic whose replication clusters are
// clusters replicates between src and region.
func checkReplicates(name topic.Name, src, region string, clusters []string) error {
	if !slices.Contains(clusters, region) || !slices.Contains(clusters, src) {
		return fmt.Errorf("%w: %s does not replicate between %s and %s (replication clusters %v)", ErrBadFrame, name, src, region, clusters)
	}
	return nil
}

// marked is an entry as a sink stores it.
type marked struct {
	data    []byte
	n       int    // messages (a batch's count)
	publish uint64 // publish time, ms
}

// markReplicated re-encodes a frame's entries as replicated from src,
// each with its source position (replication.SourcePositionProperty),
// by which the broker drops a copy it already stored. A frame with an
// entry that does not decode, or that was itself replicated, is refused
// whole.
func markReplicated(src string, entries []frame.Entry) ([]marked, error) {
	outs := make([]marked, len(entries))
	for i, e := range entries {
		meta, payload, err := wire.DecodeEntry(e.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d (%s): %w", ErrBadFrame, i, e.Pos, err)
		}
		if meta.GetReplicatedFrom() != "" {
			return nil, fmt.Errorf("%w: entry %d (%s) is already replicated from %s", ErrBadFrame, i, e.Pos, meta.GetReplicatedFrom())
		}
		meta.ReplicatedFrom = &src
		k, v := replication.SourcePositionProperty, replication.Position{Ledger: e.Pos.Ledger, Entry: e.Pos.Entry}.String()
		meta.Properties = append(meta.Properties, &pb.KeyValue{Key: &k, Value: &v})
		data, err := wire.AppendEntry(nil, meta, payload)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d (%s): %w", ErrBadFrame, i, e.Pos, err)
		}
		n := int(meta.GetNumMessagesInBatch())
		if n <= 0 {
			n = 1
		}
		outs[i] = marked{data: data, n: n, publish: meta.GetPublishTime()}
	}
	return outs, nil
}

// markStates checks a states frame's records (each must decode and be
// marked replication.SubStateProperty with its own subscription's name)
// and re-encodes them as replicated from src. One bad record refuses the
// frame whole.
func markStates(src string, entries []frame.Entry) ([][]byte, error) {
	outs := make([][]byte, len(entries))
	for i, e := range entries {
		meta, payload, err := wire.DecodeEntry(e.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: subscription state %d: %w", ErrBadFrame, i, err)
		}
		var sub string
		for _, kv := range meta.GetProperties() {
			if kv.GetKey() == replication.SubStateProperty {
				sub = kv.GetValue()
			}
		}
		st, err := replication.DecodeSubState(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: subscription state %d: %w", ErrBadFrame, i, err)
		}
		if sub == "" || st.Subscription != sub {
			return nil, fmt.Errorf("%w: subscription state %d: marked %q, for subscription %q", ErrBadFrame, i, sub, st.Subscription)
		}
		meta.ReplicatedFrom = &src
		if outs[i], err = wire.AppendEntry(nil, meta, payload); err != nil {
			return nil, fmt.Errorf("%w: subscription state %d: %w", ErrBadFrame, i, err)
		}
	}
	return outs, nil
}

// probeWaitMax bounds how long a probe waits for its answer, as a
// multiple of ProbeInterval (and never beyond RequestTimeout).
const probeWaitMax = 4

// probeWait is how long the next probe of a remote waits for its answer
// after one waited wait in vain: twice as long, up to probeWaitMax
// ProbeIntervals and RequestTimeout.
func probeWait(wait time.Duration, cfg Config) time.Duration {
	return max(cfg.ProbeInterval, min(2*wait, probeWaitMax*cfg.ProbeInterval, cfg.RequestTimeout))
}
