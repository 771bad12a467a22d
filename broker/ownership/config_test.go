package ownership

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	err := Config{LeaseTTL: -time.Second}.Validate()
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, field := range []string{"ownership.region", "ownership.self.id",
		"ownership.self.serviceUrl", "ownership.self.httpUrl", "ownership.leaseTTL"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s:\n%v", field, err)
		}
	}

	good := Config{
		Region: "eu",
		Self:   BrokerInfo{ID: "b1", ServiceURL: "pulsar://127.0.0.1:6650", HTTPURL: "http://127.0.0.1:8080"},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	bad := []struct {
		field string
		edit  func(*Config)
	}{
		{"ownership.region", func(c *Config) { c.Region = "a/b" }},
		{"ownership.self.id", func(c *Config) { c.Self.ID = "has space" }},
		{"ownership.self.id", func(c *Config) { c.Self.ID = "a/b" }},
		{"ownership.self.serviceUrl", func(c *Config) { c.Self.ServiceURL = "http://h:1" }},
		{"ownership.self.serviceUrl", func(c *Config) { c.Self.ServiceURL = "pulsar://h" }},
		{"ownership.self.serviceUrl", func(c *Config) { c.Self.ServiceURL = "h:6650" }},
		{"ownership.self.httpUrl", func(c *Config) { c.Self.HTTPURL = "pulsar://h:1" }},
		{"ownership.self.httpUrl", func(c *Config) { c.Self.HTTPURL = "http://h:1/admin" }},
		{"ownership.leaseTTL", func(c *Config) { c.LeaseTTL = 500 * time.Millisecond }},
	}
	for _, tt := range bad {
		c := good
		tt.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%+v: got %v, want an error naming %s", c, err, tt.field)
		}
	}
}

// TestNewNeedsAStore: New refuses Deps without a metadata store.
func TestNewNeedsAStore(t *testing.T) {
	cfg := Config{Region: "eu", Self: BrokerInfo{ID: "b1", ServiceURL: "pulsar://127.0.0.1:6650", HTTPURL: "http://127.0.0.1:8080"}}
	if _, err := New(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "Deps.Meta") {
		t.Fatalf("New without a store: %v", err)
	}
}
