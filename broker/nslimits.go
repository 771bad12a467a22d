package broker

import (
	"time"

	"github.com/isobar-mq/isobar/broker/dynconfig"
	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/errkind"
)

// The limits of a namespace's producers, consumers and topics: each is the
// namespace's policy when it has one (NamespacePolicy), else the region's
// dynamic setting of the same name (package dynconfig), else no limit
// (for topics: Limits.MaxTopicsPerNamespace). 0 is no limit. A change to a
// namespace's policy reaches its loaded topics with the next maintenance
// round (Config.MaintenanceInterval); a dynamic setting within moments.
// The errors carry Pulsar's messages after their package's name.
var (
	ErrTooManyProducers    = errkind.Sentinel(errkind.ErrProducerBusy, "broker: Topic reached max producers limit")
	ErrTooManyConsumers    = errkind.Sentinel(errkind.ErrConsumerBusy, "broker: Topic reached max consumers limit")
	ErrTooManySubConsumers = errkind.Sentinel(errkind.ErrConsumerBusy, "broker: Subscription reached max consumers limit")
	// ErrNoAutoSubscription: the subscription does not exist and the
	// dynamic setting allowAutoSubscriptionCreation is false.
	ErrNoAutoSubscription = errkind.Sentinel(errkind.ErrSubscriptionNotFound, "broker: Subscription does not exist")
)

// dynamicSnapshot is a read of the dynamic settings and the revision of
// the record read.
type dynamicSnapshot struct {
	v   dynconfig.Values
	rev int64
}

// dynamic returns the region's dynamic settings as last read (none before
// the first read).
func (b *Broker) dynamic() dynconfig.Values {
	if d := b.dyn.Load(); d != nil {
		return d.v
	}
	return nil
}

// setDynamic records a read of the region's dynamic settings, unless a
// read of a later revision is recorded already (the watch and an admin
// call may read concurrently). Revision 0 (no record) always counts.
func (b *Broker) setDynamic(v dynconfig.Values, rev int64) {
	next := &dynamicSnapshot{v: v, rev: rev}
	for {
		cur := b.dyn.Load()
		if cur != nil && rev != 0 && rev < cur.rev {
			return
		}
		if b.dyn.CompareAndSwap(cur, next) {
			return
		}
	}
}

// limit is the value of a limit: the namespace's ns when set, else the
// dynamic setting name, else def.
func (b *Broker) limit(ns *int, name string, def int) int {
	if ns != nil {
		return *ns
	}
	if v, ok := b.dynamic().Int(name); ok {
		return v
	}
	return def
}

// maxTopics is the topic limit of a namespace with policy pol.
func (b *Broker) maxTopics(pol NamespacePolicy) int {
	return b.limit(pol.MaxTopics, dynconfig.MaxTopicsPerNamespace, b.cfg.Limits.MaxTopicsPerNamespace)
}

// maxProducers, maxConsumers and maxSubConsumers are the topic's limits
// (t.mu held).
func (t *Topic) maxProducersLocked() int {
	return t.b.limit(t.policy.MaxProducers, dynconfig.MaxProducersPerTopic, 0)
}

func (t *Topic) maxConsumersLocked() int {
	return t.b.limit(t.policy.MaxConsumers, dynconfig.MaxConsumersPerTopic, 0)
}

func (t *Topic) maxSubConsumersLocked() int {
	return t.b.limit(t.policy.MaxConsumersPerSubscription, dynconfig.MaxConsumersPerSubscription, 0)
}

// autoSubscriptionAllowed says whether a consumer may create a
// subscription on t: the topic's or its namespace's override, else the
// dynamic setting.
func (t *Topic) autoSubscriptionAllowed() bool {
	t.mu.Lock()
	a := t.policy.AutoSubscriptionCreation
	t.mu.Unlock()
	if a != nil {
		return *a
	}
	return t.b.autoSubscriptionAllowed()
}

// autoSubscriptionAllowed is the dynamic setting
// allowAutoSubscriptionCreation (default true).
func (b *Broker) autoSubscriptionAllowed() bool {
	return b.dynamic().Bool(dynconfig.AllowAutoSubscriptionCreation, true)
}

// ledgerConfig is the ledger configuration of a topic with policy pol:
// its persistence policy (the topic's own, else its namespace's), when
// set, shapes new ledgers; at load (mledger.Open) and on a loaded topic
// (setPolicy, mledger.SetQuorums).
func ledgerConfig(c mledger.Config, pol NamespacePolicy) mledger.Config {
	if p := pol.Persistence; p != nil {
		c.EnsembleSize, c.WriteQuorum, c.AckQuorum = p.BookkeeperEnsemble, p.BookkeeperWriteQuorum, p.BookkeeperAckQuorum
	}
	return c
}

// markDeleteRate is pol's managedLedgerMaxMarkDeleteRate: how many times
// a second a subscription's acknowledgements are written (0: every one,
// before it is answered; mledger.SetMarkDeleteRate).
func markDeleteRate(pol NamespacePolicy) float64 {
	if p := pol.Persistence; p != nil {
		return p.ManagedLedgerMaxMarkDeleteRate
	}
	return 0
}

// dynamicRetry is how soon a failed read of the dynamic settings is
// tried again.
const dynamicRetry = 5 * time.Second

// watchDynamic keeps the broker's copy of the region's dynamic settings
// current: it reads the record at start and again after every change
// (the watch starts first, so no change is missed), until the broker
// stops.
func (b *Broker) watchDynamic() {
	key := dynconfig.Key(b.cfg.Region)
	events := b.deps.Meta.Watch(b.ctx, key, 0)
	read := time.NewTimer(0)
	defer read.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-read.C:
		}
		v, rev, err := dynconfig.Read(b.ctx, b.deps.Meta, b.cfg.Region)
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			b.log.Warn("reading the dynamic configuration failed; keeping the last values", "err", err)
			read.Reset(dynamicRetry)
			continue
		}
		b.setDynamic(v, rev)
	}
}
