package schema

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/topic"
)

// Settings are a namespace's schema policies.
type Settings struct {
	// Strategy decides which new versions are accepted.
	Strategy compat.Strategy
	// ValidationEnforced refuses producers without a schema on a topic
	// that has one (Pulsar's schema_validation_enforced).
	ValidationEnforced bool
	// AutoUpdate lets producers and consumers add versions; false leaves
	// that to the admin API (Pulsar's is_allow_auto_update_schema).
	AutoUpdate bool
}

// namespaceFields are the schema fields of a namespace's policies, in
// Pulsar's JSON names.
type namespaceFields struct {
	Strategy           string `json:"schema_compatibility_strategy"`
	AutoUpdateStrategy string `json:"schema_auto_update_compatibility_strategy"`
	ValidationEnforced bool   `json:"schema_validation_enforced"`
	AutoUpdate         *bool  `json:"is_allow_auto_update_schema"`
}

// autoUpdateStrategies maps Pulsar's older strategy names
// (schema_auto_update_compatibility_strategy), used when
// schema_compatibility_strategy is unset.
var autoUpdateStrategies = map[string]compat.Strategy{
	"AutoUpdateDisabled": compat.AlwaysIncompatible, "Backward": compat.Backward, "Forward": compat.Forward,
	"Full": compat.Full, "AlwaysCompatible": compat.AlwaysCompatible, "BackwardTransitive": compat.BackwardTransitive,
	"ForwardTransitive": compat.ForwardTransitive, "FullTransitive": compat.FullTransitive,
}

// SettingsOf reads a namespace's schema settings from its policies. The
// fields are read by their JSON names, whether policy.Policies models
// them or keeps them in Extra. Unset, the strategy is compat.Default,
// validation is not enforced and auto-update is allowed, as in Pulsar.
func SettingsOf(p *policy.Policies) (Settings, error) {
	out := Settings{Strategy: compat.Default, AutoUpdate: true}
	if p == nil {
		return out, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return out, err
	}
	var f namespaceFields
	if err := json.Unmarshal(b, &f); err != nil {
		return out, fmt.Errorf("%w: namespace schema settings: %w", compat.ErrInvalid, err)
	}
	st := f.Strategy
	if (st == "" || st == "UNDEFINED") && f.AutoUpdateStrategy != "" {
		s, ok := autoUpdateStrategies[f.AutoUpdateStrategy]
		if !ok {
			return out, fmt.Errorf("%w: unknown schema_auto_update_compatibility_strategy %q", compat.ErrInvalid, f.AutoUpdateStrategy)
		}
		st = string(s)
	}
	if out.Strategy, err = compat.ParseStrategy(st); err != nil {
		return out, err
	}
	out.ValidationEnforced = f.ValidationEnforced
	if f.AutoUpdate != nil {
		out.AutoUpdate = *f.AutoUpdate
	}
	return out, nil
}

// TopicOverrides applies a topic's own schema policies over its
// namespace's settings s: its schemaCompatibilityStrategy and
// schemaValidationEnforced, when set.
func TopicOverrides(s Settings, tp policy.TopicPolicies) (Settings, error) {
	if st := tp.SchemaCompatibilityStrategy; st != "" && st != "UNDEFINED" {
		parsed, err := compat.ParseStrategy(st)
		if err != nil {
			return s, err
		}
		s.Strategy = parsed
	}
	if v := tp.SchemaValidationEnforced; v != nil {
		s.ValidationEnforced = *v
	}
	return s, nil
}

// SettingsFor are the schema settings that apply to topic name: its
// namespace's with the topic's own (local over global) over them.
func SettingsFor(ctx context.Context, store *policy.Store, name topic.Name) (Settings, error) {
	p, err := store.Namespace(ctx, name.NamespaceName())
	if err != nil {
		return Settings{}, err
	}
	s, err := SettingsOf(p)
	if err != nil {
		return s, err
	}
	tp, err := store.EffectiveTopicPolicies(ctx, name)
	if err != nil {
		return s, err
	}
	return TopicOverrides(s, tp)
}
