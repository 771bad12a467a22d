package region

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	err := Config{Name: "-Bad", Bookies: 100, BookiePort: 70000}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"region.name", "region.dataDir", "region.bookies", "region.bookiePort"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	for _, ok := range []string{"us-east", "a", "eu-west-2"} {
		if !ValidName(ok) {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{"", "US", "a_b", "-a", "a-", strings.Repeat("a", 64)} {
		if ValidName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A region that fails part-way through start-up (here: a bookie whose
// config is invalid) stops what it started and reports the bookie.
func TestStartFailureCleansUp(t *testing.T) {
	cfg := Config{Name: "r", DataDir: t.TempDir(), Bookies: 1}
	cfg.Bookie.ReadOnlyThreshold = 7
	_, err := Start(context.Background(), cfg, Deps{})
	if err == nil || !strings.Contains(err.Error(), "bookie 0") || !strings.Contains(err.Error(), "readOnlyThreshold") {
		t.Fatalf("err %v", err)
	}
	// The embedded etcd was stopped: the same directory starts again.
	cfg.Bookie.ReadOnlyThreshold = 0
	r, err := Start(context.Background(), cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if eps := r.Endpoints(); len(eps.Bookies) != 1 || eps.MetadataURL == "" {
		t.Fatalf("endpoints %+v", eps)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

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
