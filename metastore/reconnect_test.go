package metastore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/wanproxy"
)

// TestPromptReconnectAfterALongOutage: after its link to the store has
// been cut for 20 s, a client's next write succeeds within a moment of
// the heal. With gRPC's default reconnect backoff (1 s growing 1.6 times
// per failed attempt, up to 2 min) the attempt after a 20 s cut comes
// about 26 s after it began, 6 s after the heal (6.8 s measured with the
// dial option removed), and the attempts grow further apart the longer
// the outage; with reconnect's, at most 250 ms apart, the client is back
// within that of the heal. The fault's length is the scenario's clock.
func TestPromptReconnectAfterALongOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 20 s outage: skipped with -short")
	}
	e := startEtcd(t, t.TempDir(), "")
	t.Cleanup(e.Close)
	link, err := wanproxy.Listen("127.0.0.1:0", strings.TrimPrefix(e.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	s, err := Connect(context.Background(), Config{Endpoints: []string{"http://" + link.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Put(ctx, "/k", []byte("before")); err != nil {
		t.Fatal(err)
	}
	const outage = 20 * time.Second
	link.Cut()
	began := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	_, err = s.Put(wctx, "/k", []byte("during"))
	wcancel()
	if err == nil {
		t.Fatal("a write went through a cut link")
	}
	time.Sleep(outage - time.Since(began))
	link.Up()
	healed := time.Now()
	if _, err := s.Put(ctx, "/k", []byte("after")); err != nil {
		t.Fatalf("first write after the heal: %v", err)
	}
	took := time.Since(healed)
	t.Logf("after a %v cut the first write took %v", outage, took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("the first write after a %v cut took %v: the client reconnects too late", outage, took.Round(time.Millisecond))
	}
}
