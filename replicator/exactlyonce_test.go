package replicator

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Both sides in memory: worker a's stream to b over a fakeNet, worker b's
// sink writing to fakeBrokers that drop what they have (docs/replication.md,
// steps 3 to 5). Whatever is lost on the way, each entry is stored once,
// in order.

func waitStored(t *testing.T, brokers *fakeBrokers, want []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := brokers.payloads(t)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A frame whose reply is lost was stored: the stream sends it again after
// RequestTimeout, from the cursor's mark-delete position, and the broker
// drops the copies (answered as stored), so nothing is stored twice.
func TestExactlyOnceWhenAReplyIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers, cur := &fakeNet{}, newFakeBrokers(), newFakeCursor()
		b := sinkB(t, Config{}, net, brokers)
		defer b.Close()
		a := testWorker(t, "a", Config{FrameDelay: 10 * time.Millisecond}, net, cur, nil)
		defer a.Close()
		startStream(a, "b")

		cur.add(t, "m0", "m1")
		waitStored(t, brokers, []string{"m0", "m1"}, time.Second)
		net.mu.Lock()
		net.loseReplies = 1
		net.mu.Unlock()
		cur.add(t, "m2", "m3")
		waitStored(t, brokers, []string{"m0", "m1", "m2", "m3"}, time.Second)
		lost := time.Now()
		cur.add(t, "m4")
		time.Sleep(20 * time.Second)
		waitStored(t, brokers, []string{"m0", "m1", "m2", "m3", "m4"}, time.Second)
		brokers.mu.Lock()
		dups := brokers.dups
		brokers.mu.Unlock()
		if dups != 2 {
			t.Fatalf("%d copies dropped, want m2 and m3 once each", dups)
		}
		if subs := cur.subscribeTimes(); len(subs) != 2 || subs[1].Sub(lost) < 15*time.Second {
			t.Fatalf("subscribed at %v, want again after RequestTimeout", subs)
		}
		if st := stats(a); st.Errors != 1 || st.Entries < 5 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A frame in flight when the link is cut is given up at the next probe;
// the sink may still store it. Once the link heals the same frame is sent
// again, its copies dropped, and what came meanwhile follows in order.
func TestExactlyOnceAcrossACut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, brokers, cur := &fakeNet{}, newFakeBrokers(), newFakeCursor()
		b := sinkB(t, Config{}, net, brokers)
		defer b.Close()
		a := testWorker(t, "a", Config{FrameDelay: 10 * time.Millisecond}, net, cur, nil)
		defer a.Close()
		startStream(a, "b")

		cur.add(t, "m0")
		waitStored(t, brokers, []string{"m0"}, time.Second)
		hold := make(chan struct{})
		brokers.mu.Lock()
		brokers.hold = hold // the next frame is slow to store
		brokers.mu.Unlock()
		cur.add(t, "m1", "m2")
		time.Sleep(100 * time.Millisecond)
		net.mu.Lock()
		net.cut = true
		net.mu.Unlock()
		time.Sleep(time.Second) // a probe gives the frame up
		if st := stats(a); st.Errors != 1 {
			t.Fatalf("stats %+v, want the frame given up", st)
		}
		brokers.mu.Lock()
		brokers.hold = nil
		brokers.mu.Unlock()
		close(hold) // the sink stores it all the same
		cur.add(t, "m3")
		time.Sleep(2 * time.Second)
		net.mu.Lock()
		net.cut = false
		net.mu.Unlock()
		waitStored(t, brokers, []string{"m0", "m1", "m2", "m3"}, 2*time.Second)
		brokers.mu.Lock()
		dups := brokers.dups
		brokers.mu.Unlock()
		if n := len(cur.subscribeTimes()); n != 1 || dups == 0 {
			t.Fatalf("%d subscriptions, %d copies dropped: want the frame sent again in the same session", n, dups)
		}
		synctest.Wait()
		if a := cur.acked(); len(a) == 0 || a[len(a)-1].Entry != 3 {
			t.Fatalf("acks %v, want through m3", a)
		}
	})
}
