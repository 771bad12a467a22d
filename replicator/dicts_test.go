package replicator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/isobar-mq/isobar/internal/payloadgen"
	"github.com/isobar-mq/isobar/replicator/frame"
	"github.com/isobar-mq/isobar/replicator/zdict"
)

// orders adds n messages of the payload set to cur at once (so that
// they make one frame) and returns their payloads.
func orders(t testing.TB, cur *fakeCursor, gen *payloadgen.Generator, n int) []string {
	var out []string
	for range n {
		out = append(out, string(gen.Next()))
	}
	cur.add(t, out...)
	return out
}

// frameVersion is the version and flags of the frame a request carries.
func frameVersion(c *call) (version, flags byte) { return c.msg.Data[4], c.msg.Data[5] }

// The namespace's first entries train a dictionary; the next frames are
// compressed with it, the first of them carrying it. A sink that
// restarts (it holds no dictionary) refuses the next frame as naming an
// unknown dictionary, which is sent again carrying it: nothing fails,
// everything is stored once, in order.
func TestDictionaryTrainedCarriedAndResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers, cur := &fakeNet{}, newFakeBrokers(), newFakeCursor()
		b := sinkB(t, Config{}, net, brokers)
		a := testWorker(t, "a", Config{FrameDelay: 10 * time.Millisecond, FrameEntries: 10, DictSamples: 16}, net, cur, nil)
		defer a.Close()
		startStream(a, "b")
		gen := payloadgen.New(payloadgen.Orders, 1)
		var want []string
		send := func(n int) {
			want = append(want, orders(t, cur, gen, n)...)
			waitStored(t, brokers, want, 5*time.Second)
		}
		send(20)
		synctest.Wait() // training runs off the stream
		send(10)
		if st := stats(a); st.DictVersion != 1 {
			t.Fatalf("stats %+v: want frames with dictionary version 1", st)
		}
		if n := b.dicts.held(); n != 1 {
			t.Fatalf("sink holds %d dictionaries, want the one carried", n)
		}

		b.Close()
		b2 := sinkB(t, Config{}, net, brokers)
		defer b2.Close()
		send(10)
		if st := stats(a); st.DictVersion != 1 || st.Errors != 0 {
			t.Fatalf("stats %+v: want version 1 and no failures", st)
		}
		if n := b2.dicts.held(); n != 1 {
			t.Fatalf("restarted sink holds %d dictionaries, want the one sent again", n)
		}
		brokers.mu.Lock()
		dups := brokers.dups
		brokers.mu.Unlock()
		if dups != 0 {
			t.Fatalf("%d copies dropped: a refused frame stored something", dups)
		}
	})
}

// trained waits until a's namespace has a dictionary.
func trained(t *testing.T, a *Worker) {
	t.Helper()
	synctest.Wait()
	for _, d := range a.dictStatuses() {
		if d.version > 0 {
			return
		}
	}
	t.Fatal("no dictionary trained")
}

// Frame by frame, as the remote sees them: the first with the dictionary
// in a session carries it, the next only name it; refused as unknown,
// a frame is sent again carrying it; a new session carries it again.
func TestDictionaryCarriedOncePerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, cur := newFakeRemote(), newFakeCursor()
		a := testWorker(t, "a", Config{FrameDelay: 10 * time.Millisecond, FrameEntries: 8, DictSamples: 8}, remote, cur, nil)
		defer a.Close()
		startStream(a, "b")
		gen := payloadgen.New(payloadgen.Logs, 2)

		orders(t, cur, gen, 8)
		c := remote.next(t, time.Second)
		if v, _ := frameVersion(c); v != 1 {
			t.Fatalf("frame before training: version %d", v)
		}
		c.ok()
		trained(t, a)

		orders(t, cur, gen, 8)
		c = remote.next(t, time.Second)
		if v, f := frameVersion(c); v != 2 || f != 0x07 {
			t.Fatalf("first dictionary frame: version %d flags %#x, want 2 carrying (0x07)", v, f)
		}
		c.ok()
		orders(t, cur, gen, 8)
		c = remote.next(t, time.Second)
		if v, f := frameVersion(c); v != 2 || f != 0x03 {
			t.Fatalf("next frame: version %d flags %#x, want 2 naming (0x03)", v, f)
		}
		m := nats.NewMsg("")
		m.Header.Set(HeaderError, "replicator: bad frame: frame: unknown dictionary: x")
		m.Header.Set(HeaderErrorCode, CodeUnknownDict)
		first := c.msg.Header.Get(HeaderFirst)
		c.reply <- m
		c = remote.next(t, time.Second)
		if _, f := frameVersion(c); f != 0x07 || c.msg.Header.Get(HeaderFirst) != first {
			t.Fatalf("sent again: flags %#x from %s, want the same frame carrying (0x07) from %s", f, c.msg.Header.Get(HeaderFirst), first)
		}
		c.ok()

		// Another refusal ends the session; the next one carries the
		// dictionary again from its first frame.
		orders(t, cur, gen, 8)
		c = remote.next(t, time.Second)
		c.refuse("store failed")
		c = remote.next(t, 5*time.Second)
		if _, f := frameVersion(c); f != 0x07 {
			t.Fatalf("first frame of a new session: flags %#x, want carrying (0x07)", f)
		}
		c.ok()
		if st := stats(a); st.Errors != 1 {
			t.Fatalf("stats %+v: want only the store failure counted", st)
		}
	})
}

// A remote that predates dictionaries refuses version 2 frames: the
// frame is sent again plainly, and so is the rest of the session.
func TestDictionaryOldSinkGetsPlainFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, cur := newFakeRemote(), newFakeCursor()
		a := testWorker(t, "a", Config{FrameDelay: 10 * time.Millisecond, FrameEntries: 8, DictSamples: 8}, remote, cur, nil)
		defer a.Close()
		startStream(a, "b")
		gen := payloadgen.New(payloadgen.Users, 3)
		orders(t, cur, gen, 8)
		remote.next(t, time.Second).ok()
		trained(t, a)

		want := orders(t, cur, gen, 8)
		c := remote.next(t, time.Second)
		if v, _ := frameVersion(c); v != 2 {
			t.Fatalf("version %d, want 2", v)
		}
		// What a sink of the previous release answers.
		c.refuse("replicator: bad frame: frame: corrupt: unsupported version 2")
		c = remote.next(t, time.Second)
		if v, _ := frameVersion(c); v != 1 || !slices.Equal(c.payloads(t), want) {
			t.Fatalf("sent again as version %d with %d entries, want the same entries in version 1", v, len(c.payloads(t)))
		}
		c.ok()
		orders(t, cur, gen, 8)
		c = remote.next(t, time.Second)
		if v, _ := frameVersion(c); v != 1 {
			t.Fatalf("next frame of the session: version %d, want 1", v)
		}
		c.ok()
		if st := stats(a); st.Errors != 0 {
			t.Fatalf("stats %+v: want no failures", st)
		}
	})
}

// With dictionaries off every frame is version 1.
func TestDictionaryDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, cur := newFakeRemote(), newFakeCursor()
		a := testWorker(t, "a", Config{FrameDelay: 10 * time.Millisecond, FrameEntries: 8, DictSamples: 8, DictDisabled: true}, remote, cur, nil)
		defer a.Close()
		startStream(a, "b")
		gen := payloadgen.New(payloadgen.Telemetry, 4)
		for range 4 {
			orders(t, cur, gen, 8)
			c := remote.next(t, time.Second)
			if v, _ := frameVersion(c); v != 1 {
				t.Fatalf("version %d with dictionaries off", v)
			}
			c.ok()
			synctest.Wait()
		}
		if len(a.dictStatuses()) != 0 {
			t.Fatal("dictionaries off, yet a namespace was sampled")
		}
	})
}

// A sink refuses a frame naming a dictionary it does not hold with
// CodeUnknownDict (not counted as a failure), and stores nothing of it.
func TestSinkUnknownDictionary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers := &fakeNet{}, newFakeBrokers()
		w := sinkB(t, Config{}, net, brokers)
		defer w.Close()
		msgs := payloadgen.New(payloadgen.Orders, 5).Messages(64)
		data, err := zdict.Train("t/ns", 1, msgs, zdict.Policy{}, zstd.SpeedFastest)
		if err != nil {
			t.Fatal(err)
		}
		d, err := frame.NewDict(data, frame.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		enc, err := frame.NewDictEncoder(d, zstd.SpeedFastest)
		if err != nil {
			t.Fatal(err)
		}
		msg := frameOf(t, "a", 0, entry(t, "m0"))
		msg.Data, _, _ = enc.Encode(nil, []frame.Entry{{Pos: frame.Pos{Ledger: 1, Entry: 0}, Data: entry(t, "m0")}})
		reply, err := net.Request(t.Context(), msg)
		if err != nil {
			t.Fatal(err)
		}
		var re *replyError
		if err := refusal(reply); !errors.As(err, &re) || re.code != CodeUnknownDict {
			t.Fatalf("refusal %v, want code %s", err, CodeUnknownDict)
		}
		if got := brokers.payloads(t); len(got) != 0 {
			t.Fatalf("stored %v", got)
		}
		msg.Data, _, _ = enc.EncodeCarrying(nil, []frame.Entry{{Pos: frame.Pos{Ledger: 1, Entry: 0}, Data: entry(t, "m0")}})
		if err := ask(t, net, msg); err != nil {
			t.Fatal(err)
		}
		if got := brokers.payloads(t); !slices.Equal(got, []string{"m0"}) {
			t.Fatalf("stored %v", got)
		}
	})
}

// The sink's dictionaries are bounded; the least recently used goes.
func TestSinkDictionariesBounded(t *testing.T) {
	ds := newDictionaries(Config{DictCache: 2}, frame.Limits{})
	var dicts []*frame.Dict
	for i, s := range []payloadgen.Shape{payloadgen.Orders, payloadgen.Logs, payloadgen.Users} {
		data, err := zdict.Train("t/ns", i+1, payloadgen.New(s, 1).Messages(32), zdict.Policy{}, zstd.SpeedFastest)
		if err != nil {
			t.Fatal(err)
		}
		d, err := frame.NewDict(data, frame.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		dicts = append(dicts, d)
	}
	ds.keep(dicts[0])
	ds.keep(dicts[1])
	ds.known(dicts[0].ID()) // 0 used after 1
	ds.keep(dicts[2])
	if ds.held() != 2 || ds.known(dicts[1].ID()) != nil || ds.known(dicts[0].ID()) != dicts[0] || ds.known(dicts[2].ID()) != dicts[2] {
		t.Fatalf("held %d; want 0 and 2, 1 dropped", ds.held())
	}
}

func TestConfigValidatesDictionaries(t *testing.T) {
	base := Config{Region: "a", ID: "w", ServiceURL: "pulsar://x:6650"}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := base
	bad.DictBytes, bad.DictSamples, bad.DictDrift, bad.DictCache, bad.DictLevel = 256<<10, 3, 1.5, -1, "max"
	err := bad.Validate()
	for _, want := range []string{`replicator.dictLevel: "max" is not fastest, default or better`, "replicator.dictBytes: 262144 exceeds 131072", "replicator.dictSamples: 3 is under 8", "replicator.dictDrift: 1.5 is not in [0, 1)", "replicator.dictCache: -1 is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}

// The dictionary metrics: version in use, ratio and gain per namespace,
// trainings by result.
func TestDictionaryMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		net, brokers, cur := &fakeNet{}, newFakeBrokers(), newFakeCursor()
		b := sinkB(t, Config{}, net, brokers)
		defer b.Close()
		a, err := newWorker(Config{Region: "a", ID: "a-w1", ServiceURL: "pulsar://unused:6650", FrameDelay: 10 * time.Millisecond, FrameEntries: 5, DictSamples: 8}, Deps{
			Transport: net, Meta: nopMeta{}, Policies: fakePolicies{clusters: []string{"a", "b", "c"}},
			Source: cur, Sink: newFakeBrokers(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		startStream(a, "b")
		gen := payloadgen.New(payloadgen.Orders, 6)
		var want []string
		// 8 samples, then 110 frames of 5 (11 compared ones: a gain).
		for range 2 + 110 {
			want = append(want, orders(t, cur, gen, 5)...)
			waitStored(t, brokers, want, 5*time.Second)
			synctest.Wait()
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, p := range d.DataPoints {
						if ns, _ := p.Attributes.Value("isobar.namespace"); ns.AsString() == "t/ns" {
							got[m.Name] = float64(p.Value)
						}
					}
				case metricdata.Gauge[float64]:
					for _, p := range d.DataPoints {
						if ns, _ := p.Attributes.Value("isobar.namespace"); ns.AsString() == "t/ns" {
							got[m.Name] = p.Value
						}
					}
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						if r, _ := p.Attributes.Value("isobar.result"); m.Name == MetricDictTrainings && r.AsString() == "ok" {
							got[m.Name] = float64(p.Value)
						}
					}
				}
			}
		}
		t.Logf("%v", got)
		if got[MetricDictVersion] != 1 || got[MetricDictTrainings] != 1 {
			t.Fatalf("version %v, trainings %v: want 1 and 1", got[MetricDictVersion], got[MetricDictTrainings])
		}
		if r, g := got[MetricDictRatio], got[MetricDictGain]; r <= 0 || r >= 1 || g <= 0 || g >= 1 {
			t.Fatalf("ratio %v, gain %v: want both in (0, 1)", r, g)
		}
	})
}
