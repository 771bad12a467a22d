package admin_test

import (
	"context"
	"maps"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/dynconfig"
)

// fakeBrokers is an in-memory adminapi.Brokers: its dynamic configuration
// checks values as the broker does (package dynconfig) and logs every
// change to the fakeTopics' call log.
type fakeBrokers struct {
	f      *fakeTopics
	values map[string]string // guarded by f.mu
}

func newFakeBrokers(f *fakeTopics) *fakeBrokers {
	return &fakeBrokers{f: f, values: map[string]string{}}
}

func (b *fakeBrokers) LeaderBroker(context.Context) (adminapi.BrokerInfo, error) {
	return adminapi.BrokerInfo{BrokerID: "127.0.0.1:8080", ServiceURL: "http://127.0.0.1:8080"}, nil
}

func (b *fakeBrokers) DynamicConfigNames() []string { return dynconfig.Names() }

func (b *fakeBrokers) DynamicConfig(context.Context) (map[string]string, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	return maps.Clone(b.values), nil
}

func (b *fakeBrokers) RuntimeConfig(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range dynconfig.Settings {
		out[s.Name] = s.Default
	}
	v, _ := b.DynamicConfig(ctx)
	maps.Copy(out, v)
	return out, nil
}

func (b *fakeBrokers) SetDynamicConfig(_ context.Context, name, value string) error {
	if err := dynconfig.Check(name, value); err != nil {
		return err
	}
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	b.f.log("set dynamic %s=%s", name, value)
	b.values[name] = value
	return nil
}

func (b *fakeBrokers) DeleteDynamicConfig(_ context.Context, name string) error {
	if _, ok := dynconfig.Lookup(name); !ok {
		return dynconfig.ErrUnknown
	}
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	b.f.log("delete dynamic %s", name)
	delete(b.values, name)
	return nil
}
