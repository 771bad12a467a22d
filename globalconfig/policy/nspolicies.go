package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Schema compatibility strategies (Policies.SchemaCompatibilityStrategy),
// Pulsar's names. Undefined, the zero value, follows the broker's default.
const (
	SchemaCompatibilityUndefined = "UNDEFINED"
)

// SchemaCompatibilityStrategies are the strategies a namespace may set,
// Pulsar's names.
var SchemaCompatibilityStrategies = []string{
	SchemaCompatibilityUndefined, "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE",
	"BACKWARD", "FORWARD", "FULL",
	"BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
}

// ParseSchemaCompatibility returns the strategy named s (any case); an
// error names the strategies there are.
func ParseSchemaCompatibility(s string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if slices.Contains(SchemaCompatibilityStrategies, u) {
		return u, nil
	}
	return "", fmt.Errorf("schema compatibility strategy %q: want one of %s", s, strings.Join(SchemaCompatibilityStrategies, ", "))
}

// PersistencePolicies are a namespace's ledger settings, in Pulsar's
// names: the ensemble size, write quorum and ack quorum of new ledgers,
// and the rate at which cursors' positions are persisted.
type PersistencePolicies struct {
	BookkeeperEnsemble             int     `json:"bookkeeperEnsemble"`
	BookkeeperWriteQuorum          int     `json:"bookkeeperWriteQuorum"`
	BookkeeperAckQuorum            int     `json:"bookkeeperAckQuorum"`
	ManagedLedgerMaxMarkDeleteRate float64 `json:"managedLedgerMaxMarkDeleteRate"`
}

// MaxEnsembleSize bounds PersistencePolicies.BookkeeperEnsemble.
const MaxEnsembleSize = 100

// Validate checks MaxEnsembleSize >= ensemble >= write quorum >= ack
// quorum >= 1 and a rate that is a non-negative number.
func (p PersistencePolicies) Validate() error {
	if p.BookkeeperAckQuorum < 1 || p.BookkeeperWriteQuorum < p.BookkeeperAckQuorum || p.BookkeeperEnsemble < p.BookkeeperWriteQuorum {
		return fmt.Errorf("bookkeeperEnsemble (%d) >= bookkeeperWriteQuorum (%d) >= bookkeeperAckQuorum (%d) >= 1 does not hold",
			p.BookkeeperEnsemble, p.BookkeeperWriteQuorum, p.BookkeeperAckQuorum)
	}
	if p.BookkeeperEnsemble > MaxEnsembleSize {
		return fmt.Errorf("bookkeeperEnsemble %d is more than %d", p.BookkeeperEnsemble, MaxEnsembleSize)
	}
	if r := p.ManagedLedgerMaxMarkDeleteRate; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return fmt.Errorf("managedLedgerMaxMarkDeleteRate %v: want a number 0 or more", r)
	}
	return nil
}

// BookieAffinityGroup names the bookie groups a namespace's ledgers
// should be placed on, Pulsar's BookieAffinityGroupData.
type BookieAffinityGroup struct {
	Primary   string `json:"bookkeeperAffinityGroupPrimary"`
	Secondary string `json:"bookkeeperAffinityGroupSecondary,omitempty"`
}

// Validate checks that the primary group is named.
func (g BookieAffinityGroup) Validate() error {
	if strings.TrimSpace(g.Primary) == "" {
		return fmt.Errorf("bookkeeperAffinityGroupPrimary: required")
	}
	return nil
}

// Bounds of the namespace settings.
const (
	// MaxPropertyLen bounds a property's key and value, in bytes.
	MaxPropertyLen = 4096
	// MaxProperties bounds a namespace's properties.
	MaxProperties = 1024
)

// validateSettings checks the limits and settings of this file's fields,
// each problem named by its JSON field.
func (p *Policies) validateSettings() []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    *int
	}{
		{"max_producers_per_topic", p.MaxProducersPerTopic},
		{"max_consumers_per_topic", p.MaxConsumersPerTopic},
		{"max_consumers_per_subscription", p.MaxConsumersPerSubscription},
		{"max_topics_per_namespace", p.MaxTopicsPerNamespace},
		{"subscription_expiration_time_minutes", p.SubscriptionExpirationTime},
		{"max_unacked_messages_per_consumer", p.MaxUnackedMessagesPerConsumer},
		{"max_unacked_messages_per_subscription", p.MaxUnackedMessagesPerSubscription},
		{"deduplicationSnapshotIntervalSeconds", p.DeduplicationSnapshotIntervalSeconds},
	} {
		if f.v != nil && (*f.v < 0 || *f.v > math.MaxInt32) {
			errs = append(errs, fmt.Errorf("%s: %d is not in [0, %d]", f.name, *f.v, math.MaxInt32))
		}
	}
	for _, f := range []struct {
		name string
		v    *int64
		min  int64
	}{
		{"compaction_threshold", p.CompactionThreshold, 0},
		{"offload_threshold", p.OffloadThreshold, -1},
		{"offload_threshold_in_seconds", p.OffloadThresholdInSeconds, -1},
		{"offload_deletion_lag_ms", p.OffloadDeletionLagMs, 0},
	} {
		if f.v != nil && *f.v < f.min {
			errs = append(errs, fmt.Errorf("%s: %d is less than %d", f.name, *f.v, f.min))
		}
	}
	if s := p.SchemaCompatibilityStrategy; s != "" {
		if _, err := ParseSchemaCompatibility(s); err != nil || s != strings.ToUpper(s) {
			errs = append(errs, fmt.Errorf("schema_compatibility_strategy: %q: want one of %s", s, strings.Join(SchemaCompatibilityStrategies, ", ")))
		}
	}
	if len(p.Properties) > MaxProperties {
		errs = append(errs, fmt.Errorf("properties: %d, more than %d", len(p.Properties), MaxProperties))
	}
	for k, v := range p.Properties {
		if err := ValidProperty(k, v); err != nil {
			errs = append(errs, fmt.Errorf("properties: %w", err))
		}
	}
	if pp := p.Persistence; pp != nil {
		if err := pp.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("persistence: %w", err))
		}
	}
	if d := p.DelayedDelivery; d != nil {
		if err := d.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("delayed_delivery_policies: %w", err))
		}
	}
	if sr := p.SyncReplication; sr != nil {
		if err := sr.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("syncReplication: %w", err))
		} else if len(p.ReplicationClusters) > 0 {
			if err := sr.CheckClusters(p.ReplicationClusters); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for c, g := range p.BookieAffinityGroups {
		if err := validClusterName(c); err != nil {
			errs = append(errs, fmt.Errorf("bookieAffinityGroups: %w", err))
		} else if err := g.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("bookieAffinityGroups.%s: %w", c, err))
		}
	}
	return errs
}

// ValidProperty checks a namespace property: a key of 1 to MaxPropertyLen
// bytes and a value of at most MaxPropertyLen.
func ValidProperty(k, v string) error {
	if k == "" || len(k) > MaxPropertyLen {
		return fmt.Errorf("key %.40q: want 1 to %d bytes", k, MaxPropertyLen)
	}
	if len(v) > MaxPropertyLen {
		return fmt.Errorf("value of %q: %d bytes, more than %d", k, len(v), MaxPropertyLen)
	}
	return nil
}
