package adminapi

import (
	"context"
	"net/url"
)

// BrokerInfo is Pulsar's BrokerInfo: a broker's id (host:port of its
// HTTP listener, as GET /admin/v2/brokers lists it) and its web service
// URL.
type BrokerInfo struct {
	BrokerID   string `json:"brokerId"`
	ServiceURL string `json:"serviceUrl"`
}

// Brokers is what the brokers endpoints need from the broker besides
// Topics.Brokers: the region's leader and its dynamic configuration
// (package broker/dynconfig). Errors are of a kind of errkind's table,
// as for Topics.
type Brokers interface {
	// LeaderBroker returns the region's leader broker.
	LeaderBroker(ctx context.Context) (BrokerInfo, error)
	// DynamicConfigNames lists the settings that may be set at run time.
	DynamicConfigNames() []string
	// DynamicConfig returns the settings set, by name.
	DynamicConfig(ctx context.Context) (map[string]string, error)
	// RuntimeConfig returns the value in effect of every dynamic setting
	// (set or default), by name.
	RuntimeConfig(ctx context.Context) (map[string]string, error)
	// SetDynamicConfig checks and sets a setting for every broker of the
	// region; an unknown name or a bad value is refused (412).
	SetDynamicConfig(ctx context.Context, name, value string) error
	// DeleteDynamicConfig returns a setting to its default.
	DeleteDynamicConfig(ctx context.Context, name string) error
}

// BrokerID is the id the admin API gives the broker serving httpURL: the
// host:port of its HTTP listener.
func BrokerID(httpURL string) string {
	if u, err := url.Parse(httpURL); err == nil && u.Host != "" {
		return u.Host
	}
	return httpURL
}

// LoadReporter (Broker.LoadReporter) is a broker that knows its load
// report (package broker/ownership's LoadReport, in the shape of Pulsar's
// LocalBrokerData).
type LoadReporter interface {
	// LoadReport returns this broker's last sampled load report; an error
	// of kind ErrUnavailable before the first sample.
	LoadReport(ctx context.Context) (any, error)
}
