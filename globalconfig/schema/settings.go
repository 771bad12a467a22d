package schema

import (
	"context"
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

// SettingsOf reads a namespace's schema settings from its policies.
// The strategy is Pulsar's: schema_compatibility_strategy, else (unset or
// UNDEFINED) the one schema_auto_update_compatibility_strategy stands for
// (policy.SchemaAutoUpdateStrategies: AutoUpdateDisabled is
// ALWAYS_INCOMPATIBLE), else compat.Default, the broker's. Unset,
// validation is not enforced and auto-update is allowed, as in Pulsar.
func SettingsOf(p *policy.Policies) (Settings, error) {
	out := Settings{Strategy: compat.Default, AutoUpdate: true}
	if p == nil {
		return out, nil
	}
	st := p.SchemaCompatibilityStrategy
	if a := p.SchemaAutoUpdateStrategy; (st == "" || st == policy.SchemaCompatibilityUndefined) && a != "" {
		mapped, ok := policy.SchemaAutoUpdateStrategies[a]
		if !ok {
			return out, fmt.Errorf("%w: unknown schema_auto_update_compatibility_strategy %q", compat.ErrInvalid, a)
		}
		st = mapped
	}
	var err error
	if out.Strategy, err = compat.ParseStrategy(st); err != nil {
		return out, err
	}
	out.ValidationEnforced = p.SchemaValidationEnforced
	out.AutoUpdate = p.AllowsAutoUpdateSchema()
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
