package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/topic"
)

// TestUnloadOrderSteersPlacement: an unload order written by the leader
// (under its lease) names a destination; once the owner releases the
// bundle, lookups anywhere place it there, the destination's acquisition
// deletes the order, and with the destination gone the bundle never goes
// back to the broker that shed it.
func TestUnloadOrderSteersPlacement(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := start(t, config(c, "a", 7000))
	b := start(t, config(c, "b", 7100))
	d := start(t, config(c, "d", 7200))
	all := []*node{a, b, d}
	testcluster.WaitFor(t, 5*time.Second, func() bool { return len(a.candidatesIDs()) == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, bu := range topic.Bundles(8) {
		// a acquires the bundle (authoritative lookup there).
		if got := lookup(t, a, bu, true); got.ID != "a" {
			t.Fatalf("a did not take %s: %s", bu, got.ID)
		}
		if err := b.IssueOrder(ctx, ns, bu, Order{Op: OrderUnload, Broker: "a", Destination: "d", Issued: time.Now()}); err != nil {
			t.Fatal(err)
		}
		orders, _, err := a.Orders(ctx)
		if err != nil || len(orders) != 1 || orders[0].Bundle != bu || orders[0].Order.Destination != "d" {
			t.Fatalf("orders %+v %v", orders, err)
		}
		if err := a.Release(ctx, ns, bu); err != nil {
			t.Fatal(err)
		}
		if got := follow(t, bu, a, all...); got.ID != "d" {
			t.Fatalf("%s placed on %s; want the order's destination d", bu, got.ID)
		}
		testcluster.WaitFor(t, 5*time.Second, func() bool {
			l, _, err := a.Orders(ctx)
			return err == nil && len(l) == 0
		})
		if err := d.Release(ctx, ns, bu); err != nil {
			t.Fatal(err)
		}
	}

	// The destination is gone: the bundle goes anywhere but a.
	for _, bu := range topic.Bundles(8) {
		lookup(t, a, bu, true)
		if err := b.IssueOrder(ctx, ns, bu, Order{Op: OrderUnload, Broker: "a", Destination: "gone", Issued: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx, ns, bu); err != nil {
			t.Fatal(err)
		}
		if got := follow(t, bu, a, all...); got.ID == "a" {
			t.Fatalf("%s went back to the broker that shed it", bu)
		}
	}

	// The leader's orders go with its lease.
	bu := topic.Bundles(8)[0]
	if err := b.IssueOrder(ctx, ns, bu, Order{Op: OrderSplit, Broker: "d", Issued: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l, _, err := a.Orders(ctx)
	for _, so := range l {
		if so.Order.Op == OrderSplit {
			t.Fatalf("a closed leader's order survived: %+v (%v)", so, err)
		}
	}
}
