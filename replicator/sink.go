package replicator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// sinkProducer is the replicator producer of one (topic, source) pair.
// Its mutex serializes the frames applied through it.
type sinkProducer struct {
	mu  sync.Mutex
	p   *pulsarconn.Producer
	seq uint64
}

func (s *sinkProducer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.p.Close(ctx)
		cancel()
		s.p = nil
	}
}

// onFrame answers one frame request; the work runs off the NATS
// delivery goroutine, at most SinkConcurrency frames at once.
func (w *Worker) onFrame(msg *nats.Msg) {
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.sem }()
		reply := nats.NewMsg(msg.Reply)
		if err := w.apply(msg); err != nil {
			w.metrics.errors.Add(context.Background(), 1, w.pairAttrs(msg.Header.Get(HeaderSource), w.cfg.Region, attribute.String("isobar.side", "sink")))
			w.log.Debug("frame refused", "source", msg.Header.Get(HeaderSource), "topic", msg.Header.Get(HeaderTopic), "err", err)
			reply.Header.Set(HeaderError, err.Error())
		}
		if msg.Reply != "" {
			_ = msg.RespondMsg(reply)
		}
	}()
}

// ErrBadFrame wraps every reason a sink refuses a frame before applying
// any of it.
var ErrBadFrame = errors.New("replicator: bad frame")

// apply checks a whole frame, then stores its entries in order through the
// (topic, source) replicator producer. Nothing is stored unless every
// entry decodes; entries the broker already has are dropped by it.
func (w *Worker) apply(msg *nats.Msg) error {
	src := msg.Header.Get(HeaderSource)
	if src == "" || src == w.cfg.Region {
		return fmt.Errorf("%w: source region %q", ErrBadFrame, src)
	}
	if want := Subject(w.cfg.Region, src); msg.Subject != want {
		return fmt.Errorf("%w: subject %s does not match source %s", ErrBadFrame, msg.Subject, src)
	}
	name, err := topic.Parse(msg.Header.Get(HeaderTopic))
	if err != nil || name.Domain != topic.Persistent {
		return fmt.Errorf("%w: topic %q: not a persistent topic name", ErrBadFrame, msg.Header.Get(HeaderTopic))
	}
	entries, err := w.dec.Decode(msg.Data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	if len(entries) == 0 {
		return fmt.Errorf("%w: no entries", ErrBadFrame)
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.RequestTimeout)
	defer cancel()
	clusters, err := w.deps.Policies.ReplicationClusters(ctx, name)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name.NamespaceName(), err)
	}
	if !slices.Contains(clusters, w.cfg.Region) || !slices.Contains(clusters, src) {
		return fmt.Errorf("%w: %s does not replicate between %s and %s (replication clusters %v)", ErrBadFrame, name, src, w.cfg.Region, clusters)
	}
	// Mark each entry replicated from src at its source position; a frame
	// with an entry that does not decode is refused whole.
	type out struct {
		data    []byte
		n       int
		publish uint64 // ms
	}
	outs := make([]out, len(entries))
	for i, e := range entries {
		meta, payload, err := wire.DecodeEntry(e.Data)
		if err != nil {
			return fmt.Errorf("%w: entry %d (%s): %w", ErrBadFrame, i, e.Pos, err)
		}
		if meta.GetReplicatedFrom() != "" {
			return fmt.Errorf("%w: entry %d (%s) is already replicated from %s", ErrBadFrame, i, e.Pos, meta.GetReplicatedFrom())
		}
		meta.ReplicatedFrom = &src
		k, v := replication.SourcePositionProperty, replication.Position{Ledger: e.Pos.Ledger, Entry: e.Pos.Entry}.String()
		meta.Properties = append(meta.Properties, &pb.KeyValue{Key: &k, Value: &v})
		data, err := wire.AppendEntry(nil, meta, payload)
		if err != nil {
			return fmt.Errorf("%w: entry %d (%s): %w", ErrBadFrame, i, e.Pos, err)
		}
		n := int(meta.GetNumMessagesInBatch())
		if n <= 0 {
			n = 1
		}
		outs[i] = out{data: data, n: n, publish: meta.GetPublishTime()}
	}
	spans := w.traceEntries(entries, "replicate apply "+name.String()+" from "+src, trace.SpanKindConsumer,
		attribute.String("isobar.source", src), attribute.String("isobar.dest", w.cfg.Region))
	var applyErr error
	defer func() { endSpans(spans, applyErr) }()
	sp := w.sinkProducer(sinkKey{Topic: name.String(), Source: src})
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p == nil {
		p, err := w.client.CreateProducer(ctx, pulsarconn.ProducerOptions{
			Topic: name.String(),
			Name:  replication.ProducerName(src, w.cfg.ID),
		})
		if err != nil {
			return fmt.Errorf("producer for %s: %w", name, err)
		}
		sp.p = p
	}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for i, o := range outs {
		sp.seq++
		id := pulsarconn.MessageID{Ledger: entries[i].Pos.Ledger, Entry: entries[i].Pos.Entry}
		wg.Add(1)
		sp.p.SendAsync(o.data, sp.seq, o.n, &id, func(_ pulsarconn.MessageID, err error) {
			defer wg.Done()
			if err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		// A fresh producer next time: the broker may have closed this one.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = sp.p.Close(cctx)
		cancel()
		sp.p = nil
		applyErr = fmt.Errorf("store on %s: %w", name, first)
		return applyErr
	}
	now := time.Now()
	pair := w.pairAttrs(src, w.cfg.Region)
	w.metrics.errors.Add(context.Background(), 0, w.pairAttrs(src, w.cfg.Region, attribute.String("isobar.side", "sink")))
	for _, o := range outs {
		if o.publish > 0 {
			w.metrics.lag.Record(context.Background(), max(0, now.Sub(time.UnixMilli(int64(o.publish))).Seconds()), pair)
		}
	}
	return nil
}

func (w *Worker) sinkProducer(k sinkKey) *sinkProducer {
	w.mu.Lock()
	defer w.mu.Unlock()
	sp := w.sinks[k]
	if sp == nil {
		sp = &sinkProducer{}
		w.sinks[k] = sp
	}
	return sp
}
