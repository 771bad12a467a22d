package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

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

// MetricsIndexed is what a metrics collection without per-topic labels
// observes (the callback's values, from the metrics index), as text.
func (b *Broker) MetricsIndexed(ctx context.Context) string {
	return b.indexedMetrics(ctx).text()
}

// MetricsWalked is the same read from every loaded topic (as the
// callback did before the index), as text.
func (b *Broker) MetricsWalked(ctx context.Context) string {
	return b.walkMetrics(ctx, false).text()
}

// text lists m's values, one a line, sorted.
func (m metricsTotals) text() string {
	var lines []string
	for k, v := range m.backlogs {
		lines = append(lines, fmt.Sprintf("backlog %s %d", k.ns, v))
	}
	for k, v := range m.storage {
		lines = append(lines, fmt.Sprintf("storage %s %d", k.ns, v))
	}
	lines = append(lines, fmt.Sprintf("topics %d", m.topics), fmt.Sprintf("producers %d", m.producers), fmt.Sprintf("consumers %d", m.consumers))
	for r, v := range m.repl {
		lines = append(lines, fmt.Sprintf("repl %s backlog %d bytes %d stalled %d connected %d lag %g", r, v.backlog, v.bytes, v.stalled, v.connected, v.lag))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
