package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SchemaAndSecurity are a namespace's schema settings and the rules its
// producers and consumers must follow, in Pulsar's names. The broker
// enforces each: the schema registry reads the first three
// (schema.SettingsOf), authorization the subscription auth mode, PRODUCER
// and SEND the encryption requirement.
type SchemaAndSecurity struct {
	// SchemaValidationEnforced refuses producers without a schema on a
	// topic that has one.
	SchemaValidationEnforced bool `json:"schema_validation_enforced"`
	// SchemaAutoUpdateStrategy is Pulsar's older strategy, one of
	// SchemaAutoUpdateStrategies; it applies when
	// schema_compatibility_strategy is unset. "": not set.
	SchemaAutoUpdateStrategy string `json:"schema_auto_update_compatibility_strategy,omitempty"`
	// IsAllowAutoUpdateSchema lets producers and consumers add schema
	// versions; nil: the broker's default (allowed).
	IsAllowAutoUpdateSchema *bool `json:"is_allow_auto_update_schema,omitempty"`
	// SubscriptionAuthMode is None or Prefix; "": None.
	SubscriptionAuthMode string `json:"subscription_auth_mode,omitempty"`
	// EncryptionRequired refuses producers that say they do not encrypt
	// and messages without encryption keys.
	EncryptionRequired bool `json:"encryption_required"`
}

// Subscription auth modes (SchemaAndSecurity.SubscriptionAuthMode).
const (
	// SubscriptionAuthNone puts no rule on subscription names.
	SubscriptionAuthNone = "None"
	// SubscriptionAuthPrefix requires a role's subscription names to start
	// with the role (superusers excepted).
	SubscriptionAuthPrefix = "Prefix"
)

// SchemaAutoUpdateStrategies maps Pulsar's schema auto-update strategies
// to the compatibility strategies they stand for (Pulsar's
// SchemaCompatibilityStrategy.fromAutoUpdatePolicy).
var SchemaAutoUpdateStrategies = map[string]string{
	"AutoUpdateDisabled": "ALWAYS_INCOMPATIBLE",
	"Backward":           "BACKWARD",
	"Forward":            "FORWARD",
	"Full":               "FULL",
	"AlwaysCompatible":   "ALWAYS_COMPATIBLE",
	"BackwardTransitive": "BACKWARD_TRANSITIVE",
	"ForwardTransitive":  "FORWARD_TRANSITIVE",
	"FullTransitive":     "FULL_TRANSITIVE",
}

func init() {
	for _, f := range []string{
		"schema_validation_enforced", "schema_auto_update_compatibility_strategy",
		"is_allow_auto_update_schema", "subscription_auth_mode", "encryption_required",
	} {
		knownPolicyFields[f] = true
	}
}

// ParseSchemaAutoUpdateStrategy returns the auto-update strategy named s
// (any case) in Pulsar's spelling; an error names the ones there are.
func ParseSchemaAutoUpdateStrategy(s string) (string, error) {
	for name := range SchemaAutoUpdateStrategies {
		if strings.EqualFold(name, strings.TrimSpace(s)) {
			return name, nil
		}
	}
	return "", fmt.Errorf("schema auto update compatibility strategy %q: want one of %s", s, autoUpdateNames())
}

// autoUpdateNames lists the auto-update strategies, for messages.
func autoUpdateNames() string {
	return strings.Join(slices.Sorted(maps.Keys(SchemaAutoUpdateStrategies)), ", ")
}

// ParseSubscriptionAuthMode returns the subscription auth mode named s
// (any case) in Pulsar's spelling.
func ParseSubscriptionAuthMode(s string) (string, error) {
	for _, m := range []string{SubscriptionAuthNone, SubscriptionAuthPrefix} {
		if strings.EqualFold(m, strings.TrimSpace(s)) {
			return m, nil
		}
	}
	return "", fmt.Errorf("subscription auth mode %q: want %s or %s", s, SubscriptionAuthNone, SubscriptionAuthPrefix)
}

// AllowsAutoUpdateSchema reports whether producers and consumers may add
// schema versions (unset: yes, Pulsar's broker default).
func (s SchemaAndSecurity) AllowsAutoUpdateSchema() bool {
	return s.IsAllowAutoUpdateSchema == nil || *s.IsAllowAutoUpdateSchema
}

// AuthMode is the subscription auth mode in force (unset: None).
func (s SchemaAndSecurity) AuthMode() string {
	if s.SubscriptionAuthMode == "" {
		return SubscriptionAuthNone
	}
	return s.SubscriptionAuthMode
}

// validateSchemaAndSecurity checks the enumerations, which must be stored
// in Pulsar's spelling.
func (s SchemaAndSecurity) validateSchemaAndSecurity() []error {
	var errs []error
	if v := s.SchemaAutoUpdateStrategy; v != "" {
		if _, ok := SchemaAutoUpdateStrategies[v]; !ok {
			errs = append(errs, fmt.Errorf("schema_auto_update_compatibility_strategy: %q: want one of %s", v, autoUpdateNames()))
		}
	}
	if v := s.SubscriptionAuthMode; v != "" && v != SubscriptionAuthNone && v != SubscriptionAuthPrefix {
		errs = append(errs, fmt.Errorf("subscription_auth_mode: %q: want %s or %s", v, SubscriptionAuthNone, SubscriptionAuthPrefix))
	}
	return errs
}
