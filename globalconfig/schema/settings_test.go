package schema

import (
	"testing"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
)

func TestTopicOverrides(t *testing.T) {
	ns := Settings{Strategy: compat.Forward, ValidationEnforced: false, AutoUpdate: true}
	on := true
	for _, c := range []struct {
		name string
		tp   policy.TopicPolicies
		want Settings
	}{
		{"none", policy.TopicPolicies{}, ns},
		{"undefined keeps the namespace's", policy.TopicPolicies{SchemaCompatibilityStrategy: "UNDEFINED"}, ns},
		{"strategy", policy.TopicPolicies{SchemaCompatibilityStrategy: "FULL_TRANSITIVE"}, Settings{Strategy: compat.FullTransitive, AutoUpdate: true}},
		{"validation", policy.TopicPolicies{SchemaValidationEnforced: &on}, Settings{Strategy: compat.Forward, ValidationEnforced: true, AutoUpdate: true}},
	} {
		got, err := TopicOverrides(ns, c.tp)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := TopicOverrides(ns, policy.TopicPolicies{SchemaCompatibilityStrategy: "SIDEWAYS"}); err == nil {
		t.Error("an unknown strategy was taken")
	}
}

// TestStrategyPrecedence: Pulsar's order, schema_compatibility_strategy,
// then (unset or UNDEFINED) the auto-update strategy, then the broker's
// default; every auto-update strategy stands for its compatibility
// strategy.
func TestStrategyPrecedence(t *testing.T) {
	off := false
	for _, c := range []struct {
		name string
		p    policy.Policies
		want Settings
	}{
		{"nothing set", policy.Policies{}, Settings{Strategy: compat.Default, AutoUpdate: true}},
		{"strategy wins", policy.Policies{SchemaCompatibilityStrategy: "BACKWARD", SchemaAndSecurity: policy.SchemaAndSecurity{SchemaAutoUpdateStrategy: "Forward"}},
			Settings{Strategy: compat.Backward, AutoUpdate: true}},
		{"auto-update under UNDEFINED", policy.Policies{SchemaCompatibilityStrategy: "UNDEFINED", SchemaAndSecurity: policy.SchemaAndSecurity{SchemaAutoUpdateStrategy: "Forward"}},
			Settings{Strategy: compat.Forward, AutoUpdate: true}},
		{"validation and auto-update off", policy.Policies{SchemaAndSecurity: policy.SchemaAndSecurity{SchemaValidationEnforced: true, IsAllowAutoUpdateSchema: &off}},
			Settings{Strategy: compat.Default, ValidationEnforced: true}},
	} {
		got, err := SettingsOf(&c.p)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
	for name, want := range policy.SchemaAutoUpdateStrategies {
		got, err := SettingsOf(&policy.Policies{SchemaAndSecurity: policy.SchemaAndSecurity{SchemaAutoUpdateStrategy: name}})
		if err != nil || string(got.Strategy) != want {
			t.Errorf("%s: %v %v, want %s", name, got.Strategy, err, want)
		}
	}
	if _, err := SettingsOf(&policy.Policies{SchemaAndSecurity: policy.SchemaAndSecurity{SchemaAutoUpdateStrategy: "Sideways"}}); err == nil {
		t.Error("an unknown auto-update strategy was taken")
	}
}
