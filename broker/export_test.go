package broker

import "context"

// Test-only operations on a running broker. They live here, compiled only
// into the package's tests, not in the production API.

// MaintainOnce runs one pass of the maintenance loop now (maintainOnce).
func (b *Broker) MaintainOnce(ctx context.Context) { b.maintainOnce(ctx) }

// Panics is the number of panics recovered in command handlers; each is a
// bug (the connection it happened on is closed).
func (b *Broker) Panics() int64 { return b.panics.Load() }

// NewLoadSampler is a load sampler of b over its ownership placement
// (BenchmarkManyTopics times one sample).
func (b *Broker) NewLoadSampler() *LoadSampler {
	return NewLoadSampler(b, b.deps.Placement.(*OwnershipPlacement))
}
