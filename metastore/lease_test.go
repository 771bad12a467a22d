package metastore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/wanproxy"
)

// A lease's holder sees it stop being Valid no later than the store
// expires it: the holder reaches the store through a link that goes
// black, so its keep-alives vanish; Valid turns false before a watcher
// connected directly to the store sees the leased key deleted, and the
// holder's Done closes at once too.
func TestLeaseValidEndsBeforeTheStoreExpiresIt(t *testing.T) {
	e := startEtcd(t, t.TempDir(), "")
	t.Cleanup(e.Close)
	direct := connect(t, e)
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(e.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	holder, err := Connect(context.Background(), Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	l, err := holder.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Put(ctx, "/fence", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Renewals keep it valid past its TTL.
	deadline := time.Now().Add(2 * ttl)
	for time.Now().Before(deadline) {
		if !l.Valid() {
			t.Fatal("lease not valid while the store is reachable")
		}
		time.Sleep(50 * time.Millisecond)
	}
	watch := direct.Watch(ctx, "/fence", 0)
	link.Blackhole()
	var invalidAt time.Time
	deleted := false
	for invalidAt.IsZero() {
		select {
		case ev := <-watch:
			if ev.Deleted {
				// Seen after it happened: the holder must hold the
				// lease invalid by now. (Polling Valid every 5 ms
				// could lag the event on a loaded machine and fail a
				// lease that had ended in time.)
				if l.Valid() {
					t.Fatalf("the store deleted the leased key while the holder still held it valid")
				}
				invalidAt, deleted = time.Now(), true
			}
		case <-time.After(5 * time.Millisecond):
			if !l.Valid() {
				invalidAt = time.Now()
			}
		case <-ctx.Done():
			t.Fatal("lease still valid a minute into the black hole")
		}
	}
	// Done closes when validity ends, not a renewal's timeout later.
	select {
	case <-l.Done():
		t.Logf("Done closed %v after the lease stopped being valid", time.Since(invalidAt).Round(time.Millisecond))
	case <-time.After(250 * time.Millisecond):
		t.Errorf("Done not closed 250ms after the lease stopped being valid")
	}
	if !deleted {
		for ev := range watch {
			if ev.Deleted {
				t.Logf("holder stopped %v before the store expired the key", time.Since(invalidAt).Round(time.Millisecond))
				break
			}
		}
	}
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed")
	}
}

// validUntil is when l's validity ends, as Valid measures it.
func validUntil(l *Lease) time.Time {
	return monoBase.Add(time.Duration(l.core.validUntil.Load()))
}

// A cut or a stall of the holder's link to the store shorter than the
// lease, at the default TTL, costs the holder nothing: the lease stays
// Valid throughout and is renewed soon after the link heals. Each fault
// starts at the worst moment, just before a renewal is due, when the
// lease has the least validity left.
func TestShortOutagesKeepTheLease(t *testing.T) {
	e := startEtcd(t, t.TempDir(), "")
	t.Cleanup(e.Close)
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(e.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	holder, err := Connect(context.Background(), Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = 5 * time.Second // the fence lease's default
	l, err := holder.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		link.Up() // after a failure in the middle of a fault
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l.Revoke(rctx)
	}()
	// watchValid polls the lease until cond holds, failing the test as
	// soon as it is not Valid.
	watchValid := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if !l.Valid() {
				t.Fatalf("%s: lease not valid (lost: %v)", what, l.Lost())
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: timed out", what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for _, fault := range []struct {
		name  string
		apply func()
		d     time.Duration
	}{
		{"cut", link.Cut, time.Second},
		{"cut", link.Cut, 2 * time.Second},
		{"cut", link.Cut, 3 * time.Second},
		{"blackhole", link.Blackhole, time.Second},
		{"blackhole", link.Blackhole, 2 * time.Second},
		{"blackhole", link.Blackhole, 3 * time.Second},
		{"blackhole", link.Blackhole, 4 * time.Second},
	} {
		what := fault.name + " of " + fault.d.String()
		// A fresh renewal, then the moment just before the next one.
		before := validUntil(l)
		watchValid(what+": a renewal before", func() bool { return validUntil(l).After(before) })
		due := validUntil(l).Add(-ttl + RenewInterval(ttl) - 20*time.Millisecond)
		watchValid(what+": the next renewal due", func() bool { return !time.Now().Before(due) })
		start := time.Now()
		left := validUntil(l).Sub(start)
		fault.apply()
		watchValid(what, func() bool { return time.Since(start) >= fault.d })
		link.Up()
		healed := time.Now()
		watchValid(fmt.Sprintf("%s (validity left at its start: %v): renewed after the heal", what, left.Round(time.Millisecond)),
			func() bool { return validUntil(l).After(healed.Add(ttl)) })
		t.Logf("%s: validity left at its start %v; renewed %v after the heal", what,
			left.Round(time.Millisecond), validUntil(l).Add(-ttl).Sub(healed).Round(time.Millisecond))
	}
}
