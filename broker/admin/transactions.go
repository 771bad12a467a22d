package admin

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

var errNoTransactions = fmt.Errorf("%w: this broker describes no transactions", adminapi.ErrUnavailable)

// transactionMetadata serves GET
// /admin/v3/transactions/transactionMetadata/{most}/{least}: a
// transaction as its coordinator holds it (docs/transactions.md).
func (s *Server) transactionMetadata(w http.ResponseWriter, r *http.Request) error {
	most, err := strconv.ParseUint(r.PathValue("most"), 10, 64)
	if err != nil {
		return badRequestf("transaction id: %v", err)
	}
	least, err := strconv.ParseUint(r.PathValue("least"), 10, 64)
	if err != nil {
		return badRequestf("transaction id: %v", err)
	}
	m, err := s.cfg.Broker.Transactions.TransactionMetadata(r.Context(), most, least)
	if err != nil {
		return err
	}
	return ok(w, m)
}
