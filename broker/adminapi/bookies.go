package adminapi

// RawBookieInfo and BookiesClusterInfo are Pulsar's answer to
// GET /admin/v2/bookies/all.
type RawBookieInfo struct {
	BookieID string `json:"bookieId"`
}

// BookiesClusterInfo lists the region's bookies.
type BookiesClusterInfo struct {
	Bookies []RawBookieInfo `json:"bookies"`
}
