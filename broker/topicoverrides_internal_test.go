package broker

import (
	"testing"
	"time"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// The one resolution of the limits that a topic's own policy, its
// namespace's or the broker's may set: NamespacePolicy carries the
// topic's or namespace's value (PolicyNamespaces), the broker's applies
// where it carries none.
func TestOverrideResolution(t *testing.T) {
	b := &Broker{cfg: Config{Limits: Limits{MaxUnackedPerSubscription: 0, MaxDeliveryDelay: time.Hour}}.withDefaults()}
	intp := func(v int) *int { return &v }

	for _, c := range []struct {
		policy *int
		broker int
		want   int
	}{
		{nil, 0, DefaultMaxUnackedPerSubscription}, // unset everywhere: Pulsar's default
		{nil, 7, 7},
		{nil, -1, 0},     // the broker's negative: no limit
		{intp(0), 7, 0},  // a policy's 0: no limit
		{intp(3), 7, 3},  // a policy's value wins
		{intp(3), -1, 3}, // even over a broker without a limit
	} {
		l := Limits{MaxUnackedPerSubscription: c.broker}.WithDefaults()
		if got := unackedLimit(int64(unackedPolicy(c.policy)), l.MaxUnackedPerSubscription); got != c.want {
			t.Errorf("policy %v, broker %d: limit %d, want %d", c.policy, c.broker, got, c.want)
		}
	}

	if got := b.dedupSnapshotInterval(NamespacePolicy{}); got != DefaultDeduplicationSnapshotInterval {
		t.Errorf("snapshot interval without a policy: %v, want the broker's %v", got, DefaultDeduplicationSnapshotInterval)
	}
	if got := b.dedupSnapshotInterval(NamespacePolicy{DedupSnapshotInterval: intp(0)}); got != 0 {
		t.Errorf("snapshot interval 0: %v, want off", got)
	}
	if got := b.dedupSnapshotInterval(NamespacePolicy{DedupSnapshotInterval: intp(5)}); got != 5*time.Second {
		t.Errorf("snapshot interval 5: %v", got)
	}
	off := &Broker{cfg: Config{DeduplicationSnapshotInterval: -1}.withDefaults()}
	if got := off.dedupSnapshotInterval(NamespacePolicy{}); got != 0 {
		t.Errorf("broker's negative interval: %v, want off", got)
	}

	if d := b.delayPolicyOf(NamespacePolicy{}); d.off || d.tick != 0 || d.max != time.Hour {
		t.Errorf("broker's delayed delivery: %+v", d)
	}
	d := b.delayPolicyOf(NamespacePolicy{DelayedDelivery: &policy.DelayedDeliveryPolicies{Active: true, TickTime: 500, MaxDelayInMillis: 0}})
	if d.off || d.tick != 500*time.Millisecond || d.max != 0 {
		t.Errorf("a policy's delayed delivery: %+v (its 0 is no limit, over the broker's hour)", d)
	}
	if d := b.delayPolicyOf(NamespacePolicy{DelayedDelivery: &policy.DelayedDeliveryPolicies{}}); !d.off {
		t.Errorf("inactive delayed delivery: %+v", d)
	}
}

// A tick delays a release to the next multiple of the tick, never
// before the deliver-at time.
func TestReleaseAtTick(t *testing.T) {
	tick := delayPolicy{tick: time.Second}
	for _, c := range []struct{ at, want int64 }{
		{1000, 1000}, {1001, 2000}, {1999, 2000}, {0, 0}, {-1, 0}, {-1001, -1000},
	} {
		if got := tick.releaseAt(time.UnixMilli(c.at)).UnixMilli(); got != c.want {
			t.Errorf("at %d ms: released at %d, want %d", c.at, got, c.want)
		}
	}
	at := time.UnixMilli(1234)
	if got := (delayPolicy{}).releaseAt(at); !got.Equal(at) {
		t.Errorf("no tick: %v, want %v", got, at)
	}
	end := time.UnixMilli(1<<63 - 1)
	if got := tick.releaseAt(end); got.Before(end) {
		t.Errorf("at the end of time: %v, before %v", got, end)
	}
}
