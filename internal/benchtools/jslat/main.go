// Command jslat is the JetStream side of scripts/perf-compare.sh: the same
// load shapes as `isobar perf produce|consume`, written with nats.go, so
// that the two systems are measured the same way.
//
//	jslat pub     --server URL --stream S --rate 10000 --duration 20s --window 1000
//	jslat consume --server URL --stream S --count 100000
//
// pub publishes --size-byte messages asynchronously at a fixed --rate (0:
// flat out) from one connection, with at most --window publishes awaiting
// their PubAck; a publish waits for a free slot. Its latency is from just
// before the publish call (slot wait included, as `isobar perf produce`
// times from just before SendAsync, which also blocks when its queue is
// full) to the PubAck's arrival. consume reads the stream through a
// durable pull consumer with explicit acks, acknowledging every message;
// its latency is receive time minus the message's stored time.
//
// Both print one JSON line with the keys of `isobar perf --json`
// (msg_per_sec, latency_ms.p50/p99/p99_9, ...). Progress goes to stderr.
// It is a benchmarking aid, not a product command.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: jslat pub|consume [flags] (-h for the flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "pub":
		err = runPub(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "consume":
		err = runConsume(ctx, os.Args[2:], os.Stdout, os.Stderr)
	default:
		err = fmt.Errorf("unknown command %q: want pub or consume", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jslat:", err)
		os.Exit(1)
	}
}

// summary has the fields and JSON keys of `isobar perf`'s perfSummary.
type summary struct {
	Topic       string         `json:"topic"`
	Messages    int64          `json:"messages"`
	Bytes       int64          `json:"bytes"`
	Errors      int64          `json:"errors"`
	Seconds     float64        `json:"seconds"`
	MsgPerSec   float64        `json:"msg_per_sec"`
	MBPerSec    float64        `json:"mb_per_sec"`
	LatencyKind string         `json:"latency_kind"`
	Latency     latencySummary `json:"latency_ms"`
}

func newSummary(stream, kind string, msgs, bytes, errs int64, elapsed time.Duration, lat *samples) summary {
	s := summary{
		Topic: stream, Messages: msgs, Bytes: bytes, Errors: errs,
		Seconds: round3(elapsed.Seconds()), LatencyKind: kind, Latency: lat.summarize(),
	}
	if secs := elapsed.Seconds(); secs > 0 {
		s.MsgPerSec = round3(float64(msgs) / secs)
		s.MBPerSec = round3(float64(bytes) / secs / 1e6)
	}
	return s
}

// common are the flags of both commands.
type common struct {
	server   string
	stream   string
	replicas int
	duration time.Duration
	count    int64
}

func (c *common) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", nats.DefaultURL, "NATS URL(s), comma-separated")
	fs.StringVar(&c.stream, "stream", "jslat", "stream name; its subject is the same name (created if missing)")
	fs.IntVar(&c.replicas, "replicas", 3, "replicas of a stream created here (file storage)")
	fs.DurationVar(&c.duration, "duration", 0, "run time (0: until --count or an interrupt)")
	fs.Int64Var(&c.count, "count", 0, "stop after this many messages (0: no limit)")
}

func (c *common) validate() []error {
	var errs []error
	if c.stream == "" {
		errs = append(errs, errors.New("--stream must not be empty"))
	}
	if c.replicas < 1 || c.replicas > 5 {
		errs = append(errs, fmt.Errorf("--replicas: %d is not in 1..5", c.replicas))
	}
	if c.duration < 0 || c.count < 0 {
		errs = append(errs, errors.New("--duration and --count must not be negative"))
	}
	if c.duration == 0 && c.count == 0 {
		errs = append(errs, errors.New("give --duration or --count"))
	}
	return errs
}

// connect opens the connection and the stream (creating it if missing).
func (c *common) connect(ctx context.Context, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, jetstream.Stream, error) {
	nc, err := nats.Connect(c.server, nats.Name("jslat"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect %s: %w", c.server, err)
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := js.CreateOrUpdateStream(sctx, jetstream.StreamConfig{
		Name: c.stream, Subjects: []string{c.stream}, Storage: jetstream.FileStorage, Replicas: c.replicas,
	})
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("stream %s: %w", c.stream, err)
	}
	return nc, js, st, nil
}

// runCtx ends at --duration (if set) or with ctx.
func (c *common) runCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.duration > 0 {
		return context.WithTimeout(ctx, c.duration)
	}
	return context.WithCancel(ctx)
}

// pubState is what the ack handlers and the publishing loop share.
type pubState struct {
	start time.Time     // monotonic origin of the send offsets in payloads
	slots chan struct{} // one token per publish awaiting its PubAck
	mu    sync.Mutex    // guards the fields below
	lat   samples
	acked int64
	errs  int64
	first error
}

func (p *pubState) acked1(m *nats.Msg) {
	d := time.Since(p.start) - time.Duration(binary.BigEndian.Uint64(m.Data))
	p.mu.Lock()
	p.lat.add(d)
	p.acked++
	p.mu.Unlock()
	<-p.slots
}

func (p *pubState) failed1(err error) {
	p.mu.Lock()
	p.errs++
	if p.first == nil {
		p.first = err
	}
	p.mu.Unlock()
	<-p.slots
}

func runPub(ctx context.Context, args []string, out, progress io.Writer) error {
	fs := flag.NewFlagSet("jslat pub", flag.ContinueOnError)
	var c common
	c.bind(fs)
	rate := fs.Float64("rate", 0, "messages per second (0: as fast as the window allows)")
	size := fs.Int("size", 1024, "payload bytes (at least 16: send time and sequence number lead)")
	window := fs.Int("window", 1000, "publishes awaiting their PubAck at most")
	purge := fs.Bool("purge", false, "purge the stream first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	errs := c.validate()
	if *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0) {
		errs = append(errs, fmt.Errorf("--rate: %v must be 0 or positive", *rate))
	}
	if *size < 16 || *size > 8<<20 {
		errs = append(errs, fmt.Errorf("--size: %d is not in 16..%d", *size, 8<<20))
	}
	if *window < 1 {
		errs = append(errs, fmt.Errorf("--window: %d must be at least 1", *window))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p := &pubState{slots: make(chan struct{}, *window)}
	nc, js, st, err := c.connect(ctx,
		jetstream.WithPublishAsyncMaxPending(*window+1), // the slots limit first
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { p.acked1(m) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { p.failed1(err) }))
	if err != nil {
		return err
	}
	defer nc.Close()
	if *purge {
		if err := st.Purge(ctx); err != nil {
			return fmt.Errorf("purge %s: %w", c.stream, err)
		}
	}
	// Random filler, so that nothing downstream sees repeating bytes.
	filler := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range filler {
		filler[i] = byte('a' + r.IntN(26))
	}
	run, cancel := c.runCtx(ctx)
	defer cancel()
	stopReport := report(progress, "pub", func() (int64, int64) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.acked, p.errs
	})
	p.start = time.Now()
	var sent int64
	for k := int64(0); c.count == 0 || k < c.count; k++ {
		if run.Err() != nil {
			break
		}
		if *rate > 0 {
			due := p.start.Add(time.Duration(float64(k) / *rate * float64(time.Second)))
			if !sleepUntil(run, due) {
				break
			}
		}
		data := make([]byte, *size)
		off := int(k*16) % (len(filler) - *size)
		copy(data[16:], filler[off:])
		binary.BigEndian.PutUint64(data[8:16], uint64(k))
		t := time.Since(p.start) // before the slot wait, as isobar perf times before SendAsync
		binary.BigEndian.PutUint64(data[0:8], uint64(t))
		select {
		case p.slots <- struct{}{}:
		case <-run.Done():
		}
		if run.Err() != nil {
			break
		}
		if _, err := js.PublishAsync(c.stream, data); err != nil {
			p.failed1(err)
			continue
		}
		sent++
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		fmt.Fprintf(progress, "pub: %d publishes still without a PubAck after 30 s\n", js.PublishAsyncPending())
	}
	elapsed := time.Since(p.start)
	stopReport()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first != nil {
		fmt.Fprintf(progress, "pub: first error: %v\n", p.first)
	}
	s := newSummary(c.stream, "publish", p.acked, p.acked*int64(*size), p.errs, elapsed, &p.lat)
	if err := json.NewEncoder(out).Encode(s); err != nil {
		return err
	}
	if p.errs > 0 {
		return fmt.Errorf("%d of %d publishes failed", p.errs, sent)
	}
	return nil
}

func runConsume(ctx context.Context, args []string, out, progress io.Writer) error {
	fs := flag.NewFlagSet("jslat consume", flag.ContinueOnError)
	var c common
	c.bind(fs)
	durable := fs.String("durable", "jslat", "durable pull consumer's name (created if missing, delivering from the start)")
	batch := fs.Int("batch", 500, "messages per pull request (PullMaxMessages)")
	maxAck := fs.Int("max-ack-pending", 10000, "the consumer's MaxAckPending")
	if err := fs.Parse(args); err != nil {
		return err
	}
	errs := c.validate()
	if *batch < 1 || *maxAck < 1 {
		errs = append(errs, errors.New("--batch and --max-ack-pending must be at least 1"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	nc, _, st, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	cons, err := st.CreateOrUpdateConsumer(cctx, jetstream.ConsumerConfig{
		Durable: *durable, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: *maxAck,
	})
	ccancel()
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", *durable, c.stream, err)
	}
	run, cancel := c.runCtx(ctx)
	defer cancel()
	var (
		mu    sync.Mutex // guards n and errN for the reporter
		n     int64
		errN  int64
		bytes int64
		lat   samples
	)
	stopReport := report(progress, "consume", func() (int64, int64) {
		mu.Lock()
		defer mu.Unlock()
		return n, errN
	})
	start := time.Now()
	it, err := cons.Messages(jetstream.PullMaxMessages(*batch))
	if err != nil {
		stopReport()
		return err
	}
	stopIt := context.AfterFunc(run, it.Stop) // Next returns once the run ends
	defer stopIt()
	var firstErr error
	for c.count == 0 || n < c.count {
		m, err := it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				firstErr = err
			}
			break
		}
		now := time.Now()
		if md, err := m.Metadata(); err == nil {
			lat.add(now.Sub(md.Timestamp))
		}
		bytes += int64(len(m.Data()))
		aerr := m.Ack()
		mu.Lock()
		n++
		if aerr != nil {
			errN++
			if firstErr == nil {
				firstErr = aerr
			}
		}
		mu.Unlock()
	}
	it.Stop()
	if err := nc.FlushTimeout(10 * time.Second); err != nil { // the acks have left
		fmt.Fprintf(progress, "consume: flush: %v\n", err)
	}
	elapsed := time.Since(start)
	stopReport()
	if firstErr != nil {
		fmt.Fprintf(progress, "consume: first error: %v\n", firstErr)
	}
	mu.Lock()
	defer mu.Unlock()
	return json.NewEncoder(out).Encode(newSummary(c.stream, "end_to_end", n, bytes, errN, elapsed, &lat))
}

// report prints counts per second every 5 s until the returned function is
// called (which waits for the goroutine).
func report(w io.Writer, what string, counts func() (msgs, errs int64)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n, e := counts()
				fmt.Fprintf(w, "%s: %9.1f msg/s, %d errors\n", what, float64(n-last)/5, e)
				last = n
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// sleepUntil waits for t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
