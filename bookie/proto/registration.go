package proto

// Registration is what a bookie publishes, as JSON under a lease, at
// BookiesPrefix(region prefix) + its id in the region's metadata store, and
// what ledger clients read to place ensembles. It is part of the contract
// between bookies and ledger clients, like the frames in this package.
type Registration struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Rack    string `json:"rack,omitempty"`
	// Group is the bookie group the bookie was configured in
	// (bookie.group), for namespaces' bookie affinity; the region's
	// racks-info record (package bookie/racks) overrides it.
	Group      string `json:"group,omitempty"`
	TotalBytes uint64 `json:"totalBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
	ReadOnly   bool   `json:"readOnly"`
	// InstanceID is the instance id of the bookie's cookie (random, made
	// when its directories were first used): a registration with the
	// bookie's id and instance id is the same bookie, even at another
	// address. Empty from bookies of earlier versions.
	InstanceID string `json:"instanceId,omitempty"`
}

// BookiesPrefix is where bookies register, under a region's metadata prefix
// (metastore.RegionPrefix).
func BookiesPrefix(regionPrefix string) string { return regionPrefix + "bookies/" }

// CookiesPrefix is where the copies of bookie cookies live, under a
// region's metadata prefix.
func CookiesPrefix(regionPrefix string) string { return regionPrefix + "cookies/" }
