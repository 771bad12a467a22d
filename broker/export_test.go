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

// MaintenanceListed are the names of the topics the next maintenance
// pass visits (besides the inactive-deletion candidates due by then and
// the topics of namespaces whose policies change), and the number of
// those candidates.
func (b *Broker) MaintenanceListed() (listed []string, due int) {
	m := &b.maintIdx
	m.mu.Lock()
	for _, t := range m.list {
		listed = append(listed, t.name.String())
	}
	m.mu.Unlock()
	m.pass.Lock()
	due = m.due.len()
	m.pass.Unlock()
	return listed, due
}
