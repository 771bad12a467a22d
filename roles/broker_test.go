package roles

import (
	"strings"
	"testing"
	"time"
)

// TestBrokerRecoveryDelayValidated: a negative lostBookieRecoveryDelay or
// openLedgerRereplicationGracePeriod is refused, naming the field (both
// at once).
func TestBrokerRecoveryDelayValidated(t *testing.T) {
	var c BrokerConfig
	c.Region = "r"
	c.LostBookieRecoveryDelay = -1
	c.OpenLedgerRereplicationGracePeriod = -1
	err := c.Validate()
	for _, want := range []string{"broker.lostBookieRecoveryDelay", "broker.openLedgerRereplicationGracePeriod"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v: does not name %s", err, want)
		}
	}
}

func TestLoadBalancerSettingsValidated(t *testing.T) {
	var c BrokerConfig
	c.Region = "r"
	c.LoadBalancerSheddingInterval = -1
	c.LoadBalancerBrokerThresholdShedderPercentage = -1
	c.LoadBalancerSheddingMinLoadGap = -1
	c.LoadBalancerSheddingGracePeriod = -1
	c.LoadBalancerNamespaceBundleMaxTopics = -1
	c.LoadBalancerNamespaceBundleMaxMsgRate = -1
	c.LoadBalancerNamespaceBundleMaxBandwidthMbytes = -1
	err := c.Validate()
	for _, f := range []string{"broker.loadBalancerSheddingInterval", "loadBalancerBrokerThresholdShedderPercentage",
		"loadBalancerSheddingMinLoadGap", "loadBalancerSheddingGracePeriod", "loadBalancerNamespaceBundleMaxTopics",
		"loadBalancerNamespaceBundleMaxMsgRate", "loadBalancerNamespaceBundleMaxBandwidthMbytes"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
}

// TestFenceLeaseTTLRefused: broker.fenceLeaseTTL is whole seconds, at
// least one (etcd counts leases in seconds); zero is the default.
func TestFenceLeaseTTLRefused(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Second, 5 * time.Second} {
		if err := (BrokerConfig{FenceLeaseTTL: ttl}).Validate(); err != nil && strings.Contains(err.Error(), "fenceLeaseTTL") {
			t.Errorf("%v refused: %v", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{-time.Second, 500 * time.Millisecond, 1500 * time.Millisecond} {
		if err := (BrokerConfig{FenceLeaseTTL: ttl}).Validate(); err == nil || !strings.Contains(err.Error(), "broker.fenceLeaseTTL") {
			t.Errorf("%v: %v, want an error naming broker.fenceLeaseTTL", ttl, err)
		}
	}
}
