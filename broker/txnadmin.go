package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/txn"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// adminTxns serves the admin API's transaction endpoints.
type adminTxns struct{ b *Broker }

func (a adminTxns) TransactionMetadata(ctx context.Context, most, least uint64) (adminapi.TransactionMetadata, error) {
	b := a.b
	if !b.cfg.Transactions.Enabled {
		return adminapi.TransactionMetadata{}, errTxnOff
	}
	if most >= uint64(b.cfg.Transactions.coordinators()) {
		return adminapi.TransactionMetadata{}, fmt.Errorf("%w: transaction coordinator %d does not exist", errkind.ErrTransactionNotFound, most)
	}
	assign, err := topic.Parse(TCAssignTopic + "-partition-" + strconv.FormatUint(most, 10))
	if err != nil {
		return adminapi.TransactionMetadata{}, err
	}
	r, err := b.deps.Placement.Lookup(ctx, assign, false)
	if err != nil {
		return adminapi.TransactionMetadata{}, err
	}
	if !r.Self {
		return adminapi.TransactionMetadata{}, &adminapi.NotOwnerError{URL: strings.TrimRight(r.HTTPURL, "/"), URLTLS: strings.TrimRight(r.HTTPURLTLS, "/")}
	}
	tc, err := b.coordinator(ctx, most)
	if err != nil {
		return adminapi.TransactionMetadata{}, err
	}
	id := txn.ID{Most: most, Least: least}
	info, ok := tc.Info(id)
	if !ok {
		return adminapi.TransactionMetadata{}, fmt.Errorf("%w: transaction %v (never made, or ended)", errkind.ErrTransactionNotFound, id)
	}
	m := adminapi.TransactionMetadata{
		TxnID: fmt.Sprintf("(%d,%d)", most, least), Status: info.Status.String(),
		OpenTimestamp: info.OpenedAt.UnixMilli(), TimeoutAt: info.OpenedAt.Add(info.Timeout).UnixMilli(),
		ProducedPartitions: map[string]adminapi.TransactionInBufferStats{},
		AckedPartitions:    map[string]map[string]adminapi.TransactionInPendingAckStats{},
	}
	for _, p := range info.Partitions {
		m.ProducedPartitions[p] = adminapi.TransactionInBufferStats{}
	}
	for _, s := range info.Subs {
		if m.AckedPartitions[s.Topic] == nil {
			m.AckedPartitions[s.Topic] = map[string]adminapi.TransactionInPendingAckStats{}
		}
		m.AckedPartitions[s.Topic][s.Subscription] = adminapi.TransactionInPendingAckStats{}
	}
	return m, nil
}
