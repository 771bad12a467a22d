package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
)

// The automatic recovery endpoints (docs/ledger.md "Automatic recovery"):
// Isobar's own, as Pulsar leaves these to BookKeeper's autorecovery
// tools. Superusers only, as the other bookies endpoints.
//
//	POST   /admin/v2/bookies/decommission/{bookie} mark a bookie decommissioned (204)
//	DELETE /admin/v2/bookies/decommission/{bookie} take the mark off (204; 404 without one)
//	GET  /admin/v2/bookies/decommissioned          the marked bookies
//	GET  /admin/v2/bookies/under-replicated        ledgers waiting for recovery

// BookieRecovery is what the recovery endpoints need (ledger.Operations).
type BookieRecovery interface {
	Decommission(ctx context.Context, bookie string) error
	Recommission(ctx context.Context, bookie string) error
	Decommissioned(ctx context.Context) ([]string, error)
	UnderReplicated(ctx context.Context) ([]ledger.UnderReplicated, error)
}

var errNoRecovery = fmt.Errorf("%w: automatic recovery is not served by this broker", adminapi.ErrUnavailable)

func (s *Server) recoveryRoutes(v2 string) {
	s.handle("POST "+v2+"/bookies/decommission/{bookie}", s.withRecovery(s.decommissionBookie))
	s.handle("DELETE "+v2+"/bookies/decommission/{bookie}", s.withRecovery(s.recommissionBookie))
	s.handle("GET "+v2+"/bookies/decommissioned", s.withRecovery(s.decommissionedBookies))
	s.handle("GET "+v2+"/bookies/under-replicated", s.withRecovery(s.underReplicated))
}

func (s *Server) decommissionBookie(w http.ResponseWriter, r *http.Request) error {
	if err := recoveryErr(s.cfg.Recovery.Decommission(r.Context(), r.PathValue("bookie"))); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) recommissionBookie(w http.ResponseWriter, r *http.Request) error {
	if err := recoveryErr(s.cfg.Recovery.Recommission(r.Context(), r.PathValue("bookie"))); err != nil {
		return err
	}
	return noContent(w)
}

// recoveryErr answers the refusals: 412 for a bad bookie id, 404 for an
// unknown bookie or one without the mark.
func recoveryErr(err error) error {
	switch {
	case errors.Is(err, ledger.ErrInvalid):
		return refuse(errkind.ErrPreconditionFailed, strings.ReplaceAll(err.Error(), ledger.ErrInvalid.Error()+": ", ""))
	case errors.Is(err, ledger.ErrUnknownBookie):
		return refuse(errkind.ErrNotFound, strings.ReplaceAll(err.Error(), ledger.ErrUnknownBookie.Error()+": ", "Bookie not found: "))
	case errors.Is(err, ledger.ErrNotDecommissioned):
		return refuse(errkind.ErrNotFound, strings.ReplaceAll(err.Error(), ledger.ErrNotDecommissioned.Error()+": ", "Bookie is not decommissioned: "))
	}
	return err
}

func (s *Server) decommissionedBookies(w http.ResponseWriter, r *http.Request) error {
	bs, err := s.cfg.Recovery.Decommissioned(r.Context())
	if err != nil {
		return err
	}
	if bs == nil {
		bs = []string{}
	}
	return ok(w, bs)
}

func (s *Server) underReplicated(w http.ResponseWriter, r *http.Request) error {
	us, err := s.cfg.Recovery.UnderReplicated(r.Context())
	if err != nil {
		return err
	}
	if us == nil {
		us = []ledger.UnderReplicated{}
	}
	return ok(w, us)
}
