package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/isobar-mq/isobar/bookie/racks"
	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
)

// The bookies endpoints: the region's racks-info (package bookie/racks),
// which bookie placement reads, and its bookies. Superusers only, as in
// Pulsar.

var errNoBookies = fmt.Errorf("%w: the bookies' rack information is not served by this broker", adminapi.ErrUnavailable)

func (s *Server) bookieRoutes(v2 string) {
	s.handle("GET "+v2+"/bookies/all", s.withBookies(s.allBookies))
	s.handle("GET "+v2+"/bookies/racks-info", s.withBookies(s.racksInfo))
	s.handle("GET "+v2+"/bookies/racks-info/{bookie}", s.withBookies(s.bookieRack))
	s.handle("POST "+v2+"/bookies/racks-info/{bookie}", s.withBookies(s.setBookieRack))
	s.handle("DELETE "+v2+"/bookies/racks-info/{bookie}", s.withBookies(s.deleteBookieRack))
	s.recoveryRoutes(v2)
}

func (s *Server) allBookies(w http.ResponseWriter, r *http.Request) error {
	ids, err := s.cfg.Bookies.Bookies(r.Context())
	if err != nil {
		return err
	}
	out := adminapi.BookiesClusterInfo{Bookies: []adminapi.RawBookieInfo{}}
	for _, id := range ids {
		out.Bookies = append(out.Bookies, adminapi.RawBookieInfo{BookieID: id})
	}
	return ok(w, out)
}

func (s *Server) racksInfo(w http.ResponseWriter, r *http.Request) error {
	c, err := s.cfg.Bookies.Read(r.Context())
	if err != nil {
		return err
	}
	return ok(w, c)
}

func (s *Server) bookieRack(w http.ResponseWriter, r *http.Request) error {
	c, err := s.cfg.Bookies.Read(r.Context())
	if err != nil {
		return err
	}
	b := r.PathValue("bookie")
	_, info, found := c.Lookup(b)
	if !found {
		return refuse(errkind.ErrNotFound, "Bookie address not found: "+b)
	}
	return ok(w, info)
}

// setBookieRack serves POST .../racks-info/{bookie}?group=G with a
// BookieInfo body: the bookie moves to group G (out of any other), with
// that rack and host name. Answers 204.
func (s *Server) setBookieRack(w http.ResponseWriter, r *http.Request) error {
	group, given := r.URL.Query()["group"]
	if !given {
		return refuse(errkind.ErrPreconditionFailed, "Bookie 'group' parameters is missing")
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var info racks.Info
	if err := decodeStrict(body, &info); err != nil {
		return err
	}
	if err := s.cfg.Bookies.Set(r.Context(), group[0], r.PathValue("bookie"), info); err != nil {
		return racksErr(err)
	}
	return noContent(w)
}

func (s *Server) deleteBookieRack(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Bookies.Remove(r.Context(), r.PathValue("bookie")); err != nil {
		return racksErr(err)
	}
	return noContent(w)
}

// racksErr answers the racks store's refusals: 412 for a bad bookie id,
// group, rack or host name (as Pulsar answers a missing group or a bad
// rack), 404 for a bookie in no group.
func racksErr(err error) error {
	switch {
	case errors.Is(err, racks.ErrInvalid):
		return refuse(errkind.ErrPreconditionFailed, strings.ReplaceAll(err.Error(), racks.ErrInvalid.Error()+": ", ""))
	case errors.Is(err, racks.ErrNotFound):
		return refuse(errkind.ErrNotFound, strings.ReplaceAll(err.Error(), racks.ErrNotFound.Error()+": ", ""))
	}
	return err
}
