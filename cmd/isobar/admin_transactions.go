package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

// transactionsCmd is `isobar admin transactions`, pulsar-admin's
// transactions verbs and flags (docs/transactions.md, Admin API):
// coordinators' stats, slow transactions, a transaction's metadata, a
// topic's transaction buffer. pulsaradmin has no transactions API: these
// call the REST paths (/admin/v3/transactions) directly.
func (a *adminCmd) transactionsCmd() *cobra.Command {
	cmd := group("transactions", "Show transaction coordinators, slow transactions and topics' transaction buffers")
	const base = "/admin/v3/transactions"
	var asJSON bool
	var coordinator int
	var most, least uint64
	var topicName, timeout, subName string
	var lowWaterMark bool
	subFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVarP(&subName, "sub-name", "s", "", "the subscription (required)")
		return c
	}
	coordinatorFlag := func(c *cobra.Command, what string) *cobra.Command {
		c.Flags().IntVarP(&coordinator, "coordinator-id", "c", 0, what)
		return c
	}
	// txnID checks -m and -l, both required.
	txnID := func(cmd *cobra.Command) error {
		if !cmd.Flags().Changed("most-sig-bits") || !cmd.Flags().Changed("least-sig-bits") {
			return usageError{errors.New("-m/--most-sig-bits and -l/--least-sig-bits: required")}
		}
		return nil
	}
	txnIDFlags := func(c *cobra.Command, leastShort string) *cobra.Command {
		c.Flags().Uint64VarP(&most, "most-sig-bits", "m", 0, "the transaction id's most significant bits: its coordinator (required)")
		c.Flags().Uint64VarP(&least, "least-sig-bits", leastShort, 0, "the transaction id's least significant bits (required)")
		return c
	}
	// bufferPath is the REST path of a topic's transaction buffer
	// endpoint: -t names a persistent topic (a partition of a partitioned
	// one).
	bufferPath := func(endpoint string) (string, error) {
		if topicName == "" {
			return "", usageError{errors.New("-t/--topic: required")}
		}
		p, err := restTopicPath(topicName)
		if err != nil {
			return "", usageError{err}
		}
		rest, ok := strings.CutPrefix(p, "persistent/")
		if !ok {
			return "", usageError{fmt.Errorf("topic %q: transactions need persistent topics", topicName)}
		}
		return base + "/" + endpoint + "/" + rest, nil
	}
	// ackPath is the REST path of a subscription's pending-ack endpoint.
	ackPath := func(endpoint string) (string, error) {
		if subName == "" {
			return "", usageError{errors.New("-s/--sub-name: required")}
		}
		p, err := bufferPath(endpoint)
		if err != nil {
			return "", err
		}
		return p + "/" + url.PathEscape(subName), nil
	}
	topicFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVarP(&topicName, "topic", "t", "", "the topic: name, tenant/namespace/name or persistent://tenant/namespace/name (required)")
		return c
	}
	get := func(cmd *cobra.Command, op, path string, params map[string]string, v any) error {
		return a.doREST(cmd, op, func(ctx context.Context, c *rest.Client) error {
			_, err := c.GetWithQueryParamsWithContext(ctx, path, v, params, true)
			return err
		})
	}
	coordinatorParams := func(cmd *cobra.Command) (map[string]string, error) {
		if !cmd.Flags().Changed("coordinator-id") {
			return nil, nil
		}
		if coordinator < 0 {
			return nil, usageError{fmt.Errorf("-c/--coordinator-id %d: want 0 or more", coordinator)}
		}
		return map[string]string{"coordinatorId": strconv.Itoa(coordinator)}, nil
	}

	stats := coordinatorFlag(readVerb("coordinator-stats", "Show the transaction coordinators' state and counts (-c: one coordinator's)", &asJSON, func(cmd *cobra.Command, _ []string) error {
		params, err := coordinatorParams(cmd)
		if err != nil {
			return err
		}
		all := map[int]adminapi.TransactionCoordinatorStats{}
		if params != nil {
			var st adminapi.TransactionCoordinatorStats
			if err := get(cmd, fmt.Sprintf("get the stats of transaction coordinator %d", coordinator), base+"/coordinatorStats", params, &st); err != nil {
				return err
			}
			if asJSON {
				return show(cmd, true, st, nil)
			}
			all[coordinator] = st
		} else if err := get(cmd, "get the transaction coordinators' stats", base+"/coordinatorStats", nil, &all); err != nil {
			return err
		}
		return show(cmd, asJSON, all, func(w io.Writer) {
			fmt.Fprintln(w, "COORDINATOR\tSTATE\tONGOING\tLEAST SIG BITS\tLOW WATER MARK\tRECOVERED")
			for _, id := range slices.Sorted(maps.Keys(all)) {
				st := all[id]
				fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%s\n", id, st.State, st.OngoingTxnSize, st.LeastSigBits, st.LowWaterMark, millis(st.RecoverEndTime))
			}
		})
	}), "the coordinator's id (default: every coordinator)")

	slow := coordinatorFlag(readVerb("slow-transactions", "List the transactions opened longer ago than -t that have not finished (-c: of one coordinator)", &asJSON, func(cmd *cobra.Command, _ []string) error {
		if timeout == "" {
			return usageError{errors.New("-t/--time: required")}
		}
		secs, err := parseRelativeTime(timeout)
		if err != nil {
			return usageError{fmt.Errorf("-t/--time: %v", err)}
		}
		params, err := coordinatorParams(cmd)
		if err != nil {
			return err
		}
		var m map[string]adminapi.TransactionMetadata
		if err := get(cmd, "get slow transactions", fmt.Sprintf("%s/slowTransactions/%d", base, secs*1000), params, &m); err != nil {
			return err
		}
		if m == nil {
			m = map[string]adminapi.TransactionMetadata{}
		}
		return show(cmd, asJSON, m, func(w io.Writer) {
			fmt.Fprintln(w, "TXN ID\tSTATUS\tOPENED\tTIMEOUT AT\tPRODUCED TO\tACKED ON")
			ids := slices.Collect(maps.Keys(m))
			slices.SortFunc(ids, func(x, y string) int {
				return cmp.Or(cmp.Compare(m[x].OpenTimestamp, m[y].OpenTimestamp), strings.Compare(x, y))
			})
			for _, id := range ids {
				t := m[id]
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", id, t.Status, millis(t.OpenTimestamp), millis(t.TimeoutAt),
					orNone(slices.Sorted(maps.Keys(t.ProducedPartitions))), orNone(ackedOn(t)))
			}
		})
	}), "the coordinator's id (default: every coordinator)")
	slow.Flags().StringVarP(&timeout, "time", "t", "", "how long ago: 30s, 10m, 1h, 2d (required)")

	metadata := txnIDFlags(readVerb("transaction-metadata", "Show a transaction as its coordinator holds it", &asJSON, func(cmd *cobra.Command, _ []string) error {
		if err := txnID(cmd); err != nil {
			return err
		}
		var m adminapi.TransactionMetadata
		if err := get(cmd, fmt.Sprintf("get transaction (%d,%d)", most, least), fmt.Sprintf("%s/transactionMetadata/%d/%d", base, most, least), nil, &m); err != nil {
			return err
		}
		return show(cmd, asJSON, m, func(w io.Writer) {
			fmt.Fprintf(w, "txnId\t%s\nstatus\t%s\nopened\t%s\ntimeout at\t%s\n", m.TxnID, m.Status, millis(m.OpenTimestamp), millis(m.TimeoutAt))
			fmt.Fprintf(w, "produced to\t%s\nacked on\t%s\n", orNone(slices.Sorted(maps.Keys(m.ProducedPartitions))), orNone(ackedOn(m)))
		})
	}), "l")

	buffer := topicFlag(readVerb("transaction-buffer-stats", "Show a topic's transaction buffer: how far dispatch may read, the transactions ongoing there", &asJSON, func(cmd *cobra.Command, _ []string) error {
		p, err := bufferPath("transactionBufferStats")
		if err != nil {
			return err
		}
		var params map[string]string
		if lowWaterMark {
			params = map[string]string{"lowWaterMarks": "true"}
		}
		var st adminapi.TransactionBufferStats
		if err := get(cmd, "get the transaction buffer stats of "+topicName, p, params, &st); err != nil {
			return err
		}
		return show(cmd, asJSON, st, func(w io.Writer) {
			fmt.Fprintf(w, "state\t%s\nmaxReadPosition\t%s\nongoingTxnSize\t%d\n", st.State, st.MaxReadPosition, st.OngoingTxnSize)
		})
	}))
	buffer.Flags().BoolVarP(&lowWaterMark, "low-water-mark", "l", false, "ask for the buffer's low water marks too (Isobar's buffer keeps none)")

	inBuffer := txnIDFlags(topicFlag(readVerb("transaction-in-buffer-stats", "Show a transaction's part of a topic's transaction buffer: its first entry there while ongoing, whether it aborted", &asJSON, func(cmd *cobra.Command, _ []string) error {
		if err := txnID(cmd); err != nil {
			return err
		}
		p, err := bufferPath("transactionInBufferStats")
		if err != nil {
			return err
		}
		var st adminapi.TransactionInBufferStats
		if err := get(cmd, fmt.Sprintf("get transaction (%d,%d) in the buffer of %s", most, least, topicName), fmt.Sprintf("%s/%d/%d", p, most, least), nil, &st); err != nil {
			return err
		}
		return show(cmd, asJSON, st, func(w io.Writer) {
			fmt.Fprintf(w, "startPosition\t%s\naborted\t%t\n", orNone(nonEmpty(st.StartPosition)), st.Aborted)
		})
	})), "l")

	acks := subFlag(topicFlag(readVerb("pending-ack-stats", "Show a subscription's pending acknowledgements: how many transactions have some there", &asJSON, func(cmd *cobra.Command, _ []string) error {
		p, err := ackPath("pendingAckStats")
		if err != nil {
			return err
		}
		var params map[string]string
		if lowWaterMark {
			params = map[string]string{"lowWaterMarks": "true"}
		}
		var st adminapi.TransactionPendingAckStats
		if err := get(cmd, "get the pending acknowledgements of "+topicName+" "+subName, p, params, &st); err != nil {
			return err
		}
		return show(cmd, asJSON, st, func(w io.Writer) {
			fmt.Fprintf(w, "state\t%s\nongoingTxnSize\t%d\n", st.State, st.OngoingTxnSize)
		})
	})))
	acks.Flags().BoolVarP(&lowWaterMark, "low-water-mark", "l", false, "ask for the low water marks too (Isobar keeps none)")

	inAcks := txnIDFlags(subFlag(topicFlag(readVerb("transaction-in-pending-ack-stats", "Show a transaction's part of a subscription's pending acknowledgements", &asJSON, func(cmd *cobra.Command, _ []string) error {
		if err := txnID(cmd); err != nil {
			return err
		}
		p, err := ackPath("transactionInPendingAckStats")
		if err != nil {
			return err
		}
		var st adminapi.TransactionInPendingAckStats
		if err := get(cmd, fmt.Sprintf("get transaction (%d,%d) in the pending acknowledgements of %s %s", most, least, topicName, subName), fmt.Sprintf("%s/%d/%d", p, most, least), nil, &st); err != nil {
			return err
		}
		return show(cmd, asJSON, st, func(w io.Writer) {
			fmt.Fprintf(w, "cumulativeAckPosition\t%s\n", orNone(nonEmpty(st.CumulativeAckPosition)))
		})
	}))), "l")

	cmd.AddCommand(stats, slow, metadata, buffer, inBuffer, acks, inAcks)
	return cmd
}

// ackedOn lists a transaction's acknowledged subscriptions, "topic sub".
func ackedOn(m adminapi.TransactionMetadata) []string {
	var out []string
	for _, tp := range slices.Sorted(maps.Keys(m.AckedPartitions)) {
		for _, s := range slices.Sorted(maps.Keys(m.AckedPartitions[tp])) {
			out = append(out, tp+" "+s)
		}
	}
	return out
}

// millis shows a Unix time in ms (0: not known).
func millis(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}
