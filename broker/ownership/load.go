package ownership

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults of the load report settings (Pulsar's
// loadBalancerReportUpdateThresholdPercentage is 10 and its
// loadBalancerReportUpdateMaxIntervalMinutes 15).
const (
	DefaultLoadReportInterval    = 10 * time.Second
	DefaultLoadReportThreshold   = 10
	DefaultLoadReportMaxInterval = 15 * time.Minute
)

// ResourceUsage is Pulsar's ResourceUsage: a usage and its limit, in the
// same unit.
type ResourceUsage struct {
	Usage float64 `json:"usage"`
	Limit float64 `json:"limit"`
}

// BundleLoad is the load of one owned bundle, in the shape of Pulsar's
// NamespaceBundleStats: message and byte rates over the last sampling
// interval, and the number of its topics loaded here.
type BundleLoad struct {
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	Topics           int64   `json:"topics"`
}

// LoadReport is a broker's load, in the shape of Pulsar's LocalBrokerData
// (the fields isobar fills; pulsaradmin's GetLoadReport decodes it).
// It is published inside the broker's registration (BrokerInfo.Report),
// under the broker's lease.
type LoadReport struct {
	WebServiceURL       string `json:"webServiceUrl"`
	WebServiceURLTLS    string `json:"webServiceUrlTls,omitempty"`
	PulsarServiceURL    string `json:"pulsarServiceUrl"`
	PulsarServiceURLTLS string `json:"pulsarServiceUrlTls,omitempty"`
	// CPU is the broker process's CPU time over the last sampling
	// interval as a percentage of all the machine's CPUs (Limit 100).
	CPU              ResourceUsage `json:"cpu"`
	MsgThroughputIn  float64       `json:"msgThroughputIn"`
	MsgThroughputOut float64       `json:"msgThroughputOut"`
	MsgRateIn        float64       `json:"msgRateIn"`
	MsgRateOut       float64       `json:"msgRateOut"`
	// LastUpdate is when the report was sampled, Unix milliseconds.
	LastUpdate int64 `json:"lastUpdate"`
	// LastStats is the load of each owned bundle, by
	// "tenant/namespace/0x…_0x…".
	LastStats  map[string]BundleLoad `json:"lastStats"`
	NumTopics  int                   `json:"numTopics"`
	NumBundles int                   `json:"numBundles"`
	// NumConnections counts the client connections (not in Pulsar's
	// LocalBrokerData).
	NumConnections int `json:"numConnections"`
	// Bundles lists the owned bundles, sorted.
	Bundles        []string `json:"bundles"`
	LoadReportType string   `json:"loadReportType"`
}

// LoadReportType is LoadReport.LoadReportType, as Pulsar names the report
// of its modular load manager.
const LoadReportType = "LocalBrokerData"

// Usage is the report's load in whole points, added to the broker's
// owned bundle count to make its placement score (see Place): one point
// per 10 % of CPU, per 1000 messages/s in and out together, and per MiB/s
// in and out together. Whole points keep brokers with nearly the same load
// equal, so rendezvous hashing spreads bundles over them. A nil report
// has no usage.
func (l *LoadReport) Usage() int {
	if l == nil {
		return 0
	}
	u := math.Floor(l.CPU.Usage/10) + math.Floor((l.MsgRateIn+l.MsgRateOut)/1000) +
		math.Floor((l.MsgThroughputIn+l.MsgThroughputOut)/(1<<20))
	if u < 0 || math.IsNaN(u) {
		return 0
	}
	return int(min(u, math.MaxInt32))
}

// LoadReportConfig configures load reports (Config.LoadReports).
type LoadReportConfig struct {
	// Interval is how often the load is sampled; zero means
	// DefaultLoadReportInterval.
	Interval time.Duration
	// Threshold is the change, in percent of the published value, of a
	// sampled figure (CPU, a rate, the topic or bundle count) that makes
	// the sample published at once; zero means DefaultLoadReportThreshold.
	Threshold float64
	// MaxInterval is the longest time a sample goes unpublished; zero
	// means DefaultLoadReportMaxInterval.
	MaxInterval time.Duration
}

func (c LoadReportConfig) withDefaults() LoadReportConfig {
	if c.Interval == 0 {
		c.Interval = DefaultLoadReportInterval
	}
	if c.Threshold == 0 {
		c.Threshold = DefaultLoadReportThreshold
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = DefaultLoadReportMaxInterval
	}
	return c
}

// Validate reports every problem at once.
func (c LoadReportConfig) Validate() error {
	var errs []error
	if c.Interval < 0 || c.Interval > 0 && c.Interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("ownership.loadReports.interval: %v; want 0 (default %v) or at least 100ms", c.Interval, DefaultLoadReportInterval))
	}
	if c.Threshold < 0 || c.Threshold > 100 || math.IsNaN(c.Threshold) {
		errs = append(errs, fmt.Errorf("ownership.loadReports.threshold: %v; want 0 (default %d) to 100 percent", c.Threshold, DefaultLoadReportThreshold))
	}
	if c.MaxInterval < 0 {
		errs = append(errs, fmt.Errorf("ownership.loadReports.maxInterval: %v; want 0 (default %v) or more", c.MaxInterval, DefaultLoadReportMaxInterval))
	}
	return errors.Join(errs...)
}

// shouldPublish decides whether sample cur replaces the published report
// pub (nil: none yet), published at pubAt: when there is none, when the
// set of bundles changed, when a figure moved by more than threshold
// percent of its published value (any move from zero counts), or when
// maxInterval has passed. It is pure.
func shouldPublish(pub *LoadReport, pubAt time.Time, cur *LoadReport, now time.Time, threshold float64, maxInterval time.Duration) bool {
	if pub == nil {
		return true
	}
	if now.Sub(pubAt) >= maxInterval || !slices.Equal(pub.Bundles, cur.Bundles) {
		return true
	}
	pairs := [][2]float64{
		{pub.CPU.Usage, cur.CPU.Usage},
		{pub.MsgRateIn, cur.MsgRateIn}, {pub.MsgRateOut, cur.MsgRateOut},
		{pub.MsgThroughputIn, cur.MsgThroughputIn}, {pub.MsgThroughputOut, cur.MsgThroughputOut},
		{float64(pub.NumTopics), float64(cur.NumTopics)},
		{float64(pub.NumConnections), float64(cur.NumConnections)},
	}
	for _, p := range pairs {
		if changedBy(p[0], p[1], threshold) {
			return true
		}
	}
	return false
}

// changedBy reports whether b differs from a by more than pct percent of a.
func changedBy(a, b, pct float64) bool {
	if a == 0 {
		return b != 0
	}
	return math.Abs(b-a)/math.Abs(a)*100 > pct
}

// SetLoadSource sets the function sampled for the broker's load report
// every LoadReportConfig.Interval (the broker's counters; see
// broker.LoadSampler). Until it is set the registration carries no
// report and placement counts this broker's bundles only. The first
// sample is taken at once.
func (r *Registry) SetLoadSource(src func() LoadReport) {
	r.mu.Lock()
	r.loadSrc = src
	r.mu.Unlock()
	if r.sampleLoad() {
		r.markLoadDirty()
	}
}

// LoadReport returns the broker's last sampled load report; false before
// the first sample.
func (r *Registry) LoadReport() (LoadReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.report == nil {
		return LoadReport{}, false
	}
	return *r.report, true
}

// sampleLoad samples the load source, when set, and reports whether the
// sample is to be published (shouldPublish), in which case it becomes the
// registration's report.
func (r *Registry) sampleLoad() bool {
	r.mu.Lock()
	src := r.loadSrc
	r.mu.Unlock()
	if src == nil {
		return false
	}
	rep := src()
	now := r.now()
	rep.LoadReportType = LoadReportType
	rep.WebServiceURL, rep.PulsarServiceURL = r.self.HTTPURL, r.self.ServiceURL
	rep.WebServiceURLTLS, rep.PulsarServiceURLTLS = r.self.HTTPURLTLS, r.self.ServiceURLTLS
	if rep.LastUpdate == 0 {
		rep.LastUpdate = now.UnixMilli()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report = &rep
	if !shouldPublish(r.pub, r.pubAt, &rep, now, r.loadCfg.Threshold, r.loadCfg.MaxInterval) {
		return false
	}
	r.pub, r.pubAt = &rep, now
	return true
}
