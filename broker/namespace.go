package broker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/broker/mledger"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// partitions returns a topic's partition count (0 for a non-partitioned
// topic), creating it as partitioned when create is set, the topic does
// not exist and the namespace auto-creates partitioned topics.
func (b *Broker) partitions(ctx context.Context, name topic.Name, create bool) (int, error) {
	pol, err := b.deps.Namespaces.Policy(ctx, name.NamespaceName())
	if err != nil {
		return 0, err
	}
	if name.Partition() >= 0 {
		return 0, nil
	}
	n, ok, err := b.deps.Namespaces.Partitions(ctx, name)
	if err != nil || ok {
		return n, err
	}
	if !create || !pol.AutoCreate || pol.AutoCreatePartitions <= 0 || name.Domain != topic.Persistent {
		return 0, nil
	}
	// A non-partitioned topic of that name already exists: keep it.
	if _, err := b.deps.Meta.Get(ctx, mledger.TopicKey(b.cfg.Region, MLName(name))); err == nil {
		return 0, nil
	} else if !errors.Is(err, metastore.ErrNotFound) {
		return 0, err
	}
	if err := b.checkTopicQuota(ctx, name.NamespaceName(), pol.AutoCreatePartitions, b.maxTopics(pol)); err != nil {
		return 0, err
	}
	if err := b.deps.Namespaces.CreatePartitioned(ctx, name, pol.AutoCreatePartitions); err != nil {
		// Lost a race with another creator: read what it made.
		if n, ok, err2 := b.deps.Namespaces.Partitions(ctx, name); err2 == nil && ok {
			return n, nil
		}
		return 0, err
	}
	return pol.AutoCreatePartitions, nil
}

// PersistentTopics lists the persistent topics of namespace ns that have a
// managed ledger in this region (partitions included).
func (b *Broker) PersistentTopics(ctx context.Context, ns string) ([]string, error) {
	tenant, local, err := topic.ParseNamespace(ns)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	prefix := mledger.TopicKey(b.cfg.Region, tenant+"/"+local+"/"+string(topic.Persistent)+"/")
	keys, err := listKeys(ctx, b.deps.Meta, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, rest := range keys {
		if rest == "" || strings.Contains(rest, "/") {
			continue
		}
		out = append(out, string(topic.Persistent)+"://"+tenant+"/"+local+"/"+rest)
	}
	return out, nil
}

// listKeys returns the keys under prefix, without it, in order: keys
// only (a topic's metadata, with its ledgers and cursors, is not loaded
// to list it), read a page at a time (metastore.Meta.ListKeys).
func listKeys(ctx context.Context, meta metastore.Meta, prefix string) ([]string, error) {
	keys, err := meta.ListKeys(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, prefix)
	}
	return keys, nil
}

// TopicsOfNamespace lists a namespace's topics as Pulsar's
// GetTopicsOfNamespace does: stored topics, every partition of the
// partitioned topics, and the non-persistent topics loaded here.
func (b *Broker) TopicsOfNamespace(ctx context.Context, ns string, mode pb.CommandGetTopicsOfNamespace_Mode) ([]string, error) {
	if _, err := b.deps.Namespaces.Policy(ctx, ns); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	if mode != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		ts, err := b.PersistentTopics(ctx, ns)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			set[t] = true
		}
	}
	if l, ok := b.deps.Namespaces.(PartitionedLister); ok {
		pts, err := l.ListPartitioned(ctx, ns)
		if err != nil {
			return nil, err
		}
		for _, pt := range pts {
			if mode == pb.CommandGetTopicsOfNamespace_PERSISTENT && pt.Name.Domain != topic.Persistent ||
				mode == pb.CommandGetTopicsOfNamespace_NON_PERSISTENT && pt.Name.Domain != topic.NonPersistent {
				continue
			}
			if pt.Err != nil {
				// Logged by the store; listed by the partitions that exist.
				continue
			}
			for i := range pt.Partitions {
				set[pt.Name.Partitioned(i).String()] = true
			}
		}
	}
	if mode != pb.CommandGetTopicsOfNamespace_PERSISTENT {
		for _, t := range b.loadedTopics() {
			if t.name.Domain == topic.NonPersistent && t.name.NamespaceName() == ns {
				set[t.name.String()] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}

// PartitionedTopic is a partitioned topic and its partition count; Err
// is set (and Partitions 0) when its stored record cannot be used
// (policy.ErrCorrupt): listings skip it.
type PartitionedTopic struct {
	Name       topic.Name
	Partitions int
	Err        error
}

// PartitionedLister is implemented by a Namespaces that can list a
// namespace's partitioned topics.
type PartitionedLister interface {
	ListPartitioned(ctx context.Context, ns string) ([]PartitionedTopic, error)
}

// filterTopics keeps the topics whose name without its domain matches the
// whole pattern (also without domain), as Pulsar's TopicList does.
func filterTopics(topics []string, pattern string) ([]string, error) {
	re, err := regexp.Compile("^(?:" + stripDomain(pattern) + ")$")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range topics {
		if re.MatchString(stripDomain(t)) {
			out = append(out, t)
		}
	}
	return out, nil
}

func stripDomain(s string) string {
	if _, rest, ok := strings.Cut(s, "://"); ok {
		return rest
	}
	return s
}

// topicsHash is the hash of a topic list sent with it, so a client polling
// with the hash it has gets "unchanged" instead of the list.
func topicsHash(topics []string) string {
	sorted := slices.Clone(topics)
	slices.Sort(sorted)
	return strconv.FormatUint(uint64(wire.Checksum([]byte(strings.Join(sorted, ",")))), 16)
}
