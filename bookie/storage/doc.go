// Package storage is a bookie's local storage engine: it owns the journal
// (every add, fence and delete, group-committed with fdatasync before it is
// acknowledged), the write cache filled from it, and the ledger storage the
// cache is flushed to (entry logs grouped by ledger, per-ledger index files,
// a checkpoint that lets old journal files go), plus entry log compaction.
// It follows Apache BookKeeper's bookie model; docs/storage.md explains the
// design and docs/format/journal.md and docs/format/entrylog.md the files.
//
// All disk access goes through a vfs.FS, so tests run the engine on a strict
// in-memory filesystem to simulate power loss at any point, and on an
// error-injecting one to fail any single operation.
package storage
