// Package dynconfig owns the broker settings an operator may change at run
// time through the admin API (Pulsar's dynamic configuration): which
// settings there are, how a value is checked, and the one record in the
// region's metadata store that holds the values set, which every broker
// of the region watches. docs/admin.md lists the settings.
package dynconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/metastore"
)

// Errors of a refused change, both answered 412 as Pulsar does.
var (
	ErrUnknown = errkind.Sentinel(errkind.ErrPreconditionFailed, "dynconfig: not a dynamic configuration")
	ErrInvalid = errkind.Sentinel(errkind.ErrPreconditionFailed, "dynconfig: invalid dynamic configuration value")
)

// Kind is the type of a setting's value.
type Kind int

const (
	// Bool values read as Pulsar reads them: "true" (any case) is true,
	// anything else false; every value is accepted.
	Bool Kind = iota
	// Int values are decimal integers of at least 0.
	Int
	// Enum values are one of the setting's Values.
	Enum
)

// Setting is one dynamic setting.
type Setting struct {
	// Name is Pulsar's name of the setting.
	Name string
	Kind Kind
	// Default is the value when none is set (for Int settings whose
	// broker configuration has its own value, "" means that value).
	Default string
	// Doc says what the setting does in Isobar.
	Doc string
	// Values are the values an Enum setting takes.
	Values []string
}

// Names of the settings, as Pulsar names them.
const (
	MaxProducersPerTopic          = "maxProducersPerTopic"
	MaxConsumersPerTopic          = "maxConsumersPerTopic"
	MaxConsumersPerSubscription   = "maxConsumersPerSubscription"
	MaxTopicsPerNamespace         = "maxTopicsPerNamespace"
	AllowAutoSubscriptionCreation = "allowAutoSubscriptionCreation"
	// The deletion of inactive topics (docs/admin.md, "Inactive
	// topics"), for namespaces and topics without inactive topic
	// policies of their own.
	DeleteInactiveTopicsEnabled            = "brokerDeleteInactiveTopicsEnabled"
	DeleteInactiveTopicsMode               = "brokerDeleteInactiveTopicsMode"
	DeleteInactiveTopicsMaxInactiveSeconds = "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds"
)

// Settings are the dynamic settings, in name order. Each takes effect on
// every broker of the region within moments of being set.
var Settings = []Setting{
	{AllowAutoSubscriptionCreation, Bool, "true", "subscribing creates a durable subscription that does not exist; false refuses such a subscribe (SubscriptionNotFound)", nil},
	{DeleteInactiveTopicsEnabled, Bool, "false", "delete topics that have been inactive for brokerDeleteInactiveTopicsMaxInactiveDurationSeconds, for namespaces and topics without inactive topic policies (Pulsar's default is true)", nil},
	{DeleteInactiveTopicsMaxInactiveSeconds, Int, "60", "how long a topic must be inactive before it is deleted, in seconds", nil},
	{DeleteInactiveTopicsMode, Enum, "delete_when_no_subscriptions", "which inactive topics are deleted: those without subscriptions, or those whose subscriptions have caught up", []string{"delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"}},
	{MaxConsumersPerSubscription, Int, "0", "the most consumers a subscription may have, for namespaces without their own limit (0: no limit)", nil},
	{MaxConsumersPerTopic, Int, "0", "the most consumers a topic may have, for namespaces without their own limit (0: no limit)", nil},
	{MaxProducersPerTopic, Int, "0", "the most producers a topic may have, for namespaces without their own limit (0: no limit)", nil},
	{MaxTopicsPerNamespace, Int, "", "the most topics a namespace may have in the region, for namespaces without their own limit; overrides broker.limits.maxTopicsPerNamespace (0: no limit)", nil},
}

// Lookup returns the setting called name.
func Lookup(name string) (Setting, bool) {
	i := slices.IndexFunc(Settings, func(s Setting) bool { return s.Name == name })
	if i < 0 {
		return Setting{}, false
	}
	return Settings[i], true
}

// Names returns the names of the settings, in order.
func Names() []string {
	out := make([]string, len(Settings))
	for i, s := range Settings {
		out[i] = s.Name
	}
	return out
}

// MaxValueLen bounds a value, in bytes.
const MaxValueLen = 4096

// Check checks that name is a dynamic setting and value a value of its
// kind.
func Check(name, value string) error {
	s, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w: %s is not a dynamic configuration (GET /admin/v2/brokers/configuration lists them)", ErrUnknown, name)
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: %s: %d bytes, more than %d", ErrInvalid, name, len(value), MaxValueLen)
	}
	if s.Kind == Enum && !slices.Contains(s.Values, value) {
		return fmt.Errorf("%w: %s: %q is not one of %s", ErrInvalid, name, value, strings.Join(s.Values, ", "))
	}
	if s.Kind == Int {
		v, err := strconv.ParseInt(value, 10, 32)
		if err != nil || v < 0 {
			return fmt.Errorf("%w: %s: %q is not an integer from 0 to 2147483647", ErrInvalid, name, value)
		}
	}
	return nil
}

// Values are the settings set, by name: a snapshot of the record.
type Values map[string]string

// Int returns the value of an Int setting and whether it is set (a value
// that does not parse, which Set never writes, reads as not set).
func (v Values) Int(name string) (int, bool) {
	s, ok := v[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int(n), true
}

// String returns the value of a setting, or def when it is not set.
func (v Values) String(name, def string) string {
	if s, ok := v[name]; ok {
		return s
	}
	return def
}

// Bool returns the value of a Bool setting, or def when it is not set.
func (v Values) Bool(name string, def bool) bool {
	s, ok := v[name]
	if !ok {
		return def
	}
	return strings.EqualFold(s, "true")
}

// Key is the record of a region's dynamic settings: one JSON object of
// name to value.
func Key(region string) string { return metastore.RegionPrefix(region) + "dynamic-config" }

// Parse decodes the record; settings that are no longer dynamic (an older
// or newer Isobar wrote them) are dropped.
func Parse(b []byte) (Values, error) {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("dynconfig: malformed record: %w", err)
	}
	if m == nil {
		m = map[string]string{}
	}
	for k := range m {
		if _, ok := Lookup(k); !ok {
			delete(m, k)
		}
	}
	return Values(m), nil
}

// Read reads the settings set in region, and the revision of the record
// (0 when there is none), which orders reads.
func Read(ctx context.Context, m metastore.Meta, region string) (Values, int64, error) {
	kv, err := m.Get(ctx, Key(region))
	if errors.Is(err, metastore.ErrNotFound) {
		return Values{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	v, err := Parse(kv.Value)
	return v, kv.Rev, err
}

// Set checks and sets a setting for the region.
func Set(ctx context.Context, m metastore.Meta, region, name, value string) error {
	if err := Check(name, value); err != nil {
		return err
	}
	return update(ctx, m, region, func(v Values) { v[name] = value })
}

// Delete removes a setting's value, which returns to its default; one
// not set is no error.
func Delete(ctx context.Context, m metastore.Meta, region, name string) error {
	if _, ok := Lookup(name); !ok {
		return fmt.Errorf("%w: %s is not a dynamic configuration", ErrUnknown, name)
	}
	return update(ctx, m, region, func(v Values) { delete(v, name) })
}

func update(ctx context.Context, m metastore.Meta, region string, fn func(Values)) error {
	_, _, err := metastore.Update(ctx, m, Key(region), func(old []byte) ([]byte, error) {
		v := Values{}
		if old != nil {
			// A malformed record is replaced: it would otherwise stop
			// every change, the one way to repair it included.
			if p, err := Parse(old); err == nil {
				v = p
			}
		}
		fn(v)
		return json.Marshal(v)
	})
	return err
}
