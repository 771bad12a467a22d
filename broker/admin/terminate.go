package admin

import (
	"net/http"
	"strconv"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
)

// terminate ends a non-partitioned topic or one partition and answers the
// last message's id (Pulsar: POST .../terminate).
func (s *Server) terminate(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned("terminate", name)
	}
	id, err := s.topics.Terminate(r.Context(), name)
	if err != nil {
		return err
	}
	return ok(w, id)
}

// terminatePartitions ends every partition of a partitioned topic and
// answers each one's last message id by partition index (Pulsar: POST
// .../terminate/partitions).
func (s *Server) terminatePartitions(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	n, err := s.partitions(r.Context(), name)
	if err != nil {
		return err
	}
	if n == 0 {
		return badRequestf("%s is not a partitioned topic: use .../terminate", name)
	}
	out := map[string]adminapi.MessageID{}
	for i := range n {
		id, err := s.topics.Terminate(r.Context(), name.Partitioned(i))
		if err != nil {
			return err
		}
		out[strconv.Itoa(i)] = id
	}
	return ok(w, out)
}
