package replicator

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/isobar-mq/isobar/replicator/pulsarconn"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The source side's rules (docs/replication.md, step 3), through the
// seams: a stream over a fakeCursor sending to a fakeRemote the test
// answers, in a synctest bubble so that time is exact.

func stats(w *Worker) StreamStats {
	st := w.Stats()
	if len(st) != 1 {
		panic("want one stream")
	}
	return st[0]
}

// One frame in flight: the next frame goes only after the previous one
// is answered; everything that arrived meanwhile goes in that one frame
// (not behind frames formed earlier); entries are acknowledged,
// cumulatively, only after the reply that stores them.
func TestStreamOneFrameInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		ids := cur.add(t, "m0")
		c1 := remote.next(t, time.Second)
		if got := c1.payloads(t); !slices.Equal(got, []string{"m0"}) {
			t.Fatalf("first frame %v", got)
		}
		cur.add(t, "m1")
		cur.add(t, "m2", "m3", "m4")
		remote.none(t, 10*time.Second, "a second frame while the first is unanswered")
		if a := cur.acked(); len(a) != 0 {
			t.Fatalf("acknowledged %v before the reply", a)
		}
		c1.ok()
		c2 := remote.next(t, time.Second)
		if got := c2.payloads(t); !slices.Equal(got, []string{"m1", "m2", "m3", "m4"}) {
			t.Fatalf("second frame %v, want all that arrived while the first was in flight", got)
		}
		h := c2.msg.Header
		if c2.msg.Subject != "isobar.repl.b.a" || h.Get(HeaderSource) != "a" || h.Get(HeaderTopic) != testTopic ||
			h.Get(HeaderFirst) != "1:1" || h.Get(HeaderLast) != "1:4" || h.Get(HeaderCount) != "4" {
			t.Fatalf("second frame: subject %s, headers %v", c2.msg.Subject, h)
		}
		synctest.Wait()
		if a := cur.acked(); !slices.Equal(a, ids) {
			t.Fatalf("acks %v, want %v once the first frame is stored", a, ids)
		}
		c2.ok()
		synctest.Wait()
		if a := cur.acked(); len(a) != 2 || a[1] != (pulsarconn.MessageID{Ledger: 1, Entry: 4}) {
			t.Fatalf("acks %v", a)
		}
		if st := stats(w); st.Entries != 5 || st.Frames != 2 || st.Errors != 0 || !st.Active {
			t.Fatalf("stats %+v", st)
		}
		remote.none(t, time.Minute, "a frame with nothing new")
	})
}

// Entries replicated from elsewhere (no loops) or whose replicate_to
// leaves the remote out are not sent, but the acknowledgement covers
// them; a frame of only such entries sends nothing and still
// acknowledges.
func TestStreamSkipsEntriesNotForTheRemote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "first")
		c1 := remote.next(t, time.Second)
		from, local, toB, toC := "x", []string{"__local__"}, []string{"b", "c"}, []string{"c"}
		cur.addRaw(
			entry(t, "k1"),
			entry(t, "s2", func(m *pb.MessageMetadata) { m.ReplicatedFrom = &from }),
			entry(t, "s3", func(m *pb.MessageMetadata) { m.ReplicateTo = local }),
			entry(t, "k4", func(m *pb.MessageMetadata) { m.ReplicateTo = toB }),
			entry(t, "s5", func(m *pb.MessageMetadata) { m.ReplicateTo = toC }),
		)
		synctest.Wait()
		c1.ok()
		c2 := remote.next(t, time.Second)
		if got := c2.payloads(t); !slices.Equal(got, []string{"k1", "k4"}) {
			t.Fatalf("frame %v, want k1 and k4", got)
		}
		if l := c2.msg.Header.Get(HeaderLast); l != "1:4" {
			t.Fatalf("last %s, want the last entry sent, 1:4", l)
		}
		c2.ok()
		synctest.Wait()
		if a := cur.acked(); a[len(a)-1] != (pulsarconn.MessageID{Ledger: 1, Entry: 5}) {
			t.Fatalf("acks %v, want through the skipped 1:5", a)
		}
		cur.addRaw(entry(t, "s6", func(m *pb.MessageMetadata) { m.ReplicatedFrom = &from }))
		remote.none(t, time.Minute, "a frame of skipped entries only")
		if a := cur.acked(); a[len(a)-1] != (pulsarconn.MessageID{Ledger: 1, Entry: 6}) {
			t.Fatalf("acks %v, want 1:6 acknowledged without a frame", a)
		}
		if st := stats(w); st.Skipped != 4 || st.Entries != 3 {
			t.Fatalf("stats %+v, want 4 skipped, 3 sent", st)
		}
	})
}

// A frame holds at most FrameEntries entries.
func TestStreamFrameLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{FrameEntries: 2}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		c := remote.next(t, time.Second)
		cur.add(t, "m1", "m2", "m3", "m4", "m5")
		synctest.Wait()
		var frames [][]string
		for range 3 {
			synctest.Wait() // the next frame has gathered what arrived
			c.ok()
			c = remote.next(t, time.Second)
			frames = append(frames, c.payloads(t))
		}
		want := [][]string{{"m1", "m2"}, {"m3", "m4"}, {"m5"}}
		if !slices.EqualFunc(frames, want, slices.Equal) {
			t.Fatalf("frames %v, want %v", frames, want)
		}
	})
}

// A frame the remote refuses ends the session: 100ms later the stream
// subscribes again and sends again from the cursor's mark-delete
// position (what was stored is not sent again).
func TestStreamRefusedFrameRestartsFromMarkDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		remote.next(t, time.Second).ok()
		cur.add(t, "m1")
		c2 := remote.next(t, time.Second)
		refused := time.Now()
		c2.refuse("no")
		c3 := remote.next(t, time.Second)
		if got := c3.payloads(t); !slices.Equal(got, []string{"m1"}) {
			t.Fatalf("after the refusal %v, want m1 again (not m0, acknowledged)", got)
		}
		subs := cur.subscribeTimes()
		if len(subs) != 2 || subs[1].Sub(refused) != 100*time.Millisecond {
			t.Fatalf("subscribed at %v, want again 100ms after the refusal at %v", subs, refused)
		}
		if cur.openSubs() != 1 {
			t.Fatalf("%d subscriptions open, want the first closed", cur.open)
		}
		c3.ok()
		synctest.Wait()
		st := stats(w)
		if st.Errors != 1 || !strings.Contains(st.LastError, "refused the frame: no") {
			t.Fatalf("stats %+v", st)
		}
		if a := cur.acked(); !slices.Equal(a, []pulsarconn.MessageID{{Ledger: 1, Entry: 0}, {Ledger: 1, Entry: 1}}) {
			t.Fatalf("acks %v", a)
		}
	})
}

// A failing stream retries after 100ms, doubling up to MaxBackoff; a
// session that made progress starts the delays over.
func TestStreamBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		down := errors.New("broker down")
		for range 9 {
			cur.subErrs = append(cur.subErrs, down)
		}
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		remote.next(t, time.Minute).ok()
		ms := time.Millisecond
		if got, want := gaps(cur.subscribeTimes()), []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms, 5000 * ms}; !slices.Equal(got, want) {
			t.Fatalf("retried after %v, want %v", got, want)
		}
		// Progress, then two failures: 100ms, then 200ms again.
		synctest.Wait()
		cur.mu.Lock()
		cur.subErrs = []error{down}
		cur.mu.Unlock()
		cur.failReceive(errors.New("consumer closed"))
		time.Sleep(time.Second)
		subs := cur.subscribeTimes()
		if got, want := gaps(subs[len(subs)-3:]), []time.Duration{100 * ms, 200 * ms}; !slices.Equal(got, want) {
			t.Fatalf("after progress retried after %v, want %v", got, want)
		}
		if st := stats(w); st.Errors != 11 {
			t.Fatalf("errors %d, want 11", st.Errors)
		}
	})
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

// A frame left unanswered while probes are answered waits for
// RequestTimeout (never given up for being slow), probing every
// ProbeInterval, then the stream restarts and sends it again.
func TestStreamUnansweredFrameWaitsRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		c1 := remote.next(t, time.Second)
		c2 := remote.next(t, time.Minute)
		if d := c2.at.Sub(c1.at); d != 15*time.Second+100*time.Millisecond {
			t.Fatalf("sent again after %v, want RequestTimeout (15s) and 100ms", d)
		}
		if got := c2.payloads(t); !slices.Equal(got, []string{"m0"}) {
			t.Fatalf("sent again %v", got)
		}
		// (One more may race the timeout at 15s.)
		probes := slices.DeleteFunc(remote.probeTimes(), func(p time.Time) bool { return !p.Before(c1.at.Add(15 * time.Second)) })
		if len(probes) != 29 || probes[0].Sub(c1.at) != 500*time.Millisecond || slices.ContainsFunc(gaps(probes), func(d time.Duration) bool { return d != 500*time.Millisecond }) {
			t.Fatalf("probes at %v after the frame, want every 500ms", probes)
		}
		if st := stats(w); st.Errors != 1 || !strings.Contains(st.LastError, "deadline") {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A probe not answered within ProbeInterval (a slow link queues it
// behind the frame) keeps the frame waiting.
func TestStreamSlowProbeKeepsFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		remote.probesHang = true
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		c1 := remote.next(t, time.Second)
		remote.none(t, 10*time.Second, "a frame given up while probes go unanswered")
		c1.ok()
		cur.add(t, "m1")
		if got := remote.next(t, time.Second).payloads(t); !slices.Equal(got, []string{"m1"}) {
			t.Fatalf("next frame %v", got)
		}
		if st := stats(w); st.Errors != 0 || len(cur.subscribeTimes()) != 1 || len(remote.probeTimes()) == 0 {
			t.Fatalf("stats %+v, %d subscribes, %d probes", st, len(cur.subscribeTimes()), len(remote.probeTimes()))
		}
	})
}

// When a probe finds no sink reachable (no responders), the frame in
// flight is given up at once, not at RequestTimeout: the stream counts a
// failure, probes after 100ms, doubling up to ProbeInterval, and once a
// sink answers sends the same frame again in the same session; nothing
// that arrived meanwhile overtakes it.
func TestStreamGivesUpFrameWhenRemoteUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		c1 := remote.next(t, time.Second)
		time.Sleep(1200 * time.Millisecond)
		remote.setUnreachable(true) // the gateway to b goes down
		cur.add(t, "m1")
		time.Sleep(2800 * time.Millisecond)
		remote.setUnreachable(false) // at 4s
		c2 := remote.next(t, time.Second)
		ms := time.Millisecond
		remote.mu.Lock()
		refused := slices.Clone(remote.noResponder)
		remote.mu.Unlock()
		if len(refused) == 0 || refused[0].Sub(c1.at) != 1500*ms {
			t.Fatalf("no responders at %v, want the frame given up by the probe at 1.5s", refused)
		}
		if got, want := gaps(refused), []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms, 500 * ms}; !slices.Equal(got, want) {
			t.Fatalf("probed after %v, want %v", got, want)
		}
		if d := c2.at.Sub(c1.at); d != 4200*ms {
			t.Fatalf("sent again at %v, want at the first probe answered, 4.2s", d)
		}
		if c2.msg != c1.msg {
			t.Fatalf("sent %s..%s again, want the same frame", c2.msg.Header.Get(HeaderFirst), c2.msg.Header.Get(HeaderLast))
		}
		if st := stats(w); st.Errors != 1 || !strings.Contains(st.LastError, ErrUnreachable.Error()) || !st.Active {
			t.Fatalf("stats %+v, want one failure, still active", st)
		}
		c2.ok()
		c3 := remote.next(t, time.Second)
		if got := c3.payloads(t); !slices.Equal(got, []string{"m1"}) {
			t.Fatalf("then %v, want m1", got)
		}
		if n := len(cur.subscribeTimes()); n != 1 {
			t.Fatalf("%d subscriptions, want the same session throughout", n)
		}
	})
}

// A remote that comes back slower than ProbeInterval (probes answered
// after 1.2s) is found: each probe that gets no answer in time waits
// twice as long as the one before, up to four ProbeIntervals, and the
// frame given up is sent again once one is answered.
func TestStreamFindsASlowRemote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		c1 := remote.next(t, time.Second)
		remote.setUnreachable(true) // the probe at 0.5s gives the frame up
		time.Sleep(time.Second)
		remote.mu.Lock()
		remote.unreachable, remote.probeDelay = false, 1200*time.Millisecond
		remote.mu.Unlock()
		c2 := remote.next(t, 10*time.Second)
		if c2.msg != c1.msg {
			t.Fatalf("sent %s..%s again, want the same frame", c2.msg.Header.Get(HeaderFirst), c2.msg.Header.Get(HeaderLast))
		}
		// Probes from 1.1s on wait 0.5s, 1s, then 2s: the third is answered.
		if d := c2.at.Sub(c1.at); d < 3*time.Second || d > 6*time.Second {
			t.Fatalf("sent again after %v, want after the third probe", d)
		}
	})
}

func TestProbeWait(t *testing.T) {
	cfg := Config{ProbeInterval: 500 * time.Millisecond, RequestTimeout: 15 * time.Second}
	var got []time.Duration
	for w := cfg.ProbeInterval; len(got) < 5; {
		w = probeWait(w, cfg)
		got = append(got, w)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("probe waits %v, want %v", got, want)
	}
	cfg.RequestTimeout = 800 * time.Millisecond
	if w := probeWait(time.Second, cfg); w != 800*time.Millisecond {
		t.Fatalf("capped at %v, want RequestTimeout", w)
	}
}

// A frame sent while no sink is reachable fails at once with no
// responders and is handled the same way; while the remote stays
// unreachable the stream counts a failure every MaxBackoff.
func TestStreamSendWhileRemoteUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		remote.setUnreachable(true)
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		start := time.Now()
		cur.add(t, "m0")
		time.Sleep(12 * time.Second)
		if st := stats(w); st.Errors != 3 {
			t.Fatalf("%d failures in 12s unreachable, want 3 (at 0, 5.2s and 10.2s)", st.Errors)
		}
		remote.setUnreachable(false)
		c1 := remote.next(t, time.Second)
		if d := c1.at.Sub(start); d != 12200*time.Millisecond {
			t.Fatalf("sent at %v, want at the first probe answered, 12.2s", d)
		}
		if got := c1.payloads(t); !slices.Equal(got, []string{"m0"}) {
			t.Fatalf("sent %v", got)
		}
		if n := len(cur.subscribeTimes()); n != 1 {
			t.Fatalf("%d subscriptions, want one session", n)
		}
	})
}

// Subscription states that arrive with entries go just before the
// frame of those entries, as a frame of their own (Isobar-Kind
// substate); they are not acknowledged.
func TestStreamStatesBeforeEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		c1 := remote.next(t, time.Second)
		s1, s2 := subState(t, "sub1"), subState(t, "sub2")
		cur.addState(s1)
		cur.add(t, "m1")
		cur.addState(s2)
		synctest.Wait()
		c1.ok()
		cs := remote.next(t, time.Second)
		if k, n := cs.msg.Header.Get(HeaderKind), cs.msg.Header.Get(HeaderCount); k != KindSubState || n != "2" {
			t.Fatalf("kind %q count %s, want the 2 states first", k, n)
		}
		if es := cs.entries(t); len(es) != 2 || !slices.Equal(es[0].Data, s1) || !slices.Equal(es[1].Data, s2) {
			t.Fatalf("states frame %v", es)
		}
		cs.ok()
		c2 := remote.next(t, time.Second)
		if got := c2.payloads(t); !slices.Equal(got, []string{"m1"}) || c2.msg.Header.Get(HeaderKind) != "" {
			t.Fatalf("then %v (kind %q), want m1", got, c2.msg.Header.Get(HeaderKind))
		}
		c2.ok()
		synctest.Wait()
		if a := cur.acked(); !slices.Equal(a, []pulsarconn.MessageID{{Ledger: 1, Entry: 0}, {Ledger: 1, Entry: 1}}) {
			t.Fatalf("acks %v, want the entries' only", a)
		}
		if st := stats(w); st.SubStates != 2 || st.Entries != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A sink older than probes refuses one as an unknown kind: the source
// takes that as an answer all the same, and sends the frame.
func TestStreamOldSinkRefusingProbesIsReachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		remote.setUnreachable(true)
		old := nats.NewMsg("")
		old.Header.Set(HeaderError, `replicator: bad frame: unknown kind "probe"`)
		remote.probeReply = old
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		startStream(w, "b")

		cur.add(t, "m0")
		time.Sleep(time.Second)
		remote.setUnreachable(false)
		c := remote.next(t, time.Second)
		if got := c.payloads(t); !slices.Equal(got, []string{"m0"}) {
			t.Fatalf("sent %v", got)
		}
	})
}

// A stream the worker stops (it moved to another worker, or its remote
// left the replication clusters) is no longer reported active (Stats,
// and the isobar.replication.streams gauge).
func TestStreamStoppedIsNotActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur, remote := newFakeCursor(), newFakeRemote()
		w := testWorker(t, "a", Config{}, remote, cur, nil)
		defer w.Close()
		s := startStream(w, "b")

		cur.add(t, "m0")
		remote.next(t, time.Second).ok()
		synctest.Wait()
		if !stats(w).Active {
			t.Fatal("not active while streaming")
		}
		s.cancel() // as assign does when the stream is no longer this worker's
		synctest.Wait()
		if st := stats(w); st.Active {
			t.Fatalf("stopped stream still active: %+v", st)
		}
		if n := cur.openSubs(); n != 0 {
			t.Fatalf("%d subscriptions open after the stream stopped", n)
		}
	})
}
