package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
)

// Active-standby namespaces (docs/failover.md): lookups from clients go to
// the primary region, and publishes and acknowledgements are accepted only
// while Deps.Primary allows them. Replicator workers are exempt: their
// producers write the standby copies and their cursors read in whichever
// region is primary. Every refusal is ServiceNotReady, which pulsar-client-go
// retries with a new lookup; it never sees TopicNotFound, TopicTerminated or
// ProducerFenced, on which it would give up.

// redirectToPrimary says whether a lookup of a topic of a namespace with
// policy pol, asked by a client sending clientVersion, goes to the
// primary region, and to which broker URL ("" when the primary has none).
func (b *Broker) redirectToPrimary(pol NamespacePolicy, clientVersion string) (string, bool) {
	f := pol.Failover
	if f.Mode != policy.ActiveStandby || f.Primary == b.cfg.Cluster || strings.HasPrefix(clientVersion, replication.ClientVersion) {
		return "", false
	}
	return pol.PrimaryServiceURL, true
}

// waitPrimary waits (within ctx) until this broker may write for name's
// namespace; the error is ServiceNotReady saying why not.
func (b *Broker) waitPrimary(ctx context.Context, name topic.Name) error {
	if b.deps.Primary == nil || name.Domain != topic.Persistent {
		return nil
	}
	if err := b.deps.Primary.Wait(ctx, name.NamespaceName()); err != nil {
		return fmt.Errorf("%w: %w", wire.ErrServiceNotReady, err)
	}
	return nil
}

// checkPrimary is waitPrimary without waiting.
func (b *Broker) checkPrimary(name topic.Name) error {
	if b.deps.Primary == nil || name.Domain != topic.Persistent {
		return nil
	}
	if err := b.deps.Primary.Check(name.NamespaceName()); err != nil {
		return fmt.Errorf("%w: %w", wire.ErrServiceNotReady, err)
	}
	return nil
}

// Demote sends the clients of namespace ns away from this broker (its
// producers and consumers are closed and reconnect through a new lookup,
// which leads to the primary) and, when to names the new primary, waits
// until every loaded topic of ns has replicated everything to it (within
// ctx). Replicator producers and replication cursors stay. Brokers call it
// through package primary when they stop writing for ns.
func (b *Broker) Demote(ctx context.Context, ns, to string) {
	var topics []*Topic
	for _, t := range b.loadedTopics() {
		if t.name.NamespaceName() != ns {
			continue
		}
		topics = append(topics, t)
		t.mu.Lock()
		var prods []*producer
		for _, p := range t.producers {
			if p.replFrom == "" {
				prods = append(prods, p)
			}
		}
		var subs []*subscription
		for name, s := range t.subs {
			if !strings.HasPrefix(name, replication.Prefix) {
				subs = append(subs, s)
			}
		}
		t.mu.Unlock()
		for _, p := range prods {
			p.c.closeProducer(p, true)
		}
		for _, s := range subs {
			s.disconnectAll()
		}
	}
	if to == "" {
		return
	}
	for _, t := range topics {
		if t.ml == nil || !slices.Contains(t.remotes(), to) {
			continue
		}
		for {
			c, err := t.ml.OpenCursor(ctx, replication.CursorName(to), mledger.Earliest)
			if err == nil && c.Backlog() == 0 {
				break
			}
			select {
			case <-ctx.Done():
				b.log.Warn("demoted topic not fully replicated to the new primary; its tail arrives late", "topic", t.name.String(), "primary", to)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}
