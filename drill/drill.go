// Package drill owns failover drills (docs/drills.md): a workload of
// unmodified Pulsar clients on an active-standby namespace, a fault
// injected into its primary region through a fault-control API (`isobar
// dev`'s, or `isobar fault-control`'s: package faultcontrol), the
// failover (promoted by the drill or automatically), the heal, the
// drain, and the report judged against limits.
//
// The analysis is pure: Analyze takes the Log a run recorded (sends,
// acknowledgements, deliveries, scans of the surviving region's topic,
// the phases' times) and returns the Report, with no clock, network or
// files. Run is the driver that does the I/O and fills the Log.
//
// It also owns chaos drills: a seeded random schedule of faults and one
// planned primary move against the whole federation, with a workload on
// a namespace of each kind, checked afterwards in every region's copies.
// Plan (the schedule) and CheckChaos (the checks) are pure; RunChaos is
// their driver.
package drill

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// Fault is what the drill does to the primary region.
type Fault string

// The faults a fault-control API injects.
const (
	// Kill stops every process of the region as a crash would; the heal
	// starts it again on its data.
	Kill Fault = "kill"
	// Partition cuts the region's links to the other regions and to the
	// global store (both sides see connections reset); its own clients
	// still reach it. The heal restores the links.
	Partition Fault = "partition"
	// Blackhole stops everything on those links without closing them:
	// peers find out through their own timeouts.
	Blackhole Fault = "blackhole"
)

// LateProperty is the message property a region puts on each message of
// an old primary's tail that reached it after a failover (the broker's
// broker.LateProperty; cmd/isobar's test checks they agree).
const LateProperty = "__ISOBAR_LATE_EPOCH"

// Endpoints is the part of an endpoints.json (`isobar dev`'s, or one
// written for `isobar fault-control`) a drill reads.
type Endpoints struct {
	// ControlURL is the fault-control API.
	ControlURL string           `json:"controlUrl"`
	Regions    []RegionEndpoint `json:"regions"`
}

// RegionEndpoint is one region of Endpoints.
type RegionEndpoint struct {
	Name          string `json:"name"`
	ServiceURL    string `json:"serviceUrl"`
	WebServiceURL string `json:"webServiceUrl"`
	Brokers       []struct {
		ServiceURL    string `json:"serviceUrl"`
		WebServiceURL string `json:"webServiceUrl"`
	} `json:"brokers"`
}

// Region returns the named region's endpoints.
func (e Endpoints) Region(name string) (RegionEndpoint, bool) {
	for _, r := range e.Regions {
		if r.Name == name {
			return r, true
		}
	}
	return RegionEndpoint{}, false
}

// serviceURL is the region's first broker's Pulsar URL.
func (r RegionEndpoint) serviceURL() string {
	if len(r.Brokers) > 0 && r.Brokers[0].ServiceURL != "" {
		return r.Brokers[0].ServiceURL
	}
	return r.ServiceURL
}

// webURL is the region's first broker's admin (HTTP) URL.
func (r RegionEndpoint) webURL() string {
	if len(r.Brokers) > 0 && r.Brokers[0].WebServiceURL != "" {
		return strings.TrimRight(r.Brokers[0].WebServiceURL, "/")
	}
	return strings.TrimRight(r.WebServiceURL, "/")
}

// MultiHostURL is the service URL an application of an active-standby
// namespace uses: every region's first broker, so that whichever region
// the client reaches sends it on to the primary.
func (e Endpoints) MultiHostURL() string {
	var hosts []string
	for _, r := range e.Regions {
		hosts = append(hosts, strings.TrimPrefix(r.serviceURL(), "pulsar://"))
	}
	return "pulsar://" + strings.Join(hosts, ",")
}

// Config is one failover drill.
type Config struct {
	Endpoints Endpoints
	// Namespace ("tenant/namespace") is created when missing:
	// active-standby, primary From, replicated to From and To (and the
	// tenant, allowed in both). An existing one must replicate to both
	// and be active-standby; if its primary is To, the drill first moves
	// it to From (a planned failover).
	Namespace string
	// From is the primary region the fault hits; To the region that takes
	// over.
	From, To string
	Fault    Fault
	// Duration is how long the fault lasts, from its injection to the
	// heal; the heal waits for the failover to complete if it takes
	// longer. Zero means 10 s.
	Duration time.Duration
	// Rate is the messages per second of all producers together; zero
	// means 1000.
	Rate int
	// Producers is how many producers send (zero means 2); one consumer
	// receives.
	Producers int
	// Topic is the topic's name in the namespace (or a full topic name);
	// empty means a fresh one per run.
	Topic string
	// Promote makes the drill promote To (set-primary) once it detects the
	// fault; otherwise it waits for automatic failover to promote To.
	Promote bool
	// AutoFailoverAfter, when positive, is set on the namespace as its
	// automatic failover delay (whole seconds).
	AutoFailoverAfter time.Duration
	// FailBack moves the primary back to From after the heal and drain (a
	// planned failover) and checks again.
	FailBack bool
	// SyncRegions, when positive, gives the namespace synchronous
	// replication to that many other regions (docs/failover.md,
	// "Synchronous replication") for the run; zero removes it.
	// SyncFallbackAfter is its fallbackAfterSeconds (whole seconds; zero
	// holds publishes until the regions confirm).
	SyncRegions       int
	SyncFallbackAfter time.Duration
	// MaxRTO is the longest publish gap that passes (zero means 10 s);
	// MaxLost the most lost messages that pass.
	MaxRTO  time.Duration
	MaxLost int
	// RunID names the run in payloads, producer names and telemetry; empty
	// means one made from the start time.
	RunID string

	// Logger receives the drill's progress; nil discards. ClientLogger
	// receives the Pulsar client's own logs; nil discards them.
	Logger, ClientLogger *slog.Logger
	// MeterProvider and TracerProvider record the drill's metrics and
	// phase spans; nil means none.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// HTTPClient makes the admin and fault-control requests; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
}

// Defaults of Config's zero values.
const (
	DefaultDuration  = 10 * time.Second
	DefaultRate      = 1000
	DefaultProducers = 2
	DefaultMaxRTO    = 10 * time.Second
)

func (c *Config) withDefaults() Config {
	out := *c
	if out.Duration == 0 {
		out.Duration = DefaultDuration
	}
	if out.Rate == 0 {
		out.Rate = DefaultRate
	}
	if out.Producers == 0 {
		out.Producers = DefaultProducers
	}
	if out.MaxRTO == 0 {
		out.MaxRTO = DefaultMaxRTO
	}
	return out
}

// maxRate bounds Config.Rate: the workload records every message, and a
// drill is not a load test.
const maxRate = 100000

// Validate reports every problem of c at once, each naming its flag.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Endpoints.ControlURL == "" {
		bad("endpoints", "no controlUrl: a drill needs a fault-control API (isobar dev's, or isobar fault-control's)")
	}
	if len(c.Endpoints.Regions) < 2 {
		bad("endpoints", "%d regions; a failover needs at least two", len(c.Endpoints.Regions))
	}
	for _, r := range c.Endpoints.Regions {
		if r.serviceURL() == "" || r.webURL() == "" {
			bad("endpoints", "region %q has no serviceUrl or webServiceUrl", r.Name)
		}
	}
	if t, ns, ok := strings.Cut(c.Namespace, "/"); !ok || t == "" || ns == "" || strings.Contains(ns, "/") {
		bad("namespace", "%q is not tenant/namespace", c.Namespace)
	}
	for _, f := range []struct{ flag, name string }{{"from", c.From}, {"to", c.To}} {
		if f.name == "" {
			bad(f.flag, "required")
		} else if _, ok := c.Endpoints.Region(f.name); !ok && len(c.Endpoints.Regions) > 0 {
			bad(f.flag, "no region %q in the endpoints", f.name)
		}
	}
	if c.From != "" && c.From == c.To {
		bad("to", "%q is also --from", c.To)
	}
	switch c.Fault {
	case Kill, Partition, Blackhole:
	default:
		bad("fault", "%q is not kill, partition or blackhole", c.Fault)
	}
	if c.Duration < 0 || c.Duration > time.Hour {
		bad("duration", "%v is not within 0..1h", c.Duration)
	}
	if c.Rate < 0 || c.Rate > maxRate {
		bad("rate", "%d is not within 1..%d", c.Rate, maxRate)
	}
	if c.Producers < 0 || c.Producers > 100 {
		bad("producers", "%d is not within 1..100", c.Producers)
	}
	if c.Rate > 0 && c.Producers > c.Rate {
		bad("producers", "%d producers cannot share %d messages per second", c.Producers, c.Rate)
	}
	if strings.ContainsAny(c.Topic, " ") {
		bad("topic", "%q holds a space", c.Topic)
	}
	if c.SyncRegions < 0 || c.SyncRegions > policy.MaxSyncRegions {
		bad("sync", "%d is not within 0..%d", c.SyncRegions, policy.MaxSyncRegions)
	}
	if c.SyncFallbackAfter < 0 || c.SyncFallbackAfter > time.Hour || c.SyncFallbackAfter%time.Second != 0 {
		bad("sync-fallback-after", "%v is not a whole number of seconds within 0..1h", c.SyncFallbackAfter)
	} else if c.SyncFallbackAfter > 0 && c.SyncRegions == 0 {
		bad("sync-fallback-after", "needs --sync")
	}
	if c.AutoFailoverAfter < 0 || c.AutoFailoverAfter > time.Hour || c.AutoFailoverAfter%time.Second != 0 {
		bad("auto-failover-after", "%v is not a whole number of seconds within 0..1h", c.AutoFailoverAfter)
	}
	if c.MaxRTO < 0 {
		bad("max-rto", "%v is negative", c.MaxRTO)
	}
	if c.MaxLost < 0 {
		bad("max-lost", "%d is negative", c.MaxLost)
	}
	if strings.ContainsAny(c.RunID, " /") {
		errs = append(errs, fmt.Errorf("run id %q holds a space or a slash", c.RunID))
	}
	return errors.Join(errs...)
}
