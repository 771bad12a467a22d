package broker_test

import (
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// Subscription names in permission grants (globalconfig/policy, which
// cannot import the broker) follow the broker's one rule for
// subscription names: the two agree on every name here.
func TestGrantSubscriptionNameRule(t *testing.T) {
	for _, sub := range []string{
		"audit", "a-b_c.d", "rôle", "x:y", strings.Repeat("s", 256), strings.Repeat("s", 257),
		"", "a b", "a/b", "a\tb", "a\x00b", "\xff", "a\u00a0b", "a\u2028b",
	} {
		got, want := policy.ValidGrantSubscription(sub) == nil, broker.ValidSubscriptionName(sub) == nil
		if got != want {
			t.Errorf("%q: accepted by grants %v, by the broker %v", sub, got, want)
		}
	}
}
