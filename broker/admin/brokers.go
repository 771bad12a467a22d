package admin

import (
	"fmt"
	"net/http"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

var errNoBrokers = fmt.Errorf("%w: the brokers' configuration is not served by this broker", adminapi.ErrUnavailable)

// listActiveBrokers serves GET /admin/v2/brokers: the live brokers of
// this cluster, as GET /admin/v2/brokers/{cluster} for the local cluster.
func (s *Server) listActiveBrokers(w http.ResponseWriter, r *http.Request) error {
	bs, err := s.topics.Brokers(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNil(bs))
}

func (s *Server) leaderBroker(w http.ResponseWriter, r *http.Request) error {
	l, err := s.cfg.Broker.Brokers.LeaderBroker(r.Context())
	if err != nil {
		return err
	}
	return ok(w, l)
}

func (s *Server) dynamicConfigNames(w http.ResponseWriter, r *http.Request) error {
	return ok(w, nonNil(s.cfg.Broker.Brokers.DynamicConfigNames()))
}

func (s *Server) dynamicConfigValues(w http.ResponseWriter, r *http.Request) error {
	m, err := s.cfg.Broker.Brokers.DynamicConfig(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNilMap(m))
}

func (s *Server) runtimeConfig(w http.ResponseWriter, r *http.Request) error {
	m, err := s.cfg.Broker.Brokers.RuntimeConfig(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNilMap(m))
}

// setDynamicConfig serves POST .../configuration/{name}/{value}: the
// value is one path segment (a '/' in it is sent escaped, %2F). Pulsar
// answers 200.
func (s *Server) setDynamicConfig(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Broker.Brokers.SetDynamicConfig(r.Context(), r.PathValue("name"), r.PathValue("value")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteDynamicConfig(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Broker.Brokers.DeleteDynamicConfig(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	return noContent(w)
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
