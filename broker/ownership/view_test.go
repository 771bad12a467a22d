package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/testcluster"
)

// TestViewFollowsRegistrations: a View lists the brokers registered when
// it starts and follows them: one that registers appears, one that
// drains is marked, one that closes (or whose lease expires) is gone.
func TestViewFollowsRegistrations(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := WatchBrokers(ctx, c.Connect(), c.Region, c.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ids := func() []string {
		var out []string
		for _, b := range v.Brokers() {
			out = append(out, b.ID)
		}
		return out
	}
	if got := ids(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("at start: %v", got)
	}
	b := start(t, config(c, "b", 7100))
	testcluster.WaitFor(t, 5*time.Second, func() bool { return len(ids()) == 2 })
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 5*time.Second, func() bool { bs := v.Brokers(); return len(bs) == 2 && bs[1].Draining })
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 5*time.Second, func() bool { got := ids(); return len(got) == 1 && got[0] == "a" })
	a.Abort() // a crash: its lease runs out
	testcluster.WaitFor(t, 10*time.Second, func() bool { return len(ids()) == 0 })
}
