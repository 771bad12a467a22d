package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// BrokerInfo is Pulsar's BrokerInfo: a broker's id (host:port of its
// HTTP listener, as GET /admin/v2/brokers lists it) and its web service
// URL.
type BrokerInfo struct {
	BrokerID   string `json:"brokerId"`
	ServiceURL string `json:"serviceUrl"`
}

// Brokers is what the brokers endpoints need from the broker besides
// Topics.Brokers: the region's leader and its dynamic configuration
// (package broker/dynconfig). Errors are of a kind of errkind's table,
// as for Topics.
type Brokers interface {
	// LeaderBroker returns the region's leader broker.
	LeaderBroker(ctx context.Context) (BrokerInfo, error)
	// DynamicConfigNames lists the settings that may be set at run time.
	DynamicConfigNames() []string
	// DynamicConfig returns the settings set, by name.
	DynamicConfig(ctx context.Context) (map[string]string, error)
	// RuntimeConfig returns the value in effect of every dynamic setting
	// (set or default), by name.
	RuntimeConfig(ctx context.Context) (map[string]string, error)
	// SetDynamicConfig checks and sets a setting for every broker of the
	// region; an unknown name or a bad value is refused (412).
	SetDynamicConfig(ctx context.Context, name, value string) error
	// DeleteDynamicConfig returns a setting to its default.
	DeleteDynamicConfig(ctx context.Context, name string) error
}

var errNoBrokers = fmt.Errorf("%w: the brokers' configuration is not served by this broker", ErrUnavailable)

// listActiveBrokers serves GET /admin/v2/brokers: the live brokers of
// this cluster, as GET /admin/v2/brokers/{cluster} for the local cluster.
func (s *Server) listActiveBrokers(w http.ResponseWriter, r *http.Request) error {
	if s.topics == nil {
		return errNoTopics
	}
	bs, err := s.topics.Brokers(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNil(bs))
}

func (s *Server) leaderBroker(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Brokers == nil {
		return errNoBrokers
	}
	l, err := s.cfg.Brokers.LeaderBroker(r.Context())
	if err != nil {
		return err
	}
	return ok(w, l)
}

func (s *Server) dynamicConfigNames(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Brokers == nil {
		return errNoBrokers
	}
	return ok(w, nonNil(s.cfg.Brokers.DynamicConfigNames()))
}

func (s *Server) dynamicConfigValues(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Brokers == nil {
		return errNoBrokers
	}
	m, err := s.cfg.Brokers.DynamicConfig(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNilMap(m))
}

func (s *Server) runtimeConfig(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Brokers == nil {
		return errNoBrokers
	}
	m, err := s.cfg.Brokers.RuntimeConfig(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNilMap(m))
}

// setDynamicConfig serves POST .../configuration/{name}/{value}: the
// value is one path segment (a '/' in it is sent escaped, %2F). Pulsar
// answers 200.
func (s *Server) setDynamicConfig(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Brokers == nil {
		return errNoBrokers
	}
	if err := s.cfg.Brokers.SetDynamicConfig(r.Context(), r.PathValue("name"), r.PathValue("value")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteDynamicConfig(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Brokers == nil {
		return errNoBrokers
	}
	if err := s.cfg.Brokers.DeleteDynamicConfig(r.Context(), r.PathValue("name")); err != nil {
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

// BrokerID is the id the admin API gives the broker serving httpURL: the
// host:port of its HTTP listener.
func BrokerID(httpURL string) string {
	if u, err := url.Parse(httpURL); err == nil && u.Host != "" {
		return u.Host
	}
	return httpURL
}
