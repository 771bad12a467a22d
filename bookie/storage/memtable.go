package storage

// memtable is the write cache: what the journal has made durable since the
// last flush. The active memtable is filled by the journal goroutine; a full
// one is frozen (Store.flushing) and written to ledger storage while a new
// one fills. A frozen memtable's maps are never modified, so the flusher
// reads it without locks; only memLedger.dead changes, under Store.mu.
type memtable struct {
	ledgers map[uint64]*memLedger
	// deletes are applied before everything else in the table when it is
	// flushed: anything a ledger holds in the table came after its delete.
	deletes map[uint64]struct{}
	bytes   int64
	entries int // entries held, for metrics
	// pos is the journal position the table covers up to; set when frozen.
	pos journalPos
}

type memLedger struct {
	entries map[uint64][]byte
	fenced  bool // a fence record for the ledger is in this table
	// dead is set (under Store.mu) when the ledger is deleted after this
	// table was frozen: the flusher skips it and reads ignore it.
	dead bool
}

// memEntryOverhead approximates the memory an entry costs beyond its data.
const memEntryOverhead = 64

func newMemtable() *memtable {
	return &memtable{ledgers: map[uint64]*memLedger{}, deletes: map[uint64]struct{}{}}
}

func (m *memtable) empty() bool { return len(m.ledgers) == 0 && len(m.deletes) == 0 }

func (m *memtable) ledger(id uint64) *memLedger {
	ml := m.ledgers[id]
	if ml == nil {
		ml = &memLedger{entries: map[uint64][]byte{}}
		m.ledgers[id] = ml
	}
	return ml
}

func (m *memtable) put(ledger, entry uint64, data []byte) {
	ml := m.ledger(ledger)
	if old, ok := ml.entries[entry]; ok {
		m.bytes -= int64(len(old)) + memEntryOverhead
	} else {
		m.entries++
	}
	ml.entries[entry] = data
	m.bytes += int64(len(data)) + memEntryOverhead
}

func (m *memtable) get(ledger, entry uint64) ([]byte, bool) {
	ml := m.ledgers[ledger]
	if ml == nil || ml.dead {
		return nil, false
	}
	d, ok := ml.entries[entry]
	return d, ok
}

// drop forgets everything the table holds for ledger.
func (m *memtable) drop(ledger uint64) {
	if ml := m.ledgers[ledger]; ml != nil {
		for _, d := range ml.entries {
			m.bytes -= int64(len(d)) + memEntryOverhead
		}
		m.entries -= len(ml.entries)
		delete(m.ledgers, ledger)
	}
}
