// Package faultrule is the counting behind the fault injectors' rules
// (metastore/metafault, broker/mledger/memledger): it counts the
// operations a rule matches and decides which of them fail, the Nth
// (1-based) or every one from the Nth on, until the rule is cleared.
// Tests only; it imports nothing of ours.
package faultrule

import "sync/atomic"

// Counter counts one rule's matching operations. Its zero value is ready;
// a rule embeds it, which gives the rule Count, Fired and Clear.
type Counter struct {
	count   atomic.Int64
	fired   atomic.Int64
	cleared atomic.Bool
}

// Fail counts one matching operation and reports whether it fails: the
// nth, or with sticky every one from the nth on; none when n <= 0 or
// once cleared.
func (c *Counter) Fail(n int64, sticky bool) bool {
	k := c.count.Add(1)
	if c.cleared.Load() || n <= 0 || k < n || (k > n && !sticky) {
		return false
	}
	c.fired.Add(1)
	return true
}

// Count is the number of matching operations seen so far.
func (c *Counter) Count() int64 { return c.count.Load() }

// Fired is the number of operations failed so far.
func (c *Counter) Fired() int64 { return c.fired.Load() }

// Clear ends the fault: later operations pass (and are still counted).
func (c *Counter) Clear() { c.cleared.Store(true) }
