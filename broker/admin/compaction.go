package admin

import (
	"fmt"
	"net/http"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
)

var errNoCompactor = fmt.Errorf("%w: this broker does not compact topics", adminapi.ErrNotAllowed)

func (s *Server) compactionRoutes(t string) {
	has := s.cfg.Broker.Compactor != nil
	s.handle("PUT "+t+"/compaction", s.topicHandler(topic.Persistent, needT(has, errNoCompactor, s.compact)))
	s.handle("GET "+t+"/compaction", s.topicHandler(topic.Persistent, needT(has, errNoCompactor, s.compactionStatus)))
}

// compact starts compacting a topic, each partition of a partitioned one
// (Pulsar: PUT .../compaction, 204; 409 "Compaction already in
// progress").
func (s *Server) compact(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	c := s.cfg.Broker.Compactor
	ts, partitioned, err := s.targets(r.Context(), name)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := c.Compact(r.Context(), t); err != nil {
			if partitioned {
				return fmt.Errorf("%s: %w", t, err)
			}
			return err // Pulsar's reason as it is ("Compaction already in progress")
		}
	}
	return noContent(w)
}

// compactionStatus answers a topic's (or a partition's) compaction
// status (Pulsar: GET .../compaction); a partitioned topic has none of
// its own.
func (s *Server) compactionStatus(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	c := s.cfg.Broker.Compactor
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned("compaction status (ask each partition)", name)
	}
	st, err := c.CompactionStatus(r.Context(), name)
	if err != nil {
		return err
	}
	return ok(w, st)
}
