package adminapi

import (
	"context"

	"github.com/isobar-mq/isobar/topic"
)

// Bundles (Broker.Bundles) is a broker that serves namespace bundles (the
// broker does). The admin server's namespace and bundle operations need it:
// unload, clear backlog, unsubscribe, delete bundle. Without it they
// answer 503.
type Bundles interface {
	// Bundles lists a namespace's bundles as the broker places topics in
	// them, in hash order.
	Bundles(ctx context.Context, ns string) ([]topic.Bundle, error)
	// BundleOwner says which broker owns bundle b of ns. With acquire
	// set, an unowned bundle is placed as a lookup places it (taken by
	// this broker when authoritative is set, as after a redirect); else
	// an unowned bundle is reported as such.
	BundleOwner(ctx context.Context, ns string, b topic.Bundle, acquire, authoritative bool) (BundleOwner, error)
	// UnloadBundle unloads bundle b of ns, which this broker owns: it
	// stops owning it, closes its topics (their clients reconnect) and
	// releases its ownership, so the next lookup places it afresh.
	UnloadBundle(ctx context.Context, ns string, b topic.Bundle) error
}

// BundleOwner is the owner of a bundle as Bundles.BundleOwner finds it.
type BundleOwner struct {
	// Owned is false for a bundle no broker owns (only when not asked to
	// acquire it).
	Owned bool
	// Self: this broker owns it.
	Self bool
	// URL and URLTLS are the owner's HTTP and HTTPS base URLs.
	URL, URLTLS string
}

// BundleSplitter (Broker.Splitter) is a broker that splits bundles (the
// broker with bundle placement does).
type BundleSplitter interface {
	// SplitBundle replaces bundle b of ns, which this broker owns, by
	// its halves lo and hi in the namespace's boundaries; this broker
	// owns both halves afterwards, and with unload set unloads them. A
	// b that is no longer one of the namespace's bundles (a split
	// racing) is a conflict (409).
	SplitBundle(ctx context.Context, ns string, b, lo, hi topic.Bundle, unload bool) error
}
