package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// DefaultLeaseTTL is the lease TTL when Config.LeaseTTL is zero.
const DefaultLeaseTTL = 10 * time.Second

// BrokerInfo is a broker's registration, stored as JSON under
// /isobar/<region>/brokers/<id>.
type BrokerInfo struct {
	// ID names the broker in its region; no '/', spaces or control characters.
	ID string `json:"id"`
	// ServiceURL is the Pulsar binary protocol address, "pulsar://host:port"
	// (or "pulsar+ssl://host:port").
	ServiceURL string `json:"serviceUrl"`
	// HTTPURL is the admin/lookup HTTP address, "http://host:port" (or https).
	HTTPURL string `json:"httpUrl"`
	// ServiceURLTLS and HTTPURLTLS are the same over TLS
	// ("pulsar+ssl://host:port", "https://host:port"); empty without TLS.
	ServiceURLTLS string `json:"serviceUrlTls,omitempty"`
	HTTPURLTLS    string `json:"httpUrlTls,omitempty"`
	// Started is when the broker's Registry started (kept across
	// re-registrations of the same Registry).
	Started time.Time `json:"started"`
	// Load is the number of bundles the broker owns, as last published.
	Load int `json:"load"`
	// Report is the broker's last published load report (nil before its
	// first sample, or without a load source: Registry.SetLoadSource).
	Report *LoadReport `json:"loadReport,omitempty"`
	// Draining is set while the broker shuts down gracefully: no bundle
	// is placed on it any more.
	Draining bool `json:"draining,omitempty"`
}

// Config configures a Registry: settings only; what it works with is in
// Deps.
type Config struct {
	// Region names the region (the key prefix /isobar/<region>/). Required.
	Region string
	// Self describes this broker: ID, ServiceURL and HTTPURL are required;
	// Started and Load are set by the Registry.
	Self BrokerInfo
	// LeaseTTL is the lease TTL: how long a dead or cut-off broker keeps its
	// bundles. Zero means DefaultLeaseTTL; otherwise at least 1s (etcd may
	// raise it to its own minimum, 2s for the embedded server).
	LeaseTTL time.Duration
	// LoadReports sets how often the load source is sampled and when a
	// sample is published (see LoadReportConfig).
	LoadReports LoadReportConfig
}

// Deps are what a Registry works with: its store, logger and clock, and
// the callbacks into the broker.
type Deps struct {
	// Meta is the region's metadata store. Required.
	Meta metastore.Meta
	// Logger receives ownership changes; nil discards them. It is the
	// broker's logger, which already names the broker (roles.NewBroker
	// adds broker=<id>): the registry adds no key of its own to it.
	Logger *slog.Logger
	// Now is the clock for timestamps; nil means time.Now.
	Now func() time.Time
	// OnLost, when set, is called once for each bundle this broker loses
	// without releasing it: its key was deleted or overwritten by someone
	// else, or the lease was lost. It is called from the Registry's
	// goroutines, one call at a time; it must not block for long and must
	// not call Close. It is not called for bundles given up by Release or Close.
	OnLost func(ns string, b topic.Bundle)
	// AntiAffinity, when set, returns the other namespaces ("tenant/ns")
	// of ns's anti-affinity group (none when it is in no group). Placing
	// an unowned bundle of ns then prefers the brokers owning bundles of
	// the fewest of them (Place). It is called on lookups of unowned
	// bundles only.
	AntiAffinity func(ctx context.Context, ns string) ([]string, error)
}

func (d Deps) validate() error {
	if d.Meta == nil {
		return errors.New("ownership: Deps.Meta: a metadata store is required")
	}
	return nil
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.Region == "":
		errs = append(errs, errors.New("ownership.region: required"))
	case !validID(c.Region):
		errs = append(errs, fmt.Errorf("ownership.region: %q may not contain '/', spaces or control characters", c.Region))
	}
	switch {
	case c.Self.ID == "":
		errs = append(errs, errors.New("ownership.self.id: required"))
	case !validID(c.Self.ID):
		errs = append(errs, fmt.Errorf("ownership.self.id: %q may not contain '/', spaces or control characters", c.Self.ID))
	}
	if err := checkURL(c.Self.ServiceURL, "pulsar", "pulsar+ssl"); err != nil {
		errs = append(errs, fmt.Errorf("ownership.self.serviceUrl: %w", err))
	}
	if err := checkURL(c.Self.HTTPURL, "http", "https"); err != nil {
		errs = append(errs, fmt.Errorf("ownership.self.httpUrl: %w", err))
	}
	if c.LeaseTTL < 0 || c.LeaseTTL > 0 && c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("ownership.leaseTTL: %v; want 0 (default %v) or at least 1s", c.LeaseTTL, DefaultLeaseTTL))
	}
	if err := c.LoadReports.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validID(s string) bool {
	for _, r := range s {
		if r == '/' || r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// checkURL requires scheme://host:port with one of schemes and nothing else.
func checkURL(s string, schemes ...string) error {
	want := schemes[0] + "://host:port"
	if s == "" {
		return fmt.Errorf("required (%s)", want)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	ok := false
	for _, sc := range schemes {
		ok = ok || u.Scheme == sc
	}
	if !ok || u.Hostname() == "" || u.Port() == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q: want %s", s, want)
	}
	return nil
}
