package ownership

// Candidate is a live broker placement may choose, with its load: the
// number of bundles it owns.
type Candidate struct {
	ID   string
	Load int
	// AntiAffinity is how many other namespaces of the bundle's
	// namespace's anti-affinity group the broker owns bundles of (0 when
	// the namespace is in no group).
	AntiAffinity int
}

// Place chooses the broker that should own the bundle whose ownership key
// suffix is key ("tenant/namespace/0x00000000_0x40000000"). Anti-affinity
// comes first, as Pulsar's anti-affinity-group filter: only the
// candidates owning bundles of the fewest other namespaces of the
// namespace's group are considered (those owning none, when there are
// any; all of them when no namespace is in a group). Among those, the
// candidate with the fewest owned bundles; among equally loaded ones the one
// with the highest rendezvous score hash(key, id), so different bundles
// spread over equally loaded brokers and every broker computes the same
// answer from the same view; a (vanishingly unlikely) score tie goes to the
// smaller id. It returns false when there are no candidates. Place is pure.
func Place(key string, cands []Candidate) (string, bool) {
	best := -1
	var bestScore uint64
	for i, c := range cands {
		s := score(key, c.ID)
		if best < 0 {
			best, bestScore = i, s
			continue
		}
		b := cands[best]
		switch {
		case c.AntiAffinity != b.AntiAffinity:
			if c.AntiAffinity < b.AntiAffinity {
				best, bestScore = i, s
			}
		case c.Load < b.Load,
			c.Load == b.Load && s > bestScore,
			c.Load == b.Load && s == bestScore && c.ID < b.ID:
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return "", false
	}
	return cands[best].ID, true
}

// score is the rendezvous (highest random weight) score of broker id for
// key: FNV-1a over key, a zero byte and id, finished with the SplitMix64
// mixer so that keys differing in a few bytes get unrelated scores.
func score(key, id string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	h *= prime // the zero separator byte
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
