package metastore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/wanproxy"
)

// A lease's holder sees it stop being Valid no later than the store
// expires it: the holder reaches the store through a link that goes
// black, so its keep-alives vanish; Valid turns false before a watcher
// connected directly to the store sees the leased key deleted, and the
// holder's Done closes too.
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
	for invalidAt.IsZero() {
		select {
		case ev := <-watch:
			if ev.Deleted {
				t.Fatalf("the store deleted the leased key while the holder still held it valid")
			}
		case <-time.After(5 * time.Millisecond):
			if !l.Valid() {
				invalidAt = time.Now()
			}
		case <-ctx.Done():
			t.Fatal("lease still valid a minute into the black hole")
		}
	}
	for ev := range watch {
		if ev.Deleted {
			t.Logf("holder stopped %v before the store expired the key", time.Since(invalidAt).Round(time.Millisecond))
			break
		}
	}
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed")
	}
}
