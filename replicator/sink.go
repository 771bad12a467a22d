package replicator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
)

// sinkProducer is the replicator producer of one (topic, source) pair.
// Its mutex serializes the frames applied through it.
type sinkProducer struct {
	mu  sync.Mutex
	p   Writer
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
// delivery goroutine, at most SinkConcurrency frames at once. A probe is
// answered at once, on the delivery goroutine (it waits there only
// behind frames waiting for a free slot).
func (w *Worker) onFrame(msg *nats.Msg, respond func(*nats.Msg)) {
	if msg.Header.Get(HeaderKind) == KindProbe {
		respond(nil)
		return
	}
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
		err := w.apply(msg)
		if errors.Is(err, frame.ErrUnknownDict) {
			// Not a failure: the source sends the frame again with
			// its dictionary (the sink restarted, or another sink
			// of the queue group got the frames that carried it).
			reply.Header.Set(HeaderError, err.Error())
			reply.Header.Set(HeaderErrorCode, CodeUnknownDict)
			respond(reply)
			return
		}
		if err != nil {
			w.metrics.errors.Add(context.Background(), 1, w.pairAttrs(msg.Header.Get(HeaderSource), w.cfg.Region, attribute.String("isobar.side", "sink")))
			w.log.Debug("frame refused", "source", msg.Header.Get(HeaderSource), "topic", msg.Header.Get(HeaderTopic), "err", err)
			reply.Header.Set(HeaderError, err.Error())
		}
		respond(reply)
	}()
}

// ErrBadFrame wraps every reason a sink refuses a frame before applying
// any of it.
var ErrBadFrame = errors.New("replicator: bad frame")

// apply checks a whole frame, then stores its entries in order through the
// (topic, source) replicator producer. Nothing is stored unless every
// entry decodes; entries the broker already has are dropped by it.
func (w *Worker) apply(msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.RequestTimeout)
	defer cancel()
	src, name, entries, err := w.checkFrame(ctx, msg)
	if err != nil {
		return err
	}
	if msg.Header.Get(HeaderKind) == KindSubState {
		return w.applyStates(ctx, src, name, entries)
	}
	return w.applyEntries(ctx, src, name, entries)
}

// checkFrame checks a frame's source, subject and topic, decodes its
// entries and checks that the topic replicates between its source and
// this region.
func (w *Worker) checkFrame(ctx context.Context, msg *nats.Msg) (string, topic.Name, []frame.Entry, error) {
	bad := func(err error) (string, topic.Name, []frame.Entry, error) { return "", topic.Name{}, nil, err }
	src, name, err := checkRequest(w.cfg.Region, msg)
	if err != nil {
		return bad(err)
	}
	entries, carried, err := w.dec.DecodeDict(msg.Data, w.dicts.known)
	if err != nil {
		return bad(fmt.Errorf("%w: %w", ErrBadFrame, err))
	}
	if carried != nil {
		w.dicts.keep(carried)
	}
	if len(entries) == 0 {
		return bad(fmt.Errorf("%w: no entries", ErrBadFrame))
	}
	clusters, err := w.deps.Policies.ReplicationClusters(ctx, name)
	if err != nil {
		return bad(fmt.Errorf("namespace %s: %w", name.NamespaceName(), err))
	}
	if err := checkReplicates(name, src, w.cfg.Region, clusters); err != nil {
		return bad(err)
	}
	if w.deps.Deletes != nil {
		// What was deleted never comes back: not from a copy still being
		// deleted, nor from one deleted since (its ledgers are below the
		// source's bound).
		recs, err := w.deps.Deletes.Covering(ctx, name)
		if err != nil {
			return bad(fmt.Errorf("deletes of %s: %w", name, err))
		}
		var ledgers []int64
		if msg.Header.Get(HeaderKind) != KindSubState {
			for _, e := range entries {
				ledgers = append(ledgers, e.Pos.Ledger)
			}
		}
		for _, r := range recs {
			if err := r.RefuseFrame(src, ledgers); err != nil {
				return bad(err)
			}
		}
	}
	return src, name, entries, nil
}

// applyEntries stores a frame's entries in order through the (topic,
// source) replicator producer.
func (w *Worker) applyEntries(ctx context.Context, src string, name topic.Name, entries []frame.Entry) error {
	outs, err := markReplicated(src, entries)
	if err != nil {
		return err
	}
	spans := w.traceEntries(entries, "replicate apply "+name.String()+" from "+src, trace.SpanKindConsumer,
		attribute.String("isobar.source", src), attribute.String("isobar.dest", w.cfg.Region))
	var applyErr error
	defer func() { endSpans(spans, applyErr) }()
	sp := w.sinkProducer(sinkKey{Topic: name.String(), Source: src})
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.open(ctx, w, name, src); err != nil {
		return err
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
		sp.discardLocked()
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

// open creates the producer unless it is open. sp.mu held.
func (sp *sinkProducer) open(ctx context.Context, w *Worker, name topic.Name, src string) error {
	if sp.p != nil {
		return nil
	}
	p, err := w.deps.Sink.CreateProducer(ctx, pulsarconn.ProducerOptions{
		Topic: name.String(),
		Name:  replication.ProducerName(src, w.cfg.ID),
	})
	if err != nil {
		return fmt.Errorf("producer for %s: %w", name, err)
	}
	sp.p = p
	return nil
}

// discardLocked closes the producer after a failed send: a fresh one next
// time, since the broker may have closed this one. sp.mu held.
func (sp *sinkProducer) discardLocked() {
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = sp.p.Close(cctx)
	cancel()
	sp.p = nil
}

// applyStates hands subscription-state records to the topic's broker
// through the (topic, source) replicator producer, which answers them
// without storing them (docs/failover.md). Each is checked first; the
// frame is refused whole if one is malformed.
func (w *Worker) applyStates(ctx context.Context, src string, name topic.Name, entries []frame.Entry) error {
	outs, err := markStates(src, entries)
	if err != nil {
		return err
	}
	sp := w.sinkProducer(sinkKey{Topic: name.String(), Source: src})
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.open(ctx, w, name, src); err != nil {
		return err
	}
	errs := make(chan error, len(outs))
	for _, o := range outs {
		sp.seq++
		sp.p.SendAsync(o, sp.seq, 1, nil, func(_ pulsarconn.MessageID, err error) { errs <- err })
	}
	var first error
	for range outs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		sp.discardLocked()
		return fmt.Errorf("subscription states on %s: %w", name, first)
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
