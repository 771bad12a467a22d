package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
)

var errNoTransactions = fmt.Errorf("%w: this broker describes no transactions", adminapi.ErrUnavailable)

// The transaction endpoints, Pulsar's /admin/v3/transactions
// (docs/transactions.md, Admin API).
const v3Transactions = "/admin/v3/transactions"

func (s *Server) transactionRoutes() {
	has := s.cfg.Broker.Transactions != nil
	h := func(f handlerFunc) handlerFunc { return need(has, errNoTransactions, f) }
	s.handle("GET "+v3Transactions+"/transactionMetadata/{most}/{least}", h(s.transactionMetadata))
	s.handle("GET "+v3Transactions+"/coordinatorStats", h(s.coordinatorStats))
	s.handle("GET "+v3Transactions+"/slowTransactions/{timeout}", h(s.slowTransactions))
	t := "/{tenant}/{namespace}/{topic}"
	s.handle("GET "+v3Transactions+"/transactionBufferStats"+t, h(s.transactionBufferStats))
	s.handle("GET "+v3Transactions+"/transactionInBufferStats"+t+"/{most}/{least}", h(s.transactionInBufferStats))
	s.handle("GET "+v3Transactions+"/pendingAckStats"+t+"/{subName}", h(s.pendingAckStats))
	s.handle("GET "+v3Transactions+"/transactionInPendingAckStats"+t+"/{subName}/{most}/{least}", h(s.transactionInPendingAckStats))
}

// txnIDParams reads a transaction id from the path's {most} and {least}.
func txnIDParams(r *http.Request) (most, least uint64, err error) {
	most, err = strconv.ParseUint(r.PathValue("most"), 10, 64)
	if err != nil {
		return 0, 0, badRequestf("transaction id: %v", err)
	}
	least, err = strconv.ParseUint(r.PathValue("least"), 10, 64)
	if err != nil {
		return 0, 0, badRequestf("transaction id: %v", err)
	}
	return most, least, nil
}

// transactionMetadata serves GET .../transactionMetadata/{most}/{least}:
// a transaction as its coordinator holds it.
func (s *Server) transactionMetadata(w http.ResponseWriter, r *http.Request) error {
	most, least, err := txnIDParams(r)
	if err != nil {
		return err
	}
	m, err := s.cfg.Broker.Transactions.TransactionMetadata(r.Context(), most, least)
	if err != nil {
		return err
	}
	return ok(w, m)
}

// coordinatorParam reads ?coordinatorId=; false when absent.
func coordinatorParam(r *http.Request) (uint64, bool, error) {
	q := r.URL.Query()
	if !q.Has("coordinatorId") {
		return 0, false, nil
	}
	id, err := strconv.ParseUint(q.Get("coordinatorId"), 10, 31)
	if err != nil {
		return 0, false, badRequestf("coordinatorId %q: want a coordinator's number, 0 or more", q.Get("coordinatorId"))
	}
	return id, true, nil
}

// coordinatorStats serves GET .../coordinatorStats[?coordinatorId=N]:
// one coordinator's stats (from its owner: a redirect), or, without an
// id, every coordinator's by id, gathered from their owners.
func (s *Server) coordinatorStats(w http.ResponseWriter, r *http.Request) error {
	api := s.cfg.Broker.Transactions
	id, one, err := coordinatorParam(r)
	if err != nil {
		return err
	}
	if one {
		st, err := api.CoordinatorStats(r.Context(), id)
		if err != nil {
			return err
		}
		return ok(w, st)
	}
	all, err := gatherCoordinators(s, r, api.CoordinatorStats)
	if err != nil {
		return err
	}
	return ok(w, all)
}

// slowTransactions serves GET .../slowTransactions/{timeout}
// [?coordinatorId=N]: the transactions opened more than timeout ms ago
// that are not finished, by txnId, of one coordinator or of all.
func (s *Server) slowTransactions(w http.ResponseWriter, r *http.Request) error {
	api := s.cfg.Broker.Transactions
	ms, err := strconv.ParseInt(r.PathValue("timeout"), 10, 64)
	if err != nil || ms < 0 || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return badRequestf("timeout %q: want milliseconds, 0 or more", r.PathValue("timeout"))
	}
	olderThan := time.Duration(ms) * time.Millisecond
	slow := func(ctx context.Context, id uint64) (map[string]adminapi.TransactionMetadata, error) {
		return api.SlowTransactions(ctx, id, olderThan)
	}
	id, one, err := coordinatorParam(r)
	if err != nil {
		return err
	}
	if one {
		m, err := slow(r.Context(), id)
		if err != nil {
			return err
		}
		return ok(w, m)
	}
	all, err := gatherCoordinators(s, r, slow)
	if err != nil {
		return err
	}
	out := map[string]adminapi.TransactionMetadata{}
	for _, m := range all {
		for k, v := range m {
			out[k] = v
		}
	}
	return ok(w, out)
}

// gatherCoordinators asks every coordinator of the region: the ones this
// broker runs here, the others at their owners (as Pulsar's broker does
// through its own admin client), with the caller's credentials, at the
// request's path with ?coordinatorId=. Any failure fails the whole.
func gatherCoordinators[T any](s *Server, r *http.Request, local func(ctx context.Context, id uint64) (T, error)) (map[uint64]T, error) {
	ctx := r.Context()
	n, err := s.cfg.Broker.Transactions.Coordinators(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]T, n)
	for id := uint64(0); id < uint64(n); id++ {
		v, err := local(ctx, id)
		var no *adminapi.NotOwnerError
		if errors.As(err, &no) {
			v, err = peerGet[T](s, r, no, r.URL.EscapedPath(), url.Values{"coordinatorId": {strconv.FormatUint(id, 10)}})
		}
		if err != nil {
			return nil, fmt.Errorf("transaction coordinator %d: %w", id, err)
		}
		out[id] = v
	}
	return out, nil
}

// peerGet gets path?query from the broker no names, with the caller's
// credentials and authoritative=true, and decodes its answer; a refusal
// is answered with the peer's status and reason.
func peerGet[T any](s *Server, r *http.Request, no *adminapi.NotOwnerError, path string, query url.Values) (T, error) {
	var v T
	base := no.URL
	if r.TLS != nil && no.URLTLS != "" {
		base = no.URLTLS
	}
	query.Set("authoritative", "true")
	ctx, cancel := context.WithTimeout(r.Context(), peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path+"?"+query.Encode(), nil)
	if err != nil {
		return v, fmt.Errorf("%w: ask %s: %v", adminapi.ErrUnavailable, base, err)
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	c := s.cfg.PeerClient
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return v, fmt.Errorf("%w: ask the owner %s: %v", adminapi.ErrUnavailable, base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return v, fmt.Errorf("%w: read the answer of %s: %v", adminapi.ErrUnavailable, base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		if json.Unmarshal(body, &eb) != nil || eb.Reason == "" {
			eb.Reason = fmt.Sprintf("the owner %s answered %s", base, resp.Status)
		}
		return v, refuse(kindOfStatus(resp.StatusCode), eb.Reason)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%w: the answer of %s: %v", adminapi.ErrUnavailable, base, err)
	}
	return v, nil
}

// bufferTopic is the topic of a transaction buffer endpoint: always
// persistent, as in Pulsar.
func bufferTopic(r *http.Request) (topic.Name, error) {
	return topic.Parse("persistent://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
}

// topicTxnStats serves a GET about a topic's transaction state (from the
// topic's owner): the topic from the path, ?lowWaterMarks= checked where
// Pulsar takes it (Isobar keeps no low water marks to add), the
// transaction id from the path where it has one; get answers.
func topicTxnStats[T any](w http.ResponseWriter, r *http.Request, lowWaterMarks, withID bool, get func(name topic.Name, most, least uint64) (T, error)) error {
	name, err := bufferTopic(r)
	if err != nil {
		return err
	}
	if lowWaterMarks {
		if _, err := strictBool(r, "lowWaterMarks"); err != nil {
			return err
		}
	}
	var most, least uint64
	if withID {
		if most, least, err = txnIDParams(r); err != nil {
			return err
		}
	}
	st, err := get(name, most, least)
	if err != nil {
		return err
	}
	return ok(w, st)
}

// transactionBufferStats serves GET
// .../transactionBufferStats/{tenant}/{namespace}/{topic}: the topic's
// transaction buffer.
func (s *Server) transactionBufferStats(w http.ResponseWriter, r *http.Request) error {
	return topicTxnStats(w, r, true, false, func(name topic.Name, _, _ uint64) (adminapi.TransactionBufferStats, error) {
		return s.cfg.Broker.Transactions.TransactionBufferStats(r.Context(), name)
	})
}

// transactionInBufferStats serves GET
// .../transactionInBufferStats/{tenant}/{namespace}/{topic}/{most}/{least}:
// a transaction's part of the topic's buffer.
func (s *Server) transactionInBufferStats(w http.ResponseWriter, r *http.Request) error {
	return topicTxnStats(w, r, false, true, func(name topic.Name, most, least uint64) (adminapi.TransactionInBufferStats, error) {
		return s.cfg.Broker.Transactions.TransactionInBufferStats(r.Context(), name, most, least)
	})
}

// pendingAckStats serves GET
// .../pendingAckStats/{tenant}/{namespace}/{topic}/{subName}: a
// subscription's pending acknowledgements.
func (s *Server) pendingAckStats(w http.ResponseWriter, r *http.Request) error {
	return topicTxnStats(w, r, true, false, func(name topic.Name, _, _ uint64) (adminapi.TransactionPendingAckStats, error) {
		return s.cfg.Broker.Transactions.PendingAckStats(r.Context(), name, r.PathValue("subName"))
	})
}

// transactionInPendingAckStats serves GET
// .../transactionInPendingAckStats/{tenant}/{namespace}/{topic}/{subName}/{most}/{least}:
// a transaction's part of a subscription's pending acknowledgements.
func (s *Server) transactionInPendingAckStats(w http.ResponseWriter, r *http.Request) error {
	return topicTxnStats(w, r, false, true, func(name topic.Name, most, least uint64) (adminapi.TransactionInPendingAckStats, error) {
		return s.cfg.Broker.Transactions.TransactionInPendingAckStats(r.Context(), name, r.PathValue("subName"), most, least)
	})
}
