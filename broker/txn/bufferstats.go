package txn

// What a topic's buffer reports of itself (the admin API's transaction
// buffer stats). Kept apart from buffer.go: these only read it.

// OngoingCount is the number of transactions with entries here that have
// not ended.
func (b *Buffer) OngoingCount() int { return len(b.ongoing) }

// FirstEntry is the position of id's first entry in the log: false when
// id is not ongoing here, or its first entry is not stored yet.
func (b *Buffer) FirstEntry(id ID) (Position, bool) {
	lim, ok := b.ongoing[id]
	if !ok {
		return Position{}, false
	}
	if _, stored := b.refined[id]; !stored {
		return Position{}, false
	}
	// A refined limit stands just before the first entry (Written,
	// Replay).
	return Position{Ledger: lim.Ledger, Entry: lim.Entry + 1}, true
}

// WasAborted says whether id ended aborted here, as long as the buffer
// remembers it (until the ledger holding its abort marker is trimmed).
func (b *Buffer) WasAborted(id ID) bool {
	_, ok := b.aborted[id]
	return ok
}
