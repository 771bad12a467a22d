// Package deletes keeps the federation's deletes of topics and namespaces
// in the global configuration store. Deleting a replicated topic or a
// namespace through any region writes a record here; every region applies
// it (deletes its own copy) and marks it applied with the bound below
// which its ledger ids belong to deleted copies. While a record is not
// applied everywhere, nobody may create the name again, and replicated
// entries from a region that has not applied it, or from below its bound,
// are refused: what was deleted never comes back (docs/replication.md,
// "Deleting topics and namespaces").
//
// The record logic (Pending, Blocks, RefuseFrame) is pure; Store reads and
// writes the records.
package deletes

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// Prefix is where the records live.
const Prefix = policy.Root + "deletes/"

const (
	topicsPrefix        = Prefix + "topics/"
	namespacesPrefix    = Prefix + "namespaces/"
	subscriptionsPrefix = Prefix + "subscriptions/"
)

// Kind is what a record deletes.
type Kind string

const (
	// Topic deletes one topic: a non-partitioned topic, or every
	// partition of a partitioned one.
	Topic Kind = "topic"
	// Namespace deletes every topic of a namespace, and then the
	// namespace.
	Namespace Kind = "namespace"
	// Subscription deletes one subscription of a topic (of every
	// partition of a partitioned one).
	Subscription Kind = "subscription"
)

// Errors, checked with errors.Is.
var (
	// ErrDeleting: the name is being deleted and may not be used or
	// created again until every region has deleted its copy.
	ErrDeleting = errkind.Sentinel(errkind.ErrConflict, "being deleted")
	// ErrDeletedCopy: replicated entries of a deleted copy.
	ErrDeletedCopy = errkind.Sentinel(errkind.ErrPreconditionFailed, "entries of a deleted copy")
)

// Record is one delete.
type Record struct {
	Kind Kind `json:"kind"`
	// Name is the topic's name (a partitioned topic's base name) or the
	// namespace ("tenant/ns").
	Name string `json:"name"`
	// Partitions is a partitioned topic's partition count when it was
	// deleted (0: not partitioned).
	Partitions int `json:"partitions,omitempty"`
	// Subscription is the subscription a Subscription record deletes
	// (Name is its topic).
	Subscription string `json:"subscription,omitempty"`
	// IfEmpty marks a namespace delete without force: each region only
	// checks that it holds no topic of the namespace (Applied when it
	// holds none, Refused otherwise) and deletes nothing.
	IfEmpty bool `json:"ifEmpty,omitempty"`
	// Regions must each apply the record: the replication clusters when
	// it was written.
	Regions []string `json:"regions"`
	// By is the region that took the request; At when.
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Applied holds each region that applied the record, any region
	// that saw it, not only Regions.
	Applied map[string]Applied `json:"applied,omitempty"`
	// Refused holds, for an IfEmpty record, the regions that hold topics
	// of the namespace, with the reason.
	Refused map[string]string `json:"refused,omitempty"`
	// Done: the delete is finished everywhere and its global records
	// (partitioned metadata, topic policies, the namespace's policies)
	// are gone. A done record stays for its bounds until the name is
	// deleted again.
	Done bool `json:"done,omitempty"`

	// Key and Rev are where the record is stored, and its revision.
	Key string `json:"-"`
	Rev int64  `json:"-"`
}

// Applied is one region's application of a record.
type Applied struct {
	At time.Time `json:"at"`
	// LedgerBound is the region's first ledger id made after its copies
	// were deleted: every entry of a deleted copy lies below it, every
	// entry of a copy created since at or above it.
	LedgerBound uint64 `json:"ledgerBound"`
}

// TopicKey is the record key of topic n (its base name).
func TopicKey(n topic.Name) string {
	b := n.Base()
	return topicsPrefix + b.Tenant + "/" + b.Namespace + "/" + string(b.Domain) + "/" + b.Local
}

// NamespaceKey is the record key of namespace ns ("tenant/ns").
func NamespaceKey(ns string) string { return namespacesPrefix + ns }

// SubscriptionKey is the record key of subscription sub of topic n (its
// base name).
func SubscriptionKey(n topic.Name, sub string) string {
	b := n.Base()
	return subscriptionsPrefix + b.Tenant + "/" + b.Namespace + "/" + string(b.Domain) + "/" + b.Local + "/" + url.PathEscape(sub)
}

// Keys returns the keys of the records that may cover topic n: its own
// and its namespace's.
func Keys(n topic.Name) []string {
	return []string{TopicKey(n), NamespaceKey(n.NamespaceName())}
}

// Covers reports whether the record deletes topic n.
func (r Record) Covers(n topic.Name) bool {
	switch r.Kind {
	case Topic:
		return n.Base().String() == r.Name
	case Namespace:
		return n.NamespaceName() == r.Name
	}
	return false // a subscription's record deletes no topic
}

// Topics lists the topics a topic record deletes (a subscription
// record's, the topics it deletes the subscription of): the topic, or
// each partition.
func (r Record) Topics() ([]topic.Name, error) {
	n, err := topic.Parse(r.Name)
	if err != nil || r.Kind == Namespace {
		return nil, fmt.Errorf("delete record %s: not a topic's (%v)", r.Key, err)
	}
	if r.Partitions == 0 {
		return []topic.Name{n}, nil
	}
	out := make([]topic.Name, r.Partitions)
	for i := range out {
		out[i] = n.Partitioned(i)
	}
	return out, nil
}

// Pending lists, sorted, the regions that must still apply the record:
// its Regions that are among current (the regions that still take part:
// the namespace's replication clusters now, or every cluster once the
// namespace is gone) and have neither applied nor refused it. A region
// taken out of the namespace's clusters is no longer waited for.
func (r Record) Pending(current []string) []string {
	var out []string
	for _, reg := range r.Regions {
		if _, ok := r.Applied[reg]; ok {
			continue
		}
		if _, ok := r.Refused[reg]; ok {
			continue
		}
		if slices.Contains(current, reg) {
			out = append(out, reg)
		}
	}
	slices.Sort(out)
	return out
}

// what names the record's subject in messages.
func (r Record) what() string {
	switch r.Kind {
	case Namespace:
		return "namespace " + r.Name
	case Subscription:
		return "subscription " + r.Subscription + " of " + r.Name
	}
	return r.Name
}

// Blocks returns why region may not use or create a topic the record
// covers (wrapping ErrDeleting), or nil: the record is done, or region
// has applied it and no region of current is pending. A namespace's
// record blocks until it is done (the namespace is gone), an IfEmpty one
// until it is done or withdrawn.
func (r Record) Blocks(region string, current []string) error {
	if r.Done {
		return nil
	}
	since := fmt.Sprintf("%s is being deleted in every region since %s (requested in %s)", r.what(), r.At.UTC().Format(time.RFC3339), r.By)
	if r.Kind == Namespace && !r.IfEmpty {
		if p := r.Pending(current); len(p) > 0 {
			return fmt.Errorf("%w: %s; waiting for %s", ErrDeleting, since, strings.Join(p, ", "))
		}
		return fmt.Errorf("%w: %s", ErrDeleting, since)
	}
	if _, ok := r.Applied[region]; !ok && !r.IfEmpty {
		return fmt.Errorf("%w: %s; this region has not deleted its copy yet", ErrDeleting, since)
	}
	if p := r.Pending(current); len(p) > 0 {
		return fmt.Errorf("%w: %s; waiting for %s; it can be created again once every region has deleted its copy", ErrDeleting, since, strings.Join(p, ", "))
	}
	if r.IfEmpty {
		return fmt.Errorf("%w: %s if no region holds a topic of it", ErrDeleting, since)
	}
	return nil
}

// RefuseFrame returns why replicated entries of a topic the record
// covers, read from src's copy at the given ledgers, must not be stored
// (wrapping ErrDeletedCopy), or nil. Entries from a region that has not
// applied the record come from a copy being deleted; entries below a
// region's bound come from a copy deleted since.
func (r Record) RefuseFrame(src string, ledgers []int64) error {
	if r.IfEmpty {
		return nil // deletes nothing
	}
	a, ok := r.Applied[src]
	if !ok {
		return fmt.Errorf("%w: %s is being deleted, and %s has not deleted its copy yet", ErrDeletedCopy, r.what(), src)
	}
	for _, l := range ledgers {
		if l >= 0 && uint64(l) < a.LedgerBound {
			return fmt.Errorf("%w: ledger %d of %s predates the delete of %s there (its ledgers since start at %d)", ErrDeletedCopy, l, src, r.what(), a.LedgerBound)
		}
	}
	return nil
}
