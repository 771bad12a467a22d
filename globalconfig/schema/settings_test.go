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
