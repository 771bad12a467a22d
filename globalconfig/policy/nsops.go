package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Inactive topic deletion modes, Pulsar's InactiveTopicDeleteMode names.
const (
	// DeleteWhenNoSubscriptions deletes an inactive topic that has no
	// subscriptions.
	DeleteWhenNoSubscriptions = "delete_when_no_subscriptions"
	// DeleteWhenSubscriptionsCaughtUp deletes an inactive topic whose
	// subscriptions have no backlog.
	DeleteWhenSubscriptionsCaughtUp = "delete_when_subscriptions_caught_up"
)

// InactiveTopicPolicies say whether and when a topic nobody uses is
// deleted, Pulsar's InactiveTopicPolicies: a namespace's
// inactive_topic_policies and a topic's inactiveTopicPolicies.
type InactiveTopicPolicies struct {
	// InactiveTopicDeleteMode is DeleteWhenNoSubscriptions or
	// DeleteWhenSubscriptionsCaughtUp; empty (pulsaradmin's null): the
	// broker's brokerDeleteInactiveTopicsMode.
	InactiveTopicDeleteMode string `json:"inactiveTopicDeleteMode,omitempty"`
	// MaxInactiveDurationSeconds is how long a topic must have had no
	// producer, no consumer and no message before it is deleted.
	MaxInactiveDurationSeconds int `json:"maxInactiveDurationSeconds"`
	// DeleteWhileInactive turns the deletion on.
	DeleteWhileInactive bool `json:"deleteWhileInactive"`
}

// CheckInactiveTopicDeleteMode checks a deletion mode ("" is allowed:
// the broker's).
func CheckInactiveTopicDeleteMode(mode string) error {
	switch mode {
	case "", DeleteWhenNoSubscriptions, DeleteWhenSubscriptionsCaughtUp:
		return nil
	}
	return fmt.Errorf("inactiveTopicDeleteMode %q: want %s or %s", mode, DeleteWhenNoSubscriptions, DeleteWhenSubscriptionsCaughtUp)
}

// Validate checks the mode and a duration of 0 to 2147483647 seconds
// (Pulsar's int).
func (p InactiveTopicPolicies) Validate() error {
	var errs []error
	if err := CheckInactiveTopicDeleteMode(p.InactiveTopicDeleteMode); err != nil {
		errs = append(errs, err)
	}
	if d := p.MaxInactiveDurationSeconds; d < 0 || d > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("maxInactiveDurationSeconds: %d is not within 0..%d", d, math.MaxInt32))
	}
	return errors.Join(errs...)
}

// MaxAntiAffinityGroupLen bounds an anti-affinity group's name, in
// bytes.
const MaxAntiAffinityGroupLen = 256

// CheckAntiAffinityGroup checks an anti-affinity group name: 1 to
// MaxAntiAffinityGroupLen bytes of UTF-8 without control characters.
// Pulsar takes any string but the empty one; the bound keeps the group
// printable and small.
func CheckAntiAffinityGroup(g string) error {
	if g == "" {
		return errors.New("Anti-affinity group can't be empty")
	}
	if len(g) > MaxAntiAffinityGroupLen {
		return fmt.Errorf("anti-affinity group: %d bytes, more than %d", len(g), MaxAntiAffinityGroupLen)
	}
	if !utf8.ValidString(g) {
		return fmt.Errorf("anti-affinity group %q: not UTF-8", g)
	}
	for _, r := range g {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("anti-affinity group %q: control characters are not allowed", g)
		}
	}
	return nil
}

// validateOps checks the fields of this file, each problem named by its
// JSON field.
func (p *Policies) validateOps() []error {
	var errs []error
	if ip := p.InactiveTopicPolicies; ip != nil {
		if err := ip.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("inactive_topic_policies: %w", err))
		}
	}
	if g := p.AntiAffinityGroup; g != "" {
		if err := CheckAntiAffinityGroup(g); err != nil {
			errs = append(errs, fmt.Errorf("antiAffinityGroup: %w", err))
		}
	}
	return errs
}

// AntiAffinityNamespaces lists the namespaces ("tenant/ns") of tenant
// whose anti-affinity group is group, compared without regard to case as
// Pulsar does. A namespace whose record cannot be used is left out.
func (s *Store) AntiAffinityNamespaces(ctx context.Context, tenant, group string) ([]string, error) {
	names, err := s.Namespaces(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		p, err := s.Namespace(ctx, n)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if p.AntiAffinityGroup != "" && strings.EqualFold(p.AntiAffinityGroup, group) {
			out = append(out, n)
		}
	}
	return out, nil
}
