package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// LoadResult is what an append load measured. Latency runs from the
// writer accepting an entry to its callback; Elapsed from the first append
// to the last callback.
type LoadResult struct {
	Entries  int
	Bytes    int64
	Elapsed  time.Duration
	MBPerSec float64
	P50      time.Duration
	P99      time.Duration
	Max      time.Duration
}

func (r LoadResult) String() string {
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(r.Entries) / r.Elapsed.Seconds()
	}
	return fmt.Sprintf("%d entries, %.1f MB/s, %.0f entries/s, latency p50 %v p99 %v max %v",
		r.Entries, r.MBPerSec, rate, r.P50, r.P99, r.Max)
}

// AppendMeter appends through a writer and records each entry's latency,
// for benchmarks and `isobar perf`. Latency runs from the moment the writer
// accepted the entry (AppendAsync returned, after any wait for an in-flight
// slot) to its callback. Append may be called from one goroutine at a time;
// Wait ends the measurement.
type AppendMeter struct {
	w     *Writer
	wg    sync.WaitGroup
	start time.Time

	mu    sync.Mutex
	recs  []*appendRec
	bytes int64
	last  time.Time
	err   error
}

type appendRec struct{ sent, acked time.Time }

// NewAppendMeter starts measuring appends through w.
func NewAppendMeter(w *Writer) *AppendMeter { return &AppendMeter{w: w} }

// Append appends data asynchronously (blocking while the writer's in-flight
// limits are reached) and records its latency. It reports false once an
// entry has failed; the load should stop then.
func (m *AppendMeter) Append(data []byte) bool {
	if m.start.IsZero() {
		m.start = time.Now()
	}
	m.mu.Lock()
	failed := m.err != nil
	m.mu.Unlock()
	if failed {
		return false
	}
	rec := &appendRec{}
	m.wg.Add(1)
	n := int64(len(data))
	m.w.AppendAsync(data, func(_ int64, err error) {
		now := time.Now()
		m.mu.Lock()
		if err != nil {
			if m.err == nil {
				m.err = err
			}
		} else {
			rec.acked = now
			m.bytes += n
		}
		m.last = now
		m.mu.Unlock()
		m.wg.Done()
	})
	m.mu.Lock()
	rec.sent = time.Now()
	m.recs = append(m.recs, rec)
	m.mu.Unlock()
	return true
}

// Wait waits for every appended entry and returns the measurements and the
// first entry error.
func (m *AppendMeter) Wait() (LoadResult, error) {
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	var lats []time.Duration
	for _, r := range m.recs {
		if !r.acked.IsZero() {
			// A callback may run before AppendAsync returns: count that as 0.
			lats = append(lats, max(0, r.acked.Sub(r.sent)))
		}
	}
	r := LoadResult{Entries: len(lats), Bytes: m.bytes}
	if !m.start.IsZero() {
		r.Elapsed = m.last.Sub(m.start)
	}
	if r.Elapsed > 0 {
		r.MBPerSec = float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
	}
	if len(lats) > 0 {
		slices.Sort(lats)
		r.P50 = lats[len(lats)*50/100]
		r.P99 = lats[min(len(lats)-1, len(lats)*99/100)]
		r.Max = lats[len(lats)-1]
	}
	return r, m.err
}

// LoadOptions shape an append load.
type LoadOptions struct {
	// EntrySize is each entry's data size in bytes. Required.
	EntrySize int
	// Entries is how many entries to append; zero means until Duration passes.
	Entries int
	// Duration bounds the load when Entries is zero.
	Duration time.Duration
}

// AppendLoad appends entries of random data through w as fast as its
// in-flight limit allows, until the count or duration is reached, ctx ends
// or an entry fails, and reports throughput and latency percentiles.
func AppendLoad(ctx context.Context, w *Writer, o LoadOptions) (LoadResult, error) {
	if o.EntrySize <= 0 || (o.Entries <= 0 && o.Duration <= 0) {
		return LoadResult{}, fmt.Errorf("%w: load needs an entry size and a count or duration", ErrInvalid)
	}
	data := make([]byte, o.EntrySize)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	m := NewAppendMeter(w)
	deadline := time.Now().Add(o.Duration)
	for n := 0; o.Entries <= 0 || n < o.Entries; n++ {
		if ctx.Err() != nil || (o.Entries <= 0 && time.Now().After(deadline)) {
			break
		}
		if !m.Append(data) {
			break
		}
	}
	return m.Wait()
}
