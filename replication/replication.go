// Package replication is the contract between brokers and replicator
// workers: the names of replication cursors and replicator producers, the
// message property that carries a replicated entry's source position and
// its format, and the helpers that read a message's trace context. Both
// sides import it; neither imports the other. It depends only on the
// Pulsar codec's message metadata (package wire/pb) and the OpenTelemetry
// API.
package replication

import (
	"fmt"
	"strconv"
	"strings"
)

// ReservedPrefix starts the names of the broker's own cursors and
// producers; clients may not use it for subscriptions.
const ReservedPrefix = "isobar."

// Prefix starts the names of replication cursors and replicator
// producers.
const Prefix = ReservedPrefix + "repl."

// ClientVersion is the client_version a replicator worker's connections
// send in CONNECT. Brokers answer their lookups in their own region even
// for an active-standby namespace whose primary is elsewhere (the
// replicator writes the standby copies).
const ClientVersion = "isobar-replicator"

// SourcePositionProperty is the message property holding a replicated
// entry's position in its source region, "<ledger>:<entry>" (Pulsar's
// replicator uses the same name and format).
const SourcePositionProperty = "__MSG_PROP_REPL_SOURCE_POSITION"

// CursorName is the name of a topic's replication cursor to remote: the
// Failover subscription a source worker consumes.
func CursorName(remote string) string { return Prefix + remote }

// ProducerName is the name of a replicator producer bringing entries from
// source; worker tells the producers of several workers apart (empty:
// none).
func ProducerName(source, worker string) string {
	if worker == "" {
		return Prefix + source
	}
	return Prefix + source + "." + worker
}

// ProducerSource returns the source cluster named by a replicator
// producer's name; ok is false when name is not one.
func ProducerSource(name string) (source string, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok || rest == "" {
		return "", false
	}
	src, _, _ := strings.Cut(rest, ".")
	return src, src != ""
}

// Position is an entry's position in its source region's managed ledger.
type Position struct {
	Ledger int64 `json:"l"`
	Entry  int64 `json:"e"`
}

// String formats p as a SourcePositionProperty value.
func (p Position) String() string {
	return strconv.FormatInt(p.Ledger, 10) + ":" + strconv.FormatInt(p.Entry, 10)
}

// ParsePosition parses a SourcePositionProperty value.
func ParsePosition(s string) (Position, error) {
	l, e, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, fmt.Errorf("source position %q: want <ledger>:<entry>", s)
	}
	ln, err1 := strconv.ParseInt(l, 10, 64)
	en, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil || ln < 0 || en < 0 {
		return Position{}, fmt.Errorf("source position %q: want <ledger>:<entry>, both non-negative integers", s)
	}
	return Position{Ledger: ln, Entry: en}, nil
}
