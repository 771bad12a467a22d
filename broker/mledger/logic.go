package mledger

import (
	"fmt"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger/ackset"
)

// The functions in this file are pure: they work on a view of the ledger
// list in which every ledger, the open one included, carries its number of
// readable entries (see ManagedLedger.view).

// findLedger returns the index of the first ledger whose id is at least id.
func findLedger(ls []LedgerInfo, id int64) int {
	for i, l := range ls {
		if l.ID >= id {
			return i
		}
	}
	return len(ls)
}

// firstFrom returns entry 0 of the first non-empty ledger at index i or later.
func firstFrom(ls []LedgerInfo, i int) (Position, bool) {
	for ; i < len(ls); i++ {
		if ls[i].Entries > 0 {
			return Position{Ledger: ls[i].ID, Entry: 0}, true
		}
	}
	return Position{}, false
}

// nextPosition returns the entry after p: the next entry of p's ledger, or
// entry 0 of the next non-empty ledger; false if p is the last entry (or
// after it). p may be (L, -1) or name a ledger no longer in the list.
func nextPosition(ls []LedgerInfo, p Position) (Position, bool) {
	i := findLedger(ls, p.Ledger)
	if i == len(ls) {
		return Position{}, false
	}
	if ls[i].ID == p.Ledger {
		if p.Entry+1 < ls[i].Entries {
			return Position{Ledger: p.Ledger, Entry: p.Entry + 1}, true
		}
		if p.Entry+1 > ls[i].Entries {
			// After the end of its ledger: only valid as the end of the log.
			return Position{}, false
		}
		return firstFrom(ls, i+1)
	}
	return firstFrom(ls, i)
}

// lastPosition returns the last entry of the log, or (first ledger, -1)
// when there is none ((0, -1) for an empty list).
func lastPosition(ls []LedgerInfo) Position {
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].Entries > 0 {
			return Position{Ledger: ls[i].ID, Entry: ls[i].Entries - 1}
		}
	}
	if len(ls) == 0 {
		return Position{Ledger: 0, Entry: -1}
	}
	return Position{Ledger: ls[0].ID, Entry: -1}
}

// startPosition resolves where a read from `from` begins. It returns the
// first entry to read, or atEnd when from is just after the last entry or
// the list is empty. A
// position inside the log that names a ledger no longer in the list (trimmed,
// or dropped because empty) moves to the next ledger's entry 0; a position
// after the end of the log is ErrInvalidPosition.
func startPosition(ls []LedgerInfo, from Position) (p Position, atEnd bool, err error) {
	if from.Ledger < 0 || from.Entry < 0 {
		return Position{}, false, fmt.Errorf("%w: %v is negative", ErrInvalidPosition, from)
	}
	if len(ls) == 0 {
		// No ledger yet (or the only one was dropped empty): every
		// position is the end of the log.
		return Position{}, true, nil
	}
	i := findLedger(ls, from.Ledger)
	if i == len(ls) {
		return Position{}, false, fmt.Errorf("%w: %v is beyond the end %v", ErrInvalidPosition, from, lastPosition(ls))
	}
	if ls[i].ID == from.Ledger {
		switch {
		case from.Entry < ls[i].Entries:
			return from, false, nil
		case from.Entry > ls[i].Entries:
			return Position{}, false, fmt.Errorf("%w: %v is beyond the end of ledger %d (%d entries)", ErrInvalidPosition, from, from.Ledger, ls[i].Entries)
		}
		i++ // just after the last entry of its ledger
	} else if from.Entry != 0 {
		// A ledger not in the list: only its entry 0 is a sensible
		// "beginning"; an entry inside it cannot be checked.
		if i == 0 {
			// Trimmed: everything before the first ledger is gone.
			if p, ok := firstFrom(ls, 0); ok {
				return p, false, nil
			}
			return Position{}, true, nil
		}
		return Position{}, false, fmt.Errorf("%w: %v: ledger %d is not part of the log", ErrInvalidPosition, from, from.Ledger)
	}
	if p, ok := firstFrom(ls, i); ok {
		return p, false, nil
	}
	return Position{}, true, nil
}

// validEntry reports whether p names an existing entry of the log.
func validEntry(ls []LedgerInfo, p Position) bool {
	i := findLedger(ls, p.Ledger)
	return i < len(ls) && ls[i].ID == p.Ledger && p.Entry >= 0 && p.Entry < ls[i].Entries
}

// entriesAfter counts the entries of the log strictly after p.
func entriesAfter(ls []LedgerInfo, p Position) int64 {
	var n int64
	for _, l := range ls {
		switch {
		case l.ID > p.Ledger:
			n += l.Entries
		case l.ID == p.Ledger:
			n += max(0, l.Entries-(p.Entry+1))
		}
	}
	return n
}

// backlog is the number of entries after markDelete that are not
// individually acknowledged (acked is that count, ackset.Set.Count).
func backlog(ls []LedgerInfo, markDelete Position, acked int64) int64 {
	return max(0, entriesAfter(ls, markDelete)-acked)
}

// Retention keeps consumed ledgers, as Pulsar's retention policy: a
// consumed ledger is deleted once it is older than Time or once the
// retained ledgers after it exceed Size bytes. A negative value is no
// limit of that kind (kept forever); zero keeps nothing. Set says a policy
// was given at all: without one, a topic without cursors keeps everything.
type Retention struct {
	Time time.Duration
	Size int64
	Set  bool
}

// trimmable returns the ids of the ledgers that can be deleted, a prefix of
// the list: closed ledgers wholly at or before slowest, the slowest cursor's
// mark-delete position (every ledger when there are no cursors and a
// retention policy is set), that retention does not keep; never current nor
// the last ledger of the list (so the list is never empty and positions
// keep an anchor). Empty ledgers go as soon as they are in the prefix.
func trimmable(ls []LedgerInfo, current int64, slowest Position, haveCursors bool, ret Retention, nowMs int64) []int64 {
	if (!haveCursors && !ret.Set) || len(ls) == 0 {
		return nil
	}
	// The consumed prefix.
	n := 0
	for _, l := range ls[:len(ls)-1] {
		if l.ID == current || l.State != LedgerClosed {
			break
		}
		if haveCursors && l.Entries > 0 && !(l.ID < slowest.Ledger || (l.ID == slowest.Ledger && slowest.Entry >= l.Entries-1)) {
			break
		}
		n++
	}
	var total int64
	for _, l := range ls {
		total += l.Size
	}
	var out []int64
	for _, l := range ls[:n] {
		expired := ret.Time >= 0 && (l.Closed == 0 || nowMs-l.Closed >= ret.Time.Milliseconds())
		overSize := ret.Size >= 0 && total > ret.Size
		if l.Entries > 0 && !expired && !overSize {
			break
		}
		out = append(out, l.ID)
		total -= l.Size
	}
	return out
}

// slowestMarkDelete returns the smallest mark-delete position of cs.
func slowestMarkDelete(cs []cursorMeta) (Position, bool) {
	if len(cs) == 0 {
		return Position{}, false
	}
	p := Position{Ledger: cs[0].MarkDelete.Ledger, Entry: cs[0].MarkDelete.Entry}
	for _, c := range cs[1:] {
		q := Position{Ledger: c.MarkDelete.Ledger, Entry: c.MarkDelete.Entry}
		if q.Compare(p) < 0 {
			p = q
		}
	}
	return p, true
}

// skipPosition returns the position k entries after p (p itself when k is
// 0), stopping at the last entry of the log.
func skipPosition(ls []LedgerInfo, p Position, k int64) Position {
	for k > 0 {
		i := findLedger(ls, p.Ledger)
		if i == len(ls) {
			return p
		}
		if ls[i].ID == p.Ledger {
			// Within p's ledger first.
			room := ls[i].Entries - 1 - p.Entry
			if room >= k {
				return Position{Ledger: p.Ledger, Entry: p.Entry + k}
			}
			if room > 0 {
				p.Entry += room
				k -= room
			}
			n, ok := firstFrom(ls, i+1)
			if !ok {
				return p
			}
			p = n
			k--
			continue
		}
		n, ok := firstFrom(ls, i)
		if !ok {
			return p
		}
		p = n
		k--
	}
	return p
}

// prevPosition returns the entry before p (p may be the position just after
// the last entry); false if there is none.
func prevPosition(ls []LedgerInfo, p Position) (Position, bool) {
	i := findLedger(ls, p.Ledger)
	if i < len(ls) && ls[i].ID == p.Ledger && p.Entry > 0 {
		return Position{Ledger: p.Ledger, Entry: min(p.Entry, ls[i].Entries) - 1}, true
	}
	for i--; i >= 0; i-- {
		if ls[i].Entries > 0 {
			return Position{Ledger: ls[i].ID, Entry: ls[i].Entries - 1}, true
		}
	}
	return Position{}, false
}

// nthAfter returns the n-th entry (n >= 1) after p that acked does not
// cover (acked: sorted, disjoint ranges, all after p); false when the log
// has fewer such entries. It jumps over the gaps between ranges, so its
// cost is O(len(acked) * len(ls)), not O(n).
func nthAfter(ls []LedgerInfo, p Position, acked []ackset.Range, n int64) (Position, bool) {
	if n < 1 {
		return Position{}, false
	}
	for _, r := range acked {
		// The entries in (p, r.Start()): after p, before the range.
		gap := max(0, entriesAfter(ls, p)-entriesAfter(ls, Position{Ledger: r.Ledger, Entry: r.First - 1}))
		if gap >= n {
			break
		}
		n -= gap
		if end := r.End(); end.Compare(p) > 0 {
			p = end
		}
	}
	if entriesAfter(ls, p) < n {
		return Position{}, false
	}
	q := skipPosition(ls, p, n)
	return q, validEntry(ls, q)
}
