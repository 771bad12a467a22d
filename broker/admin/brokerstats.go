package admin

import (
	"context"
	"fmt"
	"net/http"
)

// LoadReporter is implemented by a Brokers that knows this broker's load
// report (package broker/ownership's LoadReport, in the shape of Pulsar's
// LocalBrokerData).
type LoadReporter interface {
	// LoadReport returns this broker's last sampled load report; an error
	// of kind ErrUnavailable before the first sample.
	LoadReport(ctx context.Context) (any, error)
}

var errNoLoadReport = fmt.Errorf("%w: this broker publishes no load report", ErrUnavailable)

// loadReport serves GET /admin/v2/broker-stats/load-report: the load
// report of the broker that answers.
func (s *Server) loadReport(w http.ResponseWriter, r *http.Request) error {
	lr, isLR := s.cfg.Brokers.(LoadReporter)
	if !isLR {
		return errNoLoadReport
	}
	rep, err := lr.LoadReport(r.Context())
	if err != nil {
		return err
	}
	return ok(w, rep)
}
