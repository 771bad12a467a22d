package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// Deleted replicated topics (docs/replication.md "Deleting a replicated
// topic"): deleting a replicated topic removes this region's copy only,
// and leaves a mark in the region's metadata store so that the other
// regions' replicators, whose copies still stream here, do not re-create
// it. The mark goes when the topic is created here again (by the admin API
// or a client's producer or consumer), or once its namespace is gone.

// deletedTopicsPrefix is where the marks of a region's deleted replicated
// topics live.
func deletedTopicsPrefix(region string) string {
	return metastore.RegionPrefix(region) + "deleted-topics/"
}

// deletedTopicKey is the mark of replicated topic name, deleted in region.
func deletedTopicKey(region string, name topic.Name) string {
	return deletedTopicsPrefix(region) + MLName(name)
}

// markDeleted records that replicated topic t was deleted here.
func (b *Broker) markDeleted(ctx context.Context, t *Topic) {
	if len(t.remotes()) == 0 {
		return
	}
	if _, err := b.deps.Meta.Put(ctx, deletedTopicKey(b.cfg.Region, t.name), []byte(b.deps.Now().UTC().Format(time.RFC3339))); err != nil {
		b.log.Warn("deleted topic not marked: another region's replicator may create it again", "topic", t.name.String(), "err", err)
	}
}

// refuseReplica is the error a replicator producer gets for a topic that
// does not exist here because it was deleted here; nil when it may be
// created. A partition of a partitioned topic that exists (its metadata
// is the federation's) may always be: the partitioned topic was created
// again since.
func (b *Broker) refuseReplica(ctx context.Context, name topic.Name) error {
	if ok, err := b.stored(ctx, name); err != nil || ok {
		return err
	}
	kv, err := b.deps.Meta.Get(ctx, deletedTopicKey(b.cfg.Region, name))
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: %s was deleted in region %s at %s; replication does not create it again (create it here to replicate it here again)",
		ErrTopicNotFound, name, b.cfg.Region, kv.Value)
}

// unmarkDeleted removes the mark of a topic just created here (a new
// topic, whose copies in other regions may stream here again; or a
// partition of a partitioned topic created again).
func (b *Broker) unmarkDeleted(ctx context.Context, name topic.Name) {
	if err := b.deps.Meta.Delete(ctx, deletedTopicKey(b.cfg.Region, name)); err != nil && !errors.Is(err, metastore.ErrNotFound) {
		b.log.Warn("mark of a deleted topic not removed: other regions' copies will not stream into it", "topic", name.String(), "err", err)
	}
}

// sweepDeletedMarks removes the marks of topics whose namespace no longer
// exists (the maintenance loop calls it).
func (b *Broker) sweepDeletedMarks(ctx context.Context) {
	prefix := deletedTopicsPrefix(b.cfg.Region)
	keys, err := listKeys(ctx, b.deps.Meta, prefix)
	if err != nil {
		return
	}
	gone := map[string]bool{}
	for _, rest := range keys {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 3 {
			continue
		}
		ns := parts[0] + "/" + parts[1]
		missing, seen := gone[ns]
		if !seen {
			_, err := b.deps.Namespaces.Policy(ctx, ns)
			missing = errors.Is(err, ErrNamespace)
			gone[ns] = missing
		}
		if missing {
			_ = b.deps.Meta.Delete(ctx, prefix+rest)
		}
	}
}
