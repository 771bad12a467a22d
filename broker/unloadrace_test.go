package broker_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// unloadedWhileLoading serves each topic's bundle until the topic's
// first ownership check has passed, then no more: it stands for an
// unload that begins while the topic is loading, after the load checked
// ownership and before the unload's sweep could see the loaded topic.
type unloadedWhileLoading struct {
	mu      sync.Mutex
	checked map[string]bool
}

func (p *unloadedWhileLoading) Lookup(context.Context, topic.Name, bool) (broker.LookupResult, error) {
	return broker.LookupResult{Self: true}, nil
}

func (p *unloadedWhileLoading) Owns(n topic.Name) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := !p.checked[n.String()]
	p.checked[n.String()] = true
	return first
}

func (p *unloadedWhileLoading) OwnedEpoch(n topic.Name) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.checked[n.String()] {
		return 0, false
	}
	return 1, true
}

// unloadedAndBack owns every bundle, but each ownership check after a
// topic's first finds a new ownership: the bundle was unloaded while the
// topic loaded and came back to this broker (another broker may have
// written the topic in between).
type unloadedAndBack struct {
	mu     sync.Mutex
	epochs map[string]int64
}

func (p *unloadedAndBack) Lookup(context.Context, topic.Name, bool) (broker.LookupResult, error) {
	return broker.LookupResult{Self: true}, nil
}

func (p *unloadedAndBack) Owns(topic.Name) bool { return true }

func (p *unloadedAndBack) OwnedEpoch(n topic.Name) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epochs[n.String()]++
	return p.epochs[n.String()], true
}

// A topic whose bundle is unloaded and owned here again while it loads
// is not kept either: the copy loaded under the first ownership may be
// stale (seen in region's TestNamespaceUnloadUnderLoad: a cursor write
// of such a copy found the topic "fenced by another owner").
func TestTopicLoadedAcrossTwoOwnershipsIsNotServed(t *testing.T) {
	p := &unloadedAndBack{epochs: map[string]int64{}}
	e := startEnv(t, func(c *setup) { c.Placement = p })
	c := dialRaw(t, e.url, true)
	const name = "persistent://public/default/unloaded-and-back"
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String(name), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
	r := c.recv().Cmd
	if r.GetType() != pb.BaseCommand_ERROR || r.Error.GetError() != pb.ServerError_ServiceNotReady {
		t.Fatalf("subscribe across two ownerships: %v, want a ServiceNotReady error", r)
	}
	if slices.Contains(e.b.Topics(), name) {
		t.Fatalf("%s still loaded after its load spanned two ownerships: %v", name, e.b.Topics())
	}
	c.alive()
}

// A topic whose bundle is unloaded while it loads is not left loaded:
// the load fails with a retriable error and the client looks it up
// again. (Left loaded, a consumer would sit on a copy that no producer
// writes to once another broker takes the bundle.)
func TestTopicUnloadedWhileLoadingIsNotServed(t *testing.T) {
	p := &unloadedWhileLoading{checked: map[string]bool{}}
	e := startEnv(t, func(c *setup) { c.Placement = p })
	c := dialRaw(t, e.url, true)
	const name = "persistent://public/default/unloaded-while-loading"
	c.send(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: proto.String(name), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
	r := c.recv().Cmd
	if r.GetType() != pb.BaseCommand_ERROR || r.Error.GetError() != pb.ServerError_ServiceNotReady {
		t.Fatalf("subscribe while the bundle is unloaded: %v, want a ServiceNotReady error", r)
	}
	if slices.Contains(e.b.Topics(), name) {
		t.Fatalf("%s still loaded after its bundle was unloaded: %v", name, e.b.Topics())
	}
	c.alive()
}
