package policy

import (
	"errors"
	"fmt"
	"slices"
)

// Replication modes of a namespace.
const (
	// ActiveActive: every region of the namespace takes publishes and
	// acknowledgements (the default).
	ActiveActive = "active-active"
	// ActiveStandby: only the primary region does; the others hold
	// replicated copies and send clients to the primary.
	ActiveStandby = "active-standby"
)

// Failover is a namespace's replication mode and, in active-standby, its
// primary region. Epoch grows by one with every change of mode or primary,
// so a region, a broker or a replicated entry can tell which primary it
// acted for.
type Failover struct {
	Mode    string `json:"mode"`
	Primary string `json:"primary,omitempty"`
	Epoch   int64  `json:"epoch"`
}

// FailoverOf returns p's failover policy; a namespace that never set one
// is active-active at epoch 0.
func FailoverOf(p *Policies) Failover {
	if p == nil || p.Failover == nil {
		return Failover{Mode: ActiveActive}
	}
	return *p.Failover
}

// SetFailover changes p's mode and primary; the epoch grows when either
// changes (setting what is already set changes nothing).
func SetFailover(p *Policies, mode, primary string) error {
	if mode == ActiveActive && primary != "" {
		return fmt.Errorf("%w: failover: an active-active namespace has no primary (got %q)", ErrInvalid, primary)
	}
	cur := FailoverOf(p)
	if cur.Mode == mode && cur.Primary == primary {
		return nil
	}
	p.Failover = &Failover{Mode: mode, Primary: primary, Epoch: cur.Epoch + 1}
	return nil
}

// validate checks f against the namespace's replication clusters.
func (f *Failover) validate(clusters []string) error {
	var errs []error
	switch f.Mode {
	case ActiveActive:
		if f.Primary != "" {
			errs = append(errs, fmt.Errorf("failover.primary: an active-active namespace has no primary (got %q)", f.Primary))
		}
	case ActiveStandby:
		if f.Primary == "" {
			errs = append(errs, errors.New("failover.primary: an active-standby namespace needs a primary region"))
		} else if !slices.Contains(clusters, f.Primary) {
			errs = append(errs, fmt.Errorf("failover.primary: %q is not one of the replication clusters %v", f.Primary, clusters))
		}
	default:
		errs = append(errs, fmt.Errorf("failover.mode: %q: want %q or %q", f.Mode, ActiveActive, ActiveStandby))
	}
	if f.Epoch < 0 {
		errs = append(errs, fmt.Errorf("failover.epoch: %d is negative", f.Epoch))
	}
	return errors.Join(errs...)
}
