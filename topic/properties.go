package topic

import "maps"

// MergeProperties returns a topic's properties cur with set applied and
// then the keys of remove deleted, and the result's size (the bytes of
// its keys and values), against which stores check their limits; nil for
// an empty result. cur is not changed.
func MergeProperties(cur, set map[string]string, remove []string) (map[string]string, int) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	maps.Copy(next, set)
	for _, k := range remove {
		delete(next, k)
	}
	size := 0
	for k, v := range next {
		size += len(k) + len(v)
	}
	if len(next) == 0 {
		return nil, 0
	}
	return next, size
}
