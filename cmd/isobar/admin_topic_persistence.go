package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// topicPersistenceDelayedVerbs are the topic policy verbs of persistence
// and delayed delivery, with pulsar-admin's flags (the namespace verbs'):
// set-, get- and remove-persistence and -delayed-delivery, with --global
// and get's --applied as the other topic policies (docs/admin.md, "Topic
// policies").
func (a *adminCmd) topicPersistenceDelayedVerbs(tVerb func(*cobra.Command, func(*cobra.Command, utils.TopicName) error) *cobra.Command, asJSON *bool, s *topicPolicyScope) []*cobra.Command {
	setP := verb("set-persistence <topic>", "Set the ensemble size and quorums of the topic's new ledgers, and how often its subscriptions' acknowledgements are written", nil)
	persistence := persistenceFlags(setP)
	setP = s.scoped(tVerb(setP, func(cmd *cobra.Command, t utils.TopicName) error {
		p, err := persistence()
		if err != nil {
			return err
		}
		d := utils.PersistenceData{BookkeeperEnsemble: int64(p.BookkeeperEnsemble), BookkeeperWriteQuorum: int64(p.BookkeeperWriteQuorum),
			BookkeeperAckQuorum: int64(p.BookkeeperAckQuorum), ManagedLedgerMaxMarkDeleteRate: p.ManagedLedgerMaxMarkDeleteRate}
		if err := s.run(cmd, "set "+s.scope()+"persistence of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetPersistence(ctx, t, d)
		}); err != nil {
			return err
		}
		done(cmd, "set %spersistence of %s to %s", s.scope(), t.String(), formatPersistence(p))
		return nil
	}))
	getP := s.readable(tVerb(readVerb("get-persistence <topic>", "Show a topic's persistence policy (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var d *utils.PersistenceData
		if err := s.run(cmd, "get "+s.scope()+"persistence of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			d, err = tp.GetPersistence(ctx, t, s.applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, d, func(w io.Writer) {
			if d == nil {
				fmt.Fprintln(w, "not set")
				return
			}
			showPersistence(w, utils.NewPersistencePolicies(int(d.BookkeeperEnsemble), int(d.BookkeeperWriteQuorum), int(d.BookkeeperAckQuorum), d.ManagedLedgerMaxMarkDeleteRate))
		})
	}))
	removeP := s.scoped(tVerb(verb("remove-persistence <topic>", "Remove the topic's persistence policy: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := s.run(cmd, "remove "+s.scope()+"persistence of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemovePersistence(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %spersistence of %s", s.scope(), t.String())
		return nil
	}))

	setD := verb("set-delayed-delivery <topic>", "Turn delayed delivery on (with a tick and a longest delay) or off for a topic", nil)
	delayed := delayedDeliveryFlags(setD)
	setD = s.scoped(tVerb(setD, func(cmd *cobra.Command, t utils.TopicName) error {
		p, err := delayed()
		if err != nil {
			return err
		}
		d := utils.DelayedDeliveryData{Active: p.Active, TickTime: float64(p.TickTime), MaxDelayInMillis: p.MaxDelayInMillis}
		if err := s.run(cmd, "set "+s.scope()+"delayed delivery of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.SetDelayedDelivery(ctx, t, d)
		}); err != nil {
			return err
		}
		done(cmd, "set %sdelayed delivery of %s: %s", s.scope(), t.String(), formatDelayedDelivery(p.Active, p.TickTime, p.MaxDelayInMillis))
		return nil
	}))
	getD := s.readable(tVerb(readVerb("get-delayed-delivery <topic>", "Show a topic's delayed delivery policy (null when not set)", asJSON, nil), func(cmd *cobra.Command, t utils.TopicName) error {
		var d *utils.DelayedDeliveryData
		if err := s.run(cmd, "get "+s.scope()+"delayed delivery of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) (err error) {
			d, err = tp.GetDelayedDelivery(ctx, t, s.applied)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, *asJSON, d, func(w io.Writer) {
			if d == nil {
				fmt.Fprintln(w, "not set")
				return
			}
			fmt.Fprintln(w, formatDelayedDelivery(d.Active, int64(d.TickTime), d.MaxDelayInMillis))
		})
	}))
	removeD := s.scoped(tVerb(verb("remove-delayed-delivery <topic>", "Remove the topic's delayed delivery policy: it follows its namespace", nil), func(cmd *cobra.Command, t utils.TopicName) error {
		if err := s.run(cmd, "remove "+s.scope()+"delayed delivery of "+t.String(), func(ctx context.Context, tp pulsaradmin.TopicPolicies) error {
			return tp.RemoveDelayedDelivery(ctx, t)
		}); err != nil {
			return err
		}
		done(cmd, "removed %sdelayed delivery of %s", s.scope(), t.String())
		return nil
	}))
	return []*cobra.Command{setP, getP, removeP, setD, getD, removeD}
}
