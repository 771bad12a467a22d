package broker

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/dynconfig"
	"github.com/isobar-mq/isobar/broker/ownership"
)

// adminBrokers is the broker's adminapi.Brokers (and LoadReporter): the
// region's leader, dynamic configuration and this broker's load report.
type adminBrokers struct{ b *Broker }

// BrokerLeader is implemented by a Placement that knows the region's
// leader broker: it returns the leader's HTTP URL.
type BrokerLeader interface {
	Leader(ctx context.Context) (string, error)
}

// LeaderBroker implements adminapi.Brokers: the leader the placement names,
// or this broker when the placement knows no other (a single-broker
// region).
func (a adminBrokers) LeaderBroker(ctx context.Context) (adminapi.BrokerInfo, error) {
	u := a.b.cfg.HTTPURL
	if l, ok := a.b.deps.Placement.(BrokerLeader); ok {
		var err error
		if u, err = l.Leader(ctx); err != nil {
			return adminapi.BrokerInfo{}, err
		}
	}
	return adminapi.BrokerInfo{BrokerID: adminapi.BrokerID(u), ServiceURL: u}, nil
}

// DynamicConfigNames implements adminapi.Brokers.
func (a adminBrokers) DynamicConfigNames() []string { return dynconfig.Names() }

// DynamicConfig implements adminapi.Brokers: the settings set in the region,
// read from the metadata store.
func (a adminBrokers) DynamicConfig(ctx context.Context) (map[string]string, error) {
	v, _, err := dynconfig.Read(ctx, a.b.deps.Meta, a.b.cfg.Region)
	return v, err
}

// RuntimeConfig implements adminapi.Brokers: this broker's values in effect.
func (a adminBrokers) RuntimeConfig(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range dynconfig.Settings {
		out[s.Name] = s.Default
	}
	out[dynconfig.MaxTopicsPerNamespace] = strconv.Itoa(a.b.cfg.Limits.MaxTopicsPerNamespace)
	maps.Copy(out, a.b.dynamic())
	return out, nil
}

// SetDynamicConfig implements adminapi.Brokers. The broker applies the new
// values at once; the other brokers of the region when their watch
// delivers the change.
func (a adminBrokers) SetDynamicConfig(ctx context.Context, name, value string) error {
	if err := dynconfig.Set(ctx, a.b.deps.Meta, a.b.cfg.Region, name, value); err != nil {
		return err
	}
	return a.refresh(ctx)
}

// DeleteDynamicConfig implements adminapi.Brokers.
func (a adminBrokers) DeleteDynamicConfig(ctx context.Context, name string) error {
	if err := dynconfig.Delete(ctx, a.b.deps.Meta, a.b.cfg.Region, name); err != nil {
		return err
	}
	return a.refresh(ctx)
}

func (a adminBrokers) refresh(ctx context.Context) error {
	v, rev, err := dynconfig.Read(ctx, a.b.deps.Meta, a.b.cfg.Region)
	if err != nil {
		return err
	}
	a.b.setDynamic(v, rev)
	return nil
}

// loadReporter is implemented by a Placement that samples the broker's
// load (OwnershipPlacement).
type loadReporter interface {
	LoadReport() (ownership.LoadReport, bool)
}

// LoadReport implements adminapi.LoadReporter.
func (a adminBrokers) LoadReport(ctx context.Context) (any, error) {
	lr, ok := a.b.deps.Placement.(loadReporter)
	if !ok {
		return nil, fmt.Errorf("%w: this broker places no bundles and publishes no load report", adminapi.ErrUnavailable)
	}
	rep, ok := lr.LoadReport()
	if !ok {
		return nil, fmt.Errorf("%w: no load sampled yet", adminapi.ErrUnavailable)
	}
	return rep, nil
}
