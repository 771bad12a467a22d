package admin

import (
	"fmt"
	"net/http"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

var errNoLoadReport = fmt.Errorf("%w: this broker publishes no load report", adminapi.ErrUnavailable)

// loadReport serves GET /admin/v2/broker-stats/load-report: the load
// report of the broker that answers.
func (s *Server) loadReport(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.cfg.Broker.LoadReporter.LoadReport(r.Context())
	if err != nil {
		return err
	}
	return ok(w, rep)
}
