package mledger

// NthUnacked returns the n-th entry (n >= 1) after the cursor's
// mark-delete position that is not acknowledged (a partly acknowledged
// batch entry counts); false when there are fewer. The cursor does not
// move.
func (c *Cursor) NthUnacked(n int64) (Position, bool) {
	ls := c.m.view()
	c.mu.Lock()
	md, acked := c.set.MarkDelete(), c.set.Ranges()
	c.mu.Unlock()
	return nthAfter(ls, md, acked, n)
}

// NthEntry returns the n-th entry (n >= 1) of the log counting from its
// first; false when it has fewer.
func (m *ManagedLedger) NthEntry(n int64) (Position, bool) {
	ls := m.view()
	if len(ls) == 0 {
		return Position{}, false
	}
	return nthAfter(ls, Position{Ledger: ls[0].ID, Entry: -1}, nil, n)
}

// NthAfter returns the n-th entry (n >= 1) of the log after p; false when
// it has fewer.
func (m *ManagedLedger) NthAfter(p Position, n int64) (Position, bool) {
	return nthAfter(m.view(), p, nil, n)
}

// NthLastEntry returns the n-th entry (n >= 1) of the log counting back
// from its last (1: the last entry); false when it has fewer.
func (m *ManagedLedger) NthLastEntry(n int64) (Position, bool) {
	ls := m.view()
	if len(ls) == 0 || n < 1 {
		return Position{}, false
	}
	before := Position{Ledger: ls[0].ID, Entry: -1}
	total := entriesAfter(ls, before)
	if n > total {
		return Position{}, false
	}
	return nthAfter(ls, before, nil, total-n+1)
}
