package globalconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// DefaultPrefix is the prefix of the global configuration store.
const DefaultPrefix = "/isobar-global/"

// Config configures a Cache.
type Config struct {
	// Prefix is the key prefix cached; empty means DefaultPrefix. It must
	// start and end with "/".
	Prefix string
	// Persist, when set, is a local directory where the cache keeps a copy
	// of its snapshot (one JSON file, see docs/globalconfig.md) so that a
	// region restarting while the global store is down still has its
	// configuration. Empty disables persistence.
	Persist string
	// Logger receives warnings and state changes; nil discards them.
	Logger *slog.Logger
	// MeterProvider receives the cache's metrics; nil means none.
	MeterProvider metric.MeterProvider
	// Now is the clock for Age and Synced; nil means time.Now.
	Now func() time.Time

	// RequestTimeout bounds each List of the prefix and each progress
	// request; zero means 5s.
	RequestTimeout time.Duration
	// ProgressInterval is how often the cache asks etcd to confirm that its
	// watch is in sync; zero means 1s.
	ProgressInterval time.Duration
	// StaleAfter is how long without a confirmation (event, progress
	// notification or list) before Synced reports false; zero means three
	// times ProgressInterval.
	StaleAfter time.Duration
	// MaxBackoff caps the delay between attempts to re-list and re-watch
	// after a failure; zero means 5s. The first retry waits 100ms (or
	// MaxBackoff if smaller) and the delay doubles per failure.
	MaxBackoff time.Duration
	// PersistDelay debounces writes of the persisted copy: it is written at
	// most once per PersistDelay after changes, and once more on Close;
	// zero means 1s.
	PersistDelay time.Duration
	// SubscriberBuffer is the capacity of each Subscribe channel; zero
	// means 64. It must be at least 2 (one slot is reserved for Resync).
	SubscriberBuffer int
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/")) {
		errs = append(errs, fmt.Errorf("globalconfig.prefix: %q must start and end with /", c.Prefix))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"requestTimeout", c.RequestTimeout},
		{"progressInterval", c.ProgressInterval},
		{"staleAfter", c.StaleAfter},
		{"maxBackoff", c.MaxBackoff},
		{"persistDelay", c.PersistDelay},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("globalconfig.%s: %v is negative", d.name, d.v))
		}
	}
	if c.SubscriberBuffer < 0 || c.SubscriberBuffer == 1 {
		errs = append(errs, fmt.Errorf("globalconfig.subscriberBuffer: %d must be 0 (default) or at least 2", c.SubscriberBuffer))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero values.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = time.Second
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 3 * c.ProgressInterval
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.PersistDelay == 0 {
		c.PersistDelay = time.Second
	}
	if c.SubscriberBuffer == 0 {
		c.SubscriberBuffer = 64
	}
	return c
}
