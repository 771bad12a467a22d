package policy

import (
	"errors"
	"fmt"
)

// SyncReplication makes a replicated namespace's, or topic's, publishes
// synchronous across regions (docs/failover.md, "Synchronous
// replication"): the region that stores a client's message acknowledges
// it only once Regions other regions of the replication clusters hold it
// durably too, so a failover to any of those regions loses nothing that
// was acknowledged (RPO 0).
//
// When fewer than Regions other regions confirm (cut off, down, or
// behind), publishes are held. FallbackAfterSeconds decides for how
// long: 0 holds them until the regions confirm (RPO 0 whatever happens;
// clients see their send timeouts instead), a positive value
// acknowledges them from the local copy alone once the oldest has waited
// that long, and the topic stays asynchronous ("degraded", shown in its
// stats, logged and counted) until every region it waits for has caught
// up again.
type SyncReplication struct {
	// Regions is how many other regions must hold an entry (1 or more;
	// at most the other replication clusters, checked when it is set).
	Regions int `json:"regions"`
	// FallbackAfterSeconds: 0 never falls back; up to
	// MaxSyncFallbackSeconds.
	FallbackAfterSeconds int `json:"fallbackAfterSeconds,omitempty"`
}

// MaxSyncRegions bounds SyncReplication.Regions.
const MaxSyncRegions = 64

// MaxSyncFallbackSeconds bounds SyncReplication.FallbackAfterSeconds (an
// hour).
const MaxSyncFallbackSeconds = 3600

// Validate checks the values, not the clusters (CheckClusters does).
func (s SyncReplication) Validate() error {
	var errs []error
	if s.Regions < 1 || s.Regions > MaxSyncRegions {
		errs = append(errs, fmt.Errorf("regions: %d is not within 1..%d", s.Regions, MaxSyncRegions))
	}
	if s.FallbackAfterSeconds < 0 || s.FallbackAfterSeconds > MaxSyncFallbackSeconds {
		errs = append(errs, fmt.Errorf("fallbackAfterSeconds: %d is not within 0..%d", s.FallbackAfterSeconds, MaxSyncFallbackSeconds))
	}
	return errors.Join(errs...)
}

// CheckClusters reports whether the replication clusters leave Regions
// other regions to wait for.
func (s SyncReplication) CheckClusters(clusters []string) error {
	if others := len(clusters) - 1; s.Regions > others {
		return fmt.Errorf("%w: syncReplication: %d other regions asked for, but the replication clusters %v have %d besides the one that stores a message", ErrInvalid, s.Regions, clusters, max(others, 0))
	}
	return nil
}
