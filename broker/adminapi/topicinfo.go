package adminapi

// ManagedLedgerInfo is Pulsar's answer to GET .../{topic}/internal-info:
// the topic's managed-ledger metadata.
type ManagedLedgerInfo struct {
	Version            int                   `json:"version"`
	CreationDate       string                `json:"creationDate"`
	ModificationDate   string                `json:"modificationDate"`
	Ledgers            []LedgerInfoBrief     `json:"ledgers"`
	TerminatedPosition *PositionInfo         `json:"terminatedPosition,omitempty"`
	Cursors            map[string]CursorInfo `json:"cursors"`
}

// LedgerInfoBrief is one ledger of ManagedLedgerInfo.
type LedgerInfoBrief struct {
	LedgerID    int64 `json:"ledgerId"`
	Entries     int64 `json:"entries"`
	Size        int64 `json:"size"`
	Timestamp   int64 `json:"timestamp"`
	IsOffloaded bool  `json:"isOffloaded"`
}

// PositionInfo is a ledger position in ManagedLedgerInfo.
type PositionInfo struct {
	LedgerID int64 `json:"ledgerId"`
	EntryID  int64 `json:"entryId"`
}

// MessageRangeInfo is a run of individually acknowledged entries: (From, To].
type MessageRangeInfo struct {
	From      PositionInfo `json:"from"`
	To        PositionInfo `json:"to"`
	Offloaded bool         `json:"offloaded"`
}

// CursorInfo is one cursor of ManagedLedgerInfo.
type CursorInfo struct {
	Version                   int                `json:"version"`
	CreationDate              string             `json:"creationDate"`
	ModificationDate          string             `json:"modificationDate"`
	CursorsLedgerID           int64              `json:"cursorsLedgerId"`
	MarkDelete                PositionInfo       `json:"markDelete"`
	IndividualDeletedMessages []MessageRangeInfo `json:"individualDeletedMessages"`
	Properties                map[string]int64   `json:"properties"`
}
