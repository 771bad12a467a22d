package mledger

// A managed ledger tells its owner (Deps.Changed) when what metrics read
// of it changes: the ledger list and sizes, the last confirmed entry, the
// cursors and their acknowledgements. It tells once, at the first change
// after ClearChanged, so that an owner can keep sums over many managed
// ledgers and read again only those that changed (docs/decisions.md,
// "Idle topics cost nothing periodic"); later changes cost a load of a
// flag.

// ClearChanged arms Deps.Changed again: it is called at the next change.
// A reader clears, then reads, so that a change racing with its read is
// reported.
func (m *ManagedLedger) ClearChanged() { m.changed.Store(false) }

// noteChange records a change, calling Deps.Changed if it is the first
// since ClearChanged. No lock of m may be held.
func (m *ManagedLedger) noteChange() {
	if m.deps.Changed == nil || m.changed.Load() || !m.changed.CompareAndSwap(false, true) {
		return
	}
	m.deps.Changed(m)
}
