package broker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/replication"
)

// De-duplication of an old primary's late tail (docs/failover.md): after
// an unplanned failover a producer resends to the new primary what it had
// pending, from its first unacknowledged sequence id; the old primary may
// have stored some of those messages too and brings them later, in its
// late tail. The new primary drops a late message of a producer at or
// after the first sequence id that producer stored here in the current
// epoch. That first sequence id must survive a restart of the new
// primary's broker (or a move of the topic to another broker of the
// region), so it is kept with the de-duplication snapshot:
//
//   - the epoch mark: before this region stores its first own entry as
//     the primary of an epoch, it records, durably, the epoch and the last
//     position of the log then. Every own entry after that position was
//     stored in that epoch (or a later one, which moves the mark again);
//   - the snapshot lists each producer's first sequence id of the mark's
//     epoch, and a replay of the entries after the snapshot's position
//     adds what came since (own entries after the mark only).
//
// epochFirsts is that state, a pure value guarded by its topic's mu.

// Keys of the de-duplication snapshot (the isobar.dedup cursor's
// properties) beside the producers' sequence ids and the replication
// high-water marks.
const (
	// epochMarkKey: "<epoch>@<ledger>:<entry>".
	epochMarkKey = replication.ReservedPrefix + "epoch"
	// firstSeqPrefix + producer: "<epoch>:<first sequence id>".
	firstSeqPrefix = replication.ReservedPrefix + "first."
)

// epochMark says that every own entry after position after was stored
// while this region was the primary of epoch (or of a later epoch).
// epoch 0: no mark (this region never wrote as a primary).
type epochMark struct {
	epoch int64
	after mledger.Position
}

// epochFirsts is, per producer, the first sequence id stored here in the
// mark's epoch.
type epochFirsts struct {
	mark  epochMark
	first map[string]int64 // nil until one
}

// marked reports whether own entries of epoch may be stored now: the
// mark is at epoch or later.
func (e *epochFirsts) marked(epoch int64) bool { return e.mark.epoch >= epoch }

// setMark moves the mark to a later epoch; the first sequence ids of the
// earlier one are dropped.
func (e *epochFirsts) setMark(m epochMark) {
	if m.epoch <= e.mark.epoch {
		return
	}
	e.mark, e.first = m, nil
}

// note records seq, a sequence id of producer stored (or about to be) as
// an own entry in the mark's epoch.
func (e *epochFirsts) note(producer string, seq int64) {
	if e.mark.epoch == 0 || producer == "" {
		return
	}
	if cur, ok := e.first[producer]; ok && cur <= seq {
		return
	}
	if e.first == nil {
		e.first = map[string]int64{}
	}
	e.first[producer] = seq
}

// replayed records an own entry found in the log at pos (a replay after
// the snapshot): it counts only after the mark.
func (e *epochFirsts) replayed(pos mledger.Position, producer string, seq int64) {
	if e.mark.epoch == 0 || pos.Compare(e.mark.after) <= 0 {
		return
	}
	e.note(producer, seq)
}

// firstIn returns producer's first sequence id stored here in epoch.
func (e *epochFirsts) firstIn(producer string, epoch int64) (int64, bool) {
	if epoch == 0 || e.mark.epoch != epoch {
		return 0, false
	}
	s, ok := e.first[producer]
	return s, ok
}

// appendProps writes the mark and the first sequence ids into a
// snapshot's properties.
func (e *epochFirsts) appendProps(props map[string]string) {
	if e.mark.epoch == 0 {
		return
	}
	props[epochMarkKey] = strconv.FormatInt(e.mark.epoch, 10) + "@" + FormatSourcePosition(e.mark.after)
	ep := strconv.FormatInt(e.mark.epoch, 10) + ":"
	for p, s := range e.first {
		props[firstSeqPrefix+p] = ep + strconv.FormatInt(s, 10)
	}
}

// isEpochFirstKey reports whether a snapshot key is one of appendProps'.
func isEpochFirstKey(k string) bool {
	return k == epochMarkKey || strings.HasPrefix(k, firstSeqPrefix)
}

// loadEpochFirsts reads the mark and the first sequence ids of its epoch
// from a snapshot's properties; malformed values are reported, and an
// entry of another epoch than the mark's is left out.
func loadEpochFirsts(props map[string]string) (epochFirsts, error) {
	var e epochFirsts
	v, ok := props[epochMarkKey]
	if !ok {
		return e, nil
	}
	es, ps, ok := strings.Cut(v, "@")
	epoch, err := strconv.ParseInt(es, 10, 64)
	if !ok || err != nil || epoch <= 0 {
		return epochFirsts{}, fmt.Errorf("de-duplication snapshot: epoch mark %q: want <epoch>@<ledger>:<entry>", v)
	}
	after, err := ParseSourcePosition(ps)
	if err != nil {
		return epochFirsts{}, fmt.Errorf("de-duplication snapshot: epoch mark %q: %w", v, err)
	}
	e.mark = epochMark{epoch: epoch, after: after}
	for k, v := range props {
		p, ok := strings.CutPrefix(k, firstSeqPrefix)
		if !ok {
			continue
		}
		es, ss, ok := strings.Cut(v, ":")
		ep, err1 := strconv.ParseInt(es, 10, 64)
		seq, err2 := strconv.ParseInt(ss, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return epochFirsts{}, fmt.Errorf("de-duplication snapshot: first sequence id of %q: %q: want <epoch>:<sequence id>", p, v)
		}
		if ep == epoch {
			e.note(p, seq)
		}
	}
	return e, nil
}
