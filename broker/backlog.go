package broker

import (
	"math"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/broker/dispatch"
)

// backlogPacer drives the broker's pacing of backlog reads
// (dispatch.Backlog, docs/broker.md "Backlog reads and the tail"): the
// publish path reports each SEND's time to its receipt, and every
// dispatcher reading behind its topic's tail cache asks before it reads
// and reports what it read. Tailing reads, replication cursors and
// replays of single entries do not ask.
type backlogPacer struct {
	now func() time.Time
	off bool

	mu   sync.Mutex
	core *dispatch.Backlog
}

func newBacklogPacer(cfg dispatch.BacklogConfig, now func() time.Time) *backlogPacer {
	core := dispatch.NewBacklog(cfg, now())
	return &backlogPacer{now: now, off: core.Off(), core: core}
}

// observe records a tailing publish that took d.
func (p *backlogPacer) observe(d time.Duration) {
	if p.off {
		return
	}
	now := p.now()
	p.mu.Lock()
	p.core.Observe(now, d)
	p.mu.Unlock()
}

// reserve is asked before a backlog read: how long to wait first, and
// how many bytes the read may take.
func (p *backlogPacer) reserve() (time.Duration, int64) {
	if p.off {
		return 0, math.MaxInt64
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core.Reserve(now)
}

// charge records a backlog read of n bytes.
func (p *backlogPacer) charge(n int64) {
	if p.off {
		return
	}
	now := p.now()
	p.mu.Lock()
	p.core.Charge(now, n)
	p.mu.Unlock()
}

// rate is the current backlog read rate and whether it limits.
func (p *backlogPacer) rate() (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.core.Rate()
}
