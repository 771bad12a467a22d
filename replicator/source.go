package replicator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// stream is the source side of one (topic, remote) pair.
type stream struct {
	w      *Worker
	key    streamKey
	st     *StreamStats
	ctx    context.Context
	cancel context.CancelFunc
	enc    *frame.Encoder // plain frames
	ns     string         // the topic's namespace: its dictionary's

	// Used by the stream's goroutine only (run and its session).
	failing int       // failures in a row
	warned  time.Time // last warning
	// denc compresses with the namespace's dictionary in use (nil: none
	// yet). A session assumes the remote holds no dictionary: its first
	// frame with one carries it (carried), and plainOnly is set for the
	// rest of a session whose remote predates dictionaries.
	denc      *frame.Encoder
	carried   map[frame.DictID]bool
	plainOnly bool
}

func newStream(w *Worker, k streamKey, st *StreamStats) *stream {
	ctx, cancel := context.WithCancel(w.ctx)
	var ns string
	if name, err := topic.Parse(k.Topic); err == nil {
		ns = name.NamespaceName()
	}
	return &stream{w: w, key: k, st: st, ctx: ctx, cancel: cancel, enc: frame.NewEncoder(), ns: ns}
}

// run subscribes to the replication cursor and streams frames until the
// stream is cancelled, starting over (from the cursor's mark-delete
// position) after any failure, with backoff.
func (s *stream) run() {
	// Exported at zero before the first failure.
	s.w.metrics.errors.Add(context.Background(), 0, s.w.pairAttrs(s.w.cfg.Region, s.key.Remote, attribute.String("isobar.side", "source")))
	// A stream that stops (it moved to another worker, or is no longer
	// wanted) is not this worker's active one any more; its counters stay.
	defer s.st.update(func(st *StreamStats) { st.Active = false })
	retry := newBackoff(minBackoff, s.w.cfg.MaxBackoff)
	for s.ctx.Err() == nil {
		progressed, err := s.session()
		if s.ctx.Err() != nil {
			return
		}
		if progressed {
			retry.reset()
			s.failing = 0
		}
		if err != nil {
			s.st.update(func(st *StreamStats) { st.Active = false })
			s.failed(err)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(retry.next()):
		}
	}
}

// failed counts a failure of the stream and logs it: the first of a run
// of failures, then every 30s while they go on (never silent). A failure
// within a session (a frame given up while the remote is unreachable)
// leaves the worker the stream's active consumer.
func (s *stream) failed(err error) {
	s.failing++
	s.w.metrics.errors.Add(context.Background(), 1, s.w.pairAttrs(s.w.cfg.Region, s.key.Remote, attribute.String("isobar.side", "source")))
	s.st.update(func(st *StreamStats) {
		st.Errors++
		st.LastError = err.Error()
	})
	if warnDue(s.failing, s.warned, time.Now()) {
		s.warned = time.Now()
		s.w.log.Warn("replication stream failing; retrying", "topic", s.key.Topic, "remote", s.key.Remote, "failures", s.failing, "err", err)
	}
}

// session is one subscription: receive, filter, frame, send, ack.
func (s *stream) session() (progressed bool, err error) {
	// The remote may have restarted, or another of its sinks may answer:
	// dictionaries are carried again.
	s.carried, s.plainOnly = map[frame.DictID]bool{}, false
	co, err := s.w.deps.Source.Subscribe(s.ctx, pulsarconn.SubscribeOptions{
		Topic:           s.key.Topic,
		Subscription:    replication.CursorName(s.key.Remote),
		ConsumerName:    s.w.cfg.ID,
		Type:            pb.CommandSubscribe_Failover,
		InitialPosition: pb.CommandSubscribe_Earliest,
		ReceiverQueue:   s.w.cfg.ReceiverQueue,
	})
	if err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	// Acknowledgements run beside the stream: the next frame does not wait
	// for the cursor to be saved (an ack lost with a crash only means the
	// remote drops a few entries it already has). Only the newest pending
	// position is kept.
	acks := make(chan pulsarconn.MessageID, 1)
	ackDone := make(chan struct{})
	go func() {
		defer close(ackDone)
		for id := range acks {
			actx, cancel := context.WithTimeout(s.ctx, s.w.cfg.RequestTimeout)
			if err := co.AckCumulative(actx, id); err != nil && s.ctx.Err() == nil {
				s.w.log.Debug("replication ack failed", "topic", s.key.Topic, "remote", s.key.Remote, "id", id, "err", err)
			}
			cancel()
		}
	}()
	defer func() {
		close(acks)
		<-ackDone
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = co.Close(ctx)
		cancel()
	}()
	// The next frame is gathered while the current one is in flight and
	// taken the moment it is answered; sending stays one frame at a
	// time, in order.
	gctx, stopGather := context.WithCancel(s.ctx)
	ready := make(chan prepared)
	var gatherErr error
	gatherDone := make(chan struct{})
	go func() {
		defer close(gatherDone)
		defer close(ready)
		gatherErr = s.gather(gctx, co, ready)
	}()
	defer func() {
		stopGather()
		<-gatherDone
	}()
	for p := range ready {
		if err := s.encode(&p); err != nil {
			return progressed, err
		}
		if len(p.states) > 0 {
			// Before the frame: the remote holds a state that acknowledges
			// entries it does not have yet until they come, and then does
			// not deliver them (an old primary's late tail, whose
			// acknowledgements its broker sends first).
			if err := s.requestStates(p.states, p.stateBody); err != nil {
				return progressed, err
			}
		}
		if p.body != nil {
			err := s.request(p)
			if carry, plain := refusedForDict(err, p.carries); p.dict != nil && (carry || plain) {
				// Refused before anything was stored: send it again,
				// carrying its dictionary, or plainly to a remote that
				// predates dictionaries.
				if plain {
					s.w.log.Info("replication: the remote reads no dictionary frames; sending plainly this session", "topic", s.key.Topic, "remote", s.key.Remote)
					s.plainOnly = true
				} else {
					s.w.log.Debug("replication: the remote does not hold the dictionary; sending the frame again carrying it", "topic", s.key.Topic, "remote", s.key.Remote, "dictionary", p.dict.ID())
				}
				if err = s.reencode(&p, carry); err == nil {
					err = s.request(p)
				}
			}
			if err != nil {
				return progressed, err
			}
		}
		if p.hasAck {
			select {
			case <-acks: // replaced by the newer position
			default:
			}
			acks <- p.ack
		}
		progressed = true
	}
	<-gatherDone
	return progressed, gatherErr
}

// prepared is a frame ready to send (body nil when every entry was
// skipped), the position to acknowledge once it is stored (hasAck false
// when only subscription states arrived) and the subscription-state
// records that came with the entries, sent after them.
type prepared struct {
	entries []frame.Entry
	raw     int
	body    []byte
	ack     pulsarconn.MessageID
	hasAck  bool
	states  [][]byte
	// stateBody is the states' frame.
	stateBody []byte

	// The dictionary body is compressed with (nil: none), its version,
	// whether body carries it (carries, by overhead bytes), and the
	// body's size without it (plain; 0: not measured).
	dict     *frame.Dict
	version  int
	carries  bool
	overhead int
	plain    int
}

// gather receives entries, skips those not for the remote, and offers
// what it has gathered to ready until ctx ends or a receive fails. It
// keeps adding what arrives while the current frame is in flight, so the
// next frame, handed over the moment the session can send it, holds
// everything that arrived meanwhile (up to the frame limits): an entry
// waits at most for the frame in flight, not for frames formed earlier.
// The session encodes what it takes.
func (s *stream) gather(ctx context.Context, co Cursor, ready chan<- prepared) error {
	in := make(chan pulsarconn.Entry)
	errc := make(chan error, 1)
	recvDone := make(chan struct{})
	rctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		<-recvDone
	}()
	go func() {
		defer close(recvDone)
		for {
			e, err := co.Receive(rctx)
			if err != nil {
				errc <- err
				return
			}
			select {
			case in <- e:
			case <-rctx.Done():
				errc <- rctx.Err()
				return
			}
		}
	}()
	var (
		p     prepared
		first time.Time // when p's first entry arrived
		delay *time.Timer
	)
	defer func() {
		if delay != nil {
			delay.Stop()
		}
	}()
	for {
		full := p.full(s.w.cfg.FrameEntries, s.w.cfg.FrameBytes)
		var (
			take   <-chan pulsarconn.Entry = in
			offer  chan<- prepared
			waited <-chan time.Time
		)
		if full {
			take = nil
		}
		if p.pending() {
			// FrameDelay (0: none) lets a frame wait for company.
			if wait := s.w.cfg.FrameDelay - time.Since(first); wait > 0 && !full {
				if delay == nil {
					delay = time.NewTimer(wait)
				} else {
					delay.Reset(wait)
				}
				waited = delay.C
			} else {
				offer = ready
			}
		}
		select {
		case e := <-take:
			if !p.pending() {
				first = time.Now()
				s.st.update(func(st *StreamStats) { st.Active = true })
			}
			if p.add(e, s.key.Remote) {
				s.st.update(func(st *StreamStats) { st.Skipped++ })
			}
		case offer <- p:
			p = prepared{}
		case <-waited:
		case err := <-errc:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("receive: %w", err)
		}
	}
}

// encode compresses p's entries and states (by the session, the one
// goroutine that uses the stream's encoders). Entries go with the
// namespace's dictionary once one is trained (unless dictionaries are
// off): the first frame with it in a session carries it.
func (s *stream) encode(p *prepared) error {
	var err error
	if len(p.entries) > 0 {
		var compare bool
		if !s.w.cfg.DictDisabled && !s.plainOnly && s.ns != "" {
			p.dict, p.version, compare = s.w.dictForFrame(s.ns, p.entries)
		}
		if p.dict != nil && (s.denc == nil || s.denc.Dict() != p.dict) {
			if s.denc, err = frame.NewDictEncoder(p.dict, s.w.dicts.level); err != nil {
				return fmt.Errorf("encode frame: %w", err)
			}
		}
		if err := s.reencode(p, p.dict != nil && !s.carried[p.dict.ID()]); err != nil {
			return err
		}
		if compare {
			plain, _, err := s.enc.Encode(nil, p.entries)
			if err != nil {
				return fmt.Errorf("encode frame: %w", err)
			}
			p.plain = len(plain)
		}
	}
	if len(p.states) > 0 {
		// Their frame positions only number them.
		entries := make([]frame.Entry, len(p.states))
		for i, d := range p.states {
			entries[i] = frame.Entry{Pos: frame.Pos{Entry: int64(i)}, Data: d}
		}
		if p.stateBody, _, err = s.enc.Encode(nil, entries); err != nil {
			return fmt.Errorf("encode subscription states: %w", err)
		}
	}
	return nil
}

// reencode compresses p's entries into p.body: with p.dict (carrying it
// if carry) unless the session sends plainly.
func (s *stream) reencode(p *prepared, carry bool) error {
	var err error
	if s.plainOnly || p.dict == nil {
		p.dict, p.version, p.carries, p.overhead, p.plain = nil, 0, false, 0, 0
		p.body, _, err = s.enc.Encode(nil, p.entries)
	} else if carry {
		p.carries = true
		p.overhead = len(p.dict.Bytes()) + len(binary.AppendUvarint(nil, uint64(len(p.dict.Bytes()))))
		p.body, _, err = s.denc.EncodeCarrying(nil, p.entries)
	} else {
		p.carries, p.overhead = false, 0
		p.body, _, err = s.denc.Encode(nil, p.entries)
	}
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	return nil
}

// request sends one frame and waits for the remote's reply.
func (s *stream) request(p prepared) error {
	entries, raw, body := p.entries, p.raw, p.body
	msg := frameRequest(s.w.cfg.Region, s.key.Remote, s.key.Topic, entries, raw, body)
	what := fmt.Sprintf("frame %s..%s to %s", entries[0].Pos, entries[len(entries)-1].Pos, s.key.Remote)
	spans := s.w.traceEntries(entries, "replicate "+s.key.Topic+" to "+s.key.Remote, trace.SpanKindProducer,
		attribute.String("isobar.source", s.w.cfg.Region), attribute.String("isobar.dest", s.key.Remote))
	reply, start, err := s.send(msg, what)
	pair := s.w.pairAttrs(s.w.cfg.Region, s.key.Remote)
	if err == nil && reply.Header.Get(HeaderErrorCode) == CodeUnknownDict {
		// Not a failure: sent again with the dictionary.
	} else if err != nil || reply.Header.Get(HeaderError) != "" {
		s.w.metrics.frames.Add(context.Background(), 1, s.w.pairAttrs(s.w.cfg.Region, s.key.Remote, attribute.String("isobar.result", "error")))
	} else {
		bg := context.Background()
		s.w.metrics.frames.Add(bg, 1, s.w.pairAttrs(s.w.cfg.Region, s.key.Remote, attribute.String("isobar.result", "ok")))
		s.w.metrics.entries.Add(bg, int64(len(entries)), pair)
		s.w.metrics.wire.Add(bg, int64(raw), s.w.pairAttrs(s.w.cfg.Region, s.key.Remote, attribute.String("isobar.encoding", "raw")))
		s.w.metrics.wire.Add(bg, int64(len(body)), s.w.pairAttrs(s.w.cfg.Region, s.key.Remote, attribute.String("isobar.encoding", "zstd")))
		s.w.metrics.roundTrip.Record(bg, time.Since(start).Seconds(), pair)
	}
	if err == nil {
		err = refusal(reply)
	}
	endSpans(spans, err)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p.dict != nil {
		s.carried[p.dict.ID()] = true
		s.w.dictFrameSent(s.ns, p.version, raw, len(body)-p.overhead, p.plain)
	}
	s.st.update(func(st *StreamStats) {
		st.Entries += int64(len(entries))
		st.RawBytes += int64(raw)
		st.WireBytes += int64(len(body))
		st.Frames++
		st.LastProgress = time.Now()
		st.DictVersion = p.version
	})
	return nil
}

// requestStates sends subscription-state records (each a message whose
// payload is a replication.SubState, marked with
// replication.SubStateProperty), encoded as one frame (body), to the
// remote and waits for its reply.
func (s *stream) requestStates(states [][]byte, body []byte) error {
	msg := statesRequest(s.w.cfg.Region, s.key.Remote, s.key.Topic, len(states), body)
	what := fmt.Sprintf("%d subscription states to %s", len(states), s.key.Remote)
	reply, _, err := s.send(msg, what)
	if err == nil {
		err = refusal(reply)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s.st.update(func(st *StreamStats) { st.SubStates += int64(len(states)) })
	return nil
}

// ErrUnreachable is the failure of a request while no sink of the remote
// region is reachable: NATS knows no responder for its subject (the
// remote's NATS is cut off from this region's, or no sink subscribes).
var ErrUnreachable = errors.New("replicator: no sink of the remote region is reachable")

// send sends msg (what names it in errors) until it is answered, and
// returns the reply and when the answered attempt started. While no sink
// of the remote is reachable, it counts a failure, waits until one is
// (awaitRemote) and sends the same msg again, in the same session: the
// next frame cannot overtake it, and the remote broker drops the entries
// of a copy it already stored (a frame given up may still have been
// applied). Any other error ends the session as before.
func (s *stream) send(msg *nats.Msg, what string) (*nats.Msg, time.Time, error) {
	for {
		start := time.Now()
		reply, err := s.exchange(msg)
		if !errors.Is(err, ErrUnreachable) {
			if err == nil && s.failing > 0 {
				s.w.log.Info("replication stream: remote reachable again", "topic", s.key.Topic, "remote", s.key.Remote, "failures", s.failing)
				s.failing = 0
			}
			return reply, start, err
		}
		s.failed(fmt.Errorf("%s: %w", what, err))
		if err := s.awaitRemote(what); err != nil {
			return nil, start, err
		}
	}
}

// exchange sends msg as a request and waits for its reply, up to
// RequestTimeout. From ProbeInterval on it also probes the remote every
// ProbeInterval: when a probe finds no sink reachable, the reply cannot
// come any more (the connection that carried the frame or would carry
// the reply is gone, or nobody holds the frame), so it gives up at once
// with ErrUnreachable rather than at RequestTimeout. A probe answered,
// or not answered within ProbeInterval (a slow link queues it behind the
// frame), keeps the frame waiting: a frame is never given up only for
// being slow while the remote is there.
func (s *stream) exchange(msg *nats.Msg) (*nats.Msg, error) {
	rctx, abandon := context.WithCancelCause(s.ctx)
	defer abandon(nil)
	ctx, cancel := context.WithTimeout(rctx, s.w.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		t := time.NewTimer(s.w.cfg.ProbeInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.probe(ctx, s.w.cfg.ProbeInterval); errors.Is(err, ErrUnreachable) {
				abandon(err)
				return
			}
			t.Reset(s.w.cfg.ProbeInterval)
		}
	}()
	reply, err := s.w.deps.Transport.Request(ctx, msg)
	cancel()
	<-probed
	switch {
	case err == nil:
		return reply, nil
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	case errors.Is(context.Cause(rctx), ErrUnreachable):
		return nil, fmt.Errorf("no reply after %v, and a probe: %w", time.Since(start).Round(time.Millisecond), context.Cause(rctx))
	}
	return nil, err
}

// probe asks the remote's sinks whether they are there: nil when one
// answers (any reply, also a refusal from a sink that predates probes),
// an error wrapping ErrUnreachable when none is reachable, another error
// when no answer came within wait.
func (s *stream) probe(ctx context.Context, wait time.Duration) error {
	msg := probeRequest(s.w.cfg.Region, s.key.Remote, s.key.Topic)
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err := s.w.deps.Transport.Request(pctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// awaitRemote probes the remote until a sink answers: first after
// 100ms, then at intervals doubling up to ProbeInterval, so a stream
// resumes within about ProbeInterval of the remote coming back. A probe
// is a few bytes, and goes no further than the local NATS server while
// no sink is reachable; the frame (what) is sent again only once one
// answered. While it waits it counts a failure every MaxBackoff (as a
// failing session's retries did), so the stream is never silent. A
// probe that gets no answer in time, where one would find no sink
// reachable at once, met a path to a sink that is slow (a long link, or
// probes queued behind other traffic): the next one waits twice as long,
// up to probeWaitMax, so a remote slower than ProbeInterval is still
// found, while a black hole's heal is noticed within probeWaitMax.
func (s *stream) awaitRemote(what string) error {
	pace := newBackoff(min(minBackoff, s.w.cfg.ProbeInterval), s.w.cfg.ProbeInterval)
	wait := s.w.cfg.ProbeInterval
	counted := time.Now() // the failure that sent us here
	for {
		select {
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-time.After(pace.next()):
		}
		err := s.probe(s.ctx, wait)
		if err == nil {
			return nil
		}
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		if !errors.Is(err, ErrUnreachable) {
			wait = probeWait(wait, s.w.cfg)
		}
		if time.Since(counted) >= s.w.cfg.MaxBackoff {
			counted = time.Now()
			s.failed(fmt.Errorf("%s: waiting for the remote: %w", what, err))
		}
	}
}
