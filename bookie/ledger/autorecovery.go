package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/metastore"
)

// Automatic recovery, after BookKeeper's autorecovery (docs/ledger.md
// "Automatic recovery"): an auditor, run by the region's leader broker,
// finds the closed ledgers that keep entries on a lost bookie (one whose
// registration has been gone for the recovery delay, or one an operator
// decommissioned), copies those entries from surviving copies to a bookie
// the placement picks, and points the ledger's metadata at it. An open
// ledger on a lost bookie that stays open for the open-ledger grace
// period is fenced and recovered (closed) first, then re-replicated the
// same way; its writer sees itself fenced (a managed ledger rolls over).

// ErrUnknownBookie: decommission named a bookie the region has never seen.
var ErrUnknownBookie = errors.New("ledger: unknown bookie")

// DecommissionedPrefix is where the marks of decommissioned bookies live.
func DecommissionedPrefix(region string) string {
	return metastore.RegionPrefix(region) + "decommissioned-bookies/"
}

// Decommission marks bookie id of the region decommissioned: placement
// stops choosing it (as if it were read-only) and the auditor moves its
// copies to other bookies at once, without waiting for the recovery
// delay, while it still serves reads. Marking a bookie twice is not an
// error. The bookie must be known to the region (registered now, or with
// a cookie); else ErrUnknownBookie.
func Decommission(ctx context.Context, meta metastore.Meta, region, id string) error {
	if err := racks.ValidBookieID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	known, err := racks.NewStore(meta, region).Bookies(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(known, id) {
		return fmt.Errorf("%w: %s is neither registered nor has a cookie in region %s", ErrUnknownBookie, id, region)
	}
	_, err = meta.Put(ctx, DecommissionedPrefix(region)+id, []byte(time.Now().UTC().Format(time.RFC3339)))
	if err != nil {
		return fmt.Errorf("ledger: decommission %s: %w", id, err)
	}
	return nil
}

// ErrNotDecommissioned: Recommission named a bookie without the mark.
var ErrNotDecommissioned = errors.New("ledger: bookie not decommissioned")

// Recommission takes the decommissioned mark off bookie id: placement may
// choose it again. Copies already moved stay where they are.
func Recommission(ctx context.Context, meta metastore.Meta, region, id string) error {
	if err := racks.ValidBookieID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	key := DecommissionedPrefix(region) + id
	if _, err := meta.Get(ctx, key); errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotDecommissioned, id)
	} else if err != nil {
		return fmt.Errorf("ledger: recommission %s: %w", id, err)
	}
	if err := meta.Delete(ctx, key); err != nil {
		return fmt.Errorf("ledger: recommission %s: %w", id, err)
	}
	return nil
}

// DecommissionedBookies lists the bookies marked decommissioned, sorted.
func DecommissionedBookies(ctx context.Context, meta metastore.Meta, region string) ([]string, error) {
	p := DecommissionedPrefix(region)
	keys, err := meta.ListKeys(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("ledger: list decommissioned bookies: %w", err)
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, strings.TrimPrefix(k, p))
	}
	slices.Sort(out)
	return out, nil
}

// UnderReplicated is a ledger with a copy on a bookie that is not
// registered or is decommissioned.
type UnderReplicated struct {
	Ledger uint64 `json:"ledger"`
	State  State  `json:"state"`
	// Bookies are the ledger's bookies that are missing or decommissioned.
	Bookies []string `json:"bookies"`
	// Fragments are what recovery will copy (closed ledgers only; an open
	// ledger waits to be closed, by its writer or, after the open-ledger
	// grace period, by the auditor).
	Fragments []Fragment `json:"fragments,omitempty"`
	// Entries counts the entry copies to make.
	Entries int `json:"entries"`
}

// bookieView is what one scan learned about the region's bookies.
type bookieView struct {
	registered     map[string]bool
	decommissioned map[string]bool
}

func (c *Client) viewBookies(ctx context.Context) (bookieView, error) {
	bs, err := c.listBookies(ctx)
	if err != nil {
		return bookieView{}, err
	}
	dec, err := DecommissionedBookies(ctx, c.meta, c.cfg.Region)
	if err != nil {
		return bookieView{}, err
	}
	v := bookieView{registered: map[string]bool{}, decommissioned: map[string]bool{}}
	for _, b := range bs {
		v.registered[b.ID] = true
	}
	for _, b := range dec {
		v.decommissioned[b] = true
	}
	return v, nil
}

// storedLedger is one ledger's metadata as listed.
type storedLedger struct {
	id  uint64
	md  Metadata
	rev int64
}

func (c *Client) listLedgers(ctx context.Context) ([]storedLedger, error) {
	p := metastore.RegionPrefix(c.cfg.Region) + "ledgers/"
	kvs, err := c.meta.List(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("ledger: list ledgers: %w", err)
	}
	out := make([]storedLedger, 0, len(kvs))
	for _, kv := range kvs {
		id, err := strconv.ParseUint(strings.TrimPrefix(kv.Key, p), 10, 64)
		if err != nil {
			continue
		}
		md, err := DecodeMetadata(kv.Value)
		if err != nil {
			c.log.Warn("auditor: ignoring undecodable ledger metadata", "ledger", id, "err", err)
			continue
		}
		out = append(out, storedLedger{id, md, kv.Rev})
	}
	return out, nil
}

func underReplicated(l storedLedger, lost func(string) bool) (UnderReplicated, bool) {
	bs := LostBookies(&l.md, lost)
	if len(bs) == 0 {
		return UnderReplicated{}, false
	}
	u := UnderReplicated{Ledger: l.id, State: l.md.State, Bookies: bs, Fragments: PlanRecovery(&l.md, lost)}
	for _, f := range u.Fragments {
		u.Entries += len(f.Entries(l.md.EnsembleSize, l.md.WriteQuorum))
	}
	return u, true
}

// UnderReplicatedLedgers lists the ledgers with a copy on a bookie that is
// not registered now or is decommissioned, in id order: those automatic
// recovery will repair (closed ones, once the bookie has been gone for the
// recovery delay, or at once when decommissioned) and those that wait to
// be closed. Any broker can answer it from the metadata store.
func (c *Client) UnderReplicatedLedgers(ctx context.Context) ([]UnderReplicated, error) {
	v, err := c.viewBookies(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := c.listLedgers(ctx)
	if err != nil {
		return nil, err
	}
	lost := func(b string) bool { return !v.registered[b] || v.decommissioned[b] }
	out := []UnderReplicated{}
	for _, l := range ls {
		if u, ok := underReplicated(l, lost); ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// AuditorConfig configures an Auditor. Zero values mean the defaults.
type AuditorConfig struct {
	// LostBookieRecoveryDelay is how long a bookie's registration must
	// have been gone before its copies are re-made elsewhere
	// (BookKeeper's lostBookieRecoveryDelay): a bookie restarting within
	// it costs no copying. Zero means 30s.
	LostBookieRecoveryDelay time.Duration
	// OpenLedgerGracePeriod is how long an open ledger with a copy on a
	// lost bookie may stay open before the auditor fences and recovers it
	// to re-replicate it (BookKeeper's openLedgerRereplicationGracePeriod):
	// a writer rolling over within it closes the ledger itself. It runs
	// from the pass that first finds the bookie lost. Zero means 30s.
	OpenLedgerGracePeriod time.Duration
	// Interval is how often the auditor scans. Zero means a quarter of
	// the shorter of the delay and the grace period, within 200ms..10s.
	Interval time.Duration
	// Leader says whether this process is the region's auditor now; the
	// auditor scans only while it says so. Nil means always.
	Leader func(ctx context.Context) bool
	// MeterProvider receives the auditor's metrics; nil means none.
	MeterProvider metric.MeterProvider
}

// Validate reports every problem with the config at once.
func (c AuditorConfig) Validate() error {
	var errs []error
	if c.LostBookieRecoveryDelay < 0 {
		errs = append(errs, fmt.Errorf("lostBookieRecoveryDelay: %v is negative", c.LostBookieRecoveryDelay))
	}
	if c.OpenLedgerGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("openLedgerRereplicationGracePeriod: %v is negative", c.OpenLedgerGracePeriod))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("auditor interval: %v is negative", c.Interval))
	}
	return errors.Join(errs...)
}

// AuditReport is what one audit pass did.
type AuditReport struct {
	// Audited is false when this process is not the auditor.
	Audited bool
	// UnderReplicated counts the ledgers left with a copy on a lost
	// bookie after the pass (open ones included).
	UnderReplicated int
	// Fragments and Entries count what the pass re-replicated.
	Fragments, Entries int
	// OpenRecovered counts the open ledgers the pass fenced and closed
	// after their grace period.
	OpenRecovered int
}

// Auditor is the region's automatic recovery. Run it in every broker: it
// acts only while Leader says so.
type Auditor struct {
	c   *Client
	cfg AuditorConfig

	trigger chan struct{} // capacity 1: a pending trigger is enough

	// mu guards missingSince, when this auditor first saw each bookie
	// named by a ledger without a registration, openSince, when it first
	// saw each open ledger with a copy on a lost bookie, and lastFull,
	// when a pass last read every ledger.
	mu           sync.Mutex
	missingSince map[string]time.Time
	openSince    map[uint64]time.Time
	lastFull     time.Time

	underReplicated atomic.Int64
	entries         metric.Int64Counter
	fragments       metric.Int64Counter
	openRecovered   metric.Int64Counter
	reg             metric.Registration
}

// meterName is the instrumentation scope of the auditor's metrics.
const meterName = "github.com/isobar-mq/isobar/bookie/ledger"

// NewAuditor makes the region's auditor on client c.
func (c *Client) NewAuditor(cfg AuditorConfig) (*Auditor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	if cfg.LostBookieRecoveryDelay == 0 {
		cfg.LostBookieRecoveryDelay = 30 * time.Second
	}
	if cfg.OpenLedgerGracePeriod == 0 {
		cfg.OpenLedgerGracePeriod = 30 * time.Second
	}
	if cfg.Interval == 0 {
		cfg.Interval = min(max(min(cfg.LostBookieRecoveryDelay, cfg.OpenLedgerGracePeriod)/4, 200*time.Millisecond), 10*time.Second)
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = noop.NewMeterProvider()
	}
	a := &Auditor{c: c, cfg: cfg, trigger: make(chan struct{}, 1), missingSince: map[string]time.Time{}, openSince: map[uint64]time.Time{}}
	m := cfg.MeterProvider.Meter(meterName)
	var err error
	if a.entries, err = m.Int64Counter("isobar.autorecovery.entries_recovered", metric.WithUnit("{entry}"),
		metric.WithDescription("Entry copies re-made on a replacement bookie by automatic recovery.")); err != nil {
		return nil, err
	}
	if a.fragments, err = m.Int64Counter("isobar.autorecovery.fragments_recovered", metric.WithUnit("{fragment}"),
		metric.WithDescription("Ledger fragments moved off a lost bookie by automatic recovery.")); err != nil {
		return nil, err
	}
	if a.openRecovered, err = m.Int64Counter("isobar.autorecovery.open_ledgers_recovered", metric.WithUnit("{ledger}"),
		metric.WithDescription("Open ledgers on a lost bookie that automatic recovery fenced and closed after the open-ledger grace period.")); err != nil {
		return nil, err
	}
	g, err := m.Int64ObservableGauge("isobar.autorecovery.under_replicated_ledgers", metric.WithUnit("{ledger}"),
		metric.WithDescription("Ledgers with a copy on a missing (unregistered) or decommissioned bookie at the auditor's last full pass (0 on brokers that are not the auditor)."))
	if err != nil {
		return nil, err
	}
	if a.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, a.underReplicated.Load())
		return nil
	}, g); err != nil {
		return nil, err
	}
	return a, nil
}

// requestPass asks for a pass now (a bookie was decommissioned).
func (a *Auditor) requestPass() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// Run audits every Interval (and on requestPass) until ctx ends.
func (a *Auditor) Run(ctx context.Context) {
	defer a.reg.Unregister()
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.trigger:
		}
		r, err := a.auditOnce(ctx)
		if err != nil && ctx.Err() == nil {
			a.c.log.Warn("auditor: pass failed", "err", err)
		} else if r.Fragments > 0 || r.OpenRecovered > 0 {
			a.c.log.Info("auditor: re-replicated", "fragments", r.Fragments, "entries", r.Entries,
				"openLedgersRecovered", r.OpenRecovered, "underReplicated", r.UnderReplicated)
		}
	}
}

// lostSet updates missingSince from v and returns whether a bookie counts
// as lost now: decommissioned, or missing for the recovery delay.
func (a *Auditor) lostSet(v bookieView, named []string, now time.Time) func(string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for b := range a.missingSince {
		if v.registered[b] {
			delete(a.missingSince, b)
		}
	}
	lost := map[string]bool{}
	for _, b := range named {
		if v.decommissioned[b] {
			lost[b] = true
			continue
		}
		if v.registered[b] {
			continue
		}
		since, ok := a.missingSince[b]
		if !ok {
			a.missingSince[b], since = now, now
		}
		if now.Sub(since) >= a.cfg.LostBookieRecoveryDelay {
			lost[b] = true
		}
	}
	return func(b string) bool { return lost[b] }
}

// auditOnce runs one pass: when this process is the auditor, it finds the
// ledgers on lost bookies and re-replicates the closed ones. A failure on
// one ledger is logged and the pass goes on; the error joins them all.
func (a *Auditor) auditOnce(ctx context.Context) (AuditReport, error) {
	if a.cfg.Leader != nil && !a.cfg.Leader(ctx) {
		a.underReplicated.Store(0)
		a.mu.Lock()
		clear(a.missingSince) // a new auditor starts its delays afresh
		clear(a.openSince)
		a.lastFull = time.Time{}
		a.mu.Unlock()
		return AuditReport{}, nil
	}
	rep := AuditReport{Audited: true}
	v, err := a.c.viewBookies(ctx)
	if err != nil {
		return rep, err
	}
	if quiet, err := a.quiet(ctx, v); err != nil {
		return rep, err
	} else if !a.fullScanDue(quiet) {
		rep.UnderReplicated = int(a.underReplicated.Load())
		return rep, nil
	}
	ls, err := a.c.listLedgers(ctx)
	if err != nil {
		return rep, err
	}
	var named []string
	for _, l := range ls {
		for _, b := range l.md.AllBookies() {
			if !slices.Contains(named, b) {
				named = append(named, b)
			}
		}
	}
	lost := a.lostSet(v, named, time.Now())
	gone := func(b string) bool { return !v.registered[b] || v.decommissioned[b] }
	var exclude []string
	for _, b := range named {
		if gone(b) {
			exclude = append(exclude, b)
		}
	}
	var errs []error
	// Open ledgers on a lost bookie past their grace period are fenced
	// and closed first (recovery-open); then they are planned as closed.
	errs = append(errs, a.recoverOpen(ctx, ls, lost, &rep)...)
	if ctx.Err() != nil {
		return rep, errors.Join(errs...)
	}
	left := 0
	// Closed ledgers only (PlanRecovery plans no other); those still
	// open count as under-replicated until closed and then recovered.
	for _, l := range ls {
		frags := PlanRecovery(&l.md, lost)
		md, rev := l.md, l.rev
		for _, f := range frags {
			n, newMD, newRev, err := a.recoverFragment(ctx, l.id, md, rev, f, exclude)
			if err != nil {
				errs = append(errs, err)
				a.c.log.Warn("auditor: fragment not recovered", "ledger", l.id, "segment", f.Segment, "bookie", f.Bookie, "err", err)
				if ctx.Err() != nil {
					return rep, errors.Join(errs...)
				}
				continue
			}
			md, rev = newMD, newRev
			rep.Fragments++
			rep.Entries += n
		}
		if len(LostBookies(&md, gone)) > 0 {
			left++
		}
	}
	rep.UnderReplicated = left
	a.underReplicated.Store(int64(left))
	return rep, errors.Join(errs...)
}

// recoverOpen fences and closes (OpenRecover) the ledgers of ls that are
// not closed, have a copy on a lost bookie and have been seen so for the
// open-ledger grace period (DueOpenLedgers), and replaces their entries
// of ls by the closed metadata so that the pass re-replicates them. A
// ledger deleted meanwhile is dropped from the wait.
func (a *Auditor) recoverOpen(ctx context.Context, ls []storedLedger, lost func(string) bool, rep *AuditReport) []error {
	var waiting []uint64
	at := map[uint64]int{}
	for i, l := range ls {
		if l.md.State != StateClosed && len(LostBookies(&l.md, lost)) > 0 {
			waiting = append(waiting, l.id)
			at[l.id] = i
		}
	}
	a.mu.Lock()
	due := DueOpenLedgers(a.openSince, waiting, time.Now(), a.cfg.OpenLedgerGracePeriod)
	a.mu.Unlock()
	var errs []error
	for _, id := range due {
		a.c.log.Info("auditor: fencing an open ledger on a lost bookie after the grace period", "ledger", id,
			"bookies", LostBookies(&ls[at[id]].md, lost), "grace", a.cfg.OpenLedgerGracePeriod)
		_, err := a.c.OpenRecover(ctx, id)
		if err == nil {
			var md Metadata
			var rev int64
			if md, rev, err = a.c.Metadata(ctx, id); err == nil {
				ls[at[id]].md, ls[at[id]].rev = md, rev
				rep.OpenRecovered++
				a.openRecovered.Add(ctx, 1)
				a.c.log.Info("auditor: open ledger recovered", "ledger", id, "lastEntry", md.LastEntry)
			}
		}
		if err != nil {
			if errors.Is(err, ErrNoLedger) {
				continue // deleted meanwhile; the next pass forgets it
			}
			errs = append(errs, fmt.Errorf("ledger %d: auditor: recover open ledger: %w", id, err))
			a.c.log.Warn("auditor: open ledger not recovered", "ledger", id, "err", err)
			if ctx.Err() != nil {
				return errs
			}
		}
	}
	return errs
}

// fullScanEvery is how often a pass reads every ledger's metadata even
// when the bookies look quiet (quiet).
const fullScanEvery = time.Minute

// fullScanDue says whether this pass reads every ledger: when the
// bookies are not quiet, or the last full scan is fullScanEvery old. It
// records the scan.
func (a *Auditor) fullScanDue(quiet bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if quiet && !a.lastFull.IsZero() && time.Since(a.lastFull) < fullScanEvery {
		return false
	}
	a.lastFull = time.Now()
	return true
}

// quiet reports whether no bookie can be lost now: every bookie with a
// cookie is registered, none of them is decommissioned and none is being
// timed.
// A pass then skips reading every ledger (until fullScanEvery), as only a
// bookie retired before its ledgers were moved could be missed.
func (a *Auditor) quiet(ctx context.Context, v bookieView) (bool, error) {
	a.mu.Lock()
	timing := len(a.missingSince) > 0
	a.mu.Unlock()
	if timing {
		return false, nil
	}
	p := proto.CookiesPrefix(metastore.RegionPrefix(a.c.cfg.Region))
	keys, err := a.c.meta.ListKeys(ctx, p)
	if err != nil {
		return false, fmt.Errorf("auditor: list cookies: %w", err)
	}
	cookie := map[string]bool{}
	for _, k := range keys {
		id := strings.TrimPrefix(k, p)
		if !v.registered[id] {
			return false, nil
		}
		cookie[id] = true
	}
	// A mark on a bookie since retired (no cookie, not registered) is
	// left to the full scans.
	for b := range v.decommissioned {
		if cookie[b] || v.registered[b] {
			return false, nil
		}
	}
	return true, nil
}

// copyWindow bounds the entry copies one fragment has in flight.
const copyWindow = 16

// recoverFragment copies fragment f of ledger id to a replacement bookie
// and swaps it into the metadata with compare-and-swap. It returns the
// entries copied and the ledger's new metadata.
func (a *Auditor) recoverFragment(ctx context.Context, id uint64, md Metadata, rev int64, f Fragment, exclude []string) (int, Metadata, int64, error) {
	c := a.c
	cctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	cands, err := c.placementCandidates(cctx)
	cancel()
	if err != nil {
		return 0, Metadata{}, 0, fmt.Errorf("ledger %d: auditor: %w", id, err)
	}
	seg := md.Ensembles[f.Segment]
	repl, err := Replace(cands, seg.Bookies, []int{f.Index}, md.WriteQuorum, exclude, md.affinity(), c.rand())
	if err != nil {
		return 0, Metadata{}, 0, fmt.Errorf("ledger %d: auditor: replace %s: %w", id, f.Bookie, err)
	}
	target := repl[f.Index]
	entries := f.Entries(md.EnsembleSize, md.WriteQuorum)
	if err := a.copyEntries(ctx, id, &md, entries, target); err != nil {
		return 0, Metadata{}, 0, err
	}
	key := LedgerKey(c.cfg.Region, id)
	for first := true; ; first = false {
		n, err := md.WithFragmentReplaced(f, target)
		if err != nil {
			if !first && !slices.Contains(md.AllBookies(), target) {
				a.dropCopies(ctx, id, target) // another auditor recovered it meanwhile
			}
			return 0, Metadata{}, 0, fmt.Errorf("ledger %d: auditor: %w", id, err)
		}
		val, err := EncodeMetadata(&n)
		if err != nil {
			return 0, Metadata{}, 0, err
		}
		mctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		newRev, err := c.meta.CAS(mctx, key, val, rev)
		cancel()
		if err == nil {
			a.entries.Add(ctx, int64(len(entries)))
			a.fragments.Add(ctx, 1)
			c.log.Info("auditor: fragment re-replicated", "ledger", id, "segment", f.Segment,
				"from", f.Bookie, "to", target, "entries", len(entries))
			return len(entries), n, newRev, nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return 0, Metadata{}, 0, fmt.Errorf("ledger %d: auditor: update metadata: %w", id, err)
		}
		// Changed meanwhile: a closed ledger's ensembles change only by
		// recovery, and its entries never do, so the copies stay good;
		// re-apply the swap unless the ledger is gone or the position was
		// recovered by someone else (WithFragmentReplaced then refuses).
		cur, curRev, err := c.Metadata(ctx, id)
		if errors.Is(err, ErrNoLedger) {
			a.dropCopies(ctx, id, target)
			return 0, Metadata{}, 0, fmt.Errorf("ledger %d: auditor: deleted meanwhile: %w", id, err)
		}
		if err != nil {
			return 0, Metadata{}, 0, fmt.Errorf("ledger %d: auditor: %w", id, err)
		}
		md, rev = cur, curRev
	}
}

// dropCopies deletes, best effort, the copies of ledger id made on bookie
// target that no metadata will name.
func (a *Auditor) dropCopies(ctx context.Context, id uint64, target string) {
	dctx, cancel := context.WithTimeout(ctx, a.c.cfg.RequestTimeout)
	defer cancel()
	if conn, err := a.c.bookie(dctx, target); err == nil {
		conn.Delete(dctx, id)
	}
}

// copyEntries reads each entry from a surviving copy (readEntry, the
// reader's path) and adds it, exactly as stored, to bookie target.
func (a *Auditor) copyEntries(ctx context.Context, id uint64, md *Metadata, entries []int64, target string) error {
	c := a.c
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		errMu.Unlock()
	}
	sem := make(chan struct{}, copyWindow)
	for _, e := range entries {
		select {
		case sem <- struct{}{}:
		case <-cctx.Done():
		}
		if cctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, rcancel := context.WithTimeout(cctx, c.cfg.RequestTimeout)
			defer rcancel()
			_, raw, err := c.readEntry(rctx, id, md, e)
			if err != nil {
				fail(fmt.Errorf("ledger %d: auditor: read entry %d: %w", id, e, err))
				return
			}
			conn, err := c.bookie(rctx, target)
			if err == nil {
				err = conn.Add(rctx, id, uint64(e), raw, true)
			}
			if err != nil {
				fail(fmt.Errorf("ledger %d: auditor: copy entry %d to %s: %w", id, e, target, err))
			}
		})
	}
	wg.Wait()
	errMu.Lock()
	defer errMu.Unlock()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// Operations is the operators' side of automatic recovery, as the admin
// API serves it.
type Operations struct {
	Client *Client
	// Auditor, when set, is asked for a pass after a decommission (it acts
	// only if this process leads).
	Auditor *Auditor
}

// Decommission marks bookie decommissioned (package function Decommission).
func (o Operations) Decommission(ctx context.Context, bookie string) error {
	if err := Decommission(ctx, o.Client.meta, o.Client.cfg.Region, bookie); err != nil {
		return err
	}
	if o.Auditor != nil {
		o.Auditor.requestPass()
	}
	return nil
}

// Recommission takes the decommissioned mark off bookie (Recommission).
func (o Operations) Recommission(ctx context.Context, bookie string) error {
	return Recommission(ctx, o.Client.meta, o.Client.cfg.Region, bookie)
}

// Decommissioned lists the bookies marked decommissioned.
func (o Operations) Decommissioned(ctx context.Context) ([]string, error) {
	return DecommissionedBookies(ctx, o.Client.meta, o.Client.cfg.Region)
}

// UnderReplicated lists the ledgers waiting for recovery (UnderReplicatedLedgers).
func (o Operations) UnderReplicated(ctx context.Context) ([]UnderReplicated, error) {
	return o.Client.UnderReplicatedLedgers(ctx)
}
