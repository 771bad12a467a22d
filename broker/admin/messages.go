package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// This file serves a topic's messages and properties: peek, examine, the
// message id at a time, and GET/PUT/DELETE .../properties.

// decodeProperties decodes a body of topic properties, a JSON object of
// strings; an empty or null body is none (nil).
func decodeProperties(body []byte) (map[string]string, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("properties: want a JSON object of string values: %w", err)
	}
	return m, checkProperties(m)
}

// checkProperties refuses an empty key and properties over
// policy.MaxTopicPropertiesBytes (keys and values summed).
func checkProperties(m map[string]string) error {
	size := 0
	for k, v := range m {
		if k == "" {
			return fmt.Errorf("properties: a property with an empty key")
		}
		size += len(k) + len(v)
	}
	if size > policy.MaxTopicPropertiesBytes {
		return fmt.Errorf("properties: %d bytes, more than %d", size, policy.MaxTopicPropertiesBytes)
	}
	return nil
}

// messagePosition parses a 1-based message position.
func messagePosition(what, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, badRequestf("%s %q: want a message position of 1 or more", what, v)
	}
	return n, nil
}

// notPartitioned refuses op on a partitioned topic (405, as Pulsar).
func (s *Server) notPartitioned(r *http.Request, name topic.Name, op string) error {
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned(op, name)
	}
	return nil
}

// writeEntry answers one stored entry as GET .../ledger/{l}/entry/{e}
// does (entry.go).
func (s *Server) writeEntry(w http.ResponseWriter, name topic.Name, id adminapi.MessageID, raw []byte) error {
	resp, err := decodeEntryResponse(raw, id.LedgerID, id.EntryID, s.cfg.Decompress)
	if err != nil {
		return fmt.Errorf("entry %d:%d of %s: %w", id.LedgerID, id.EntryID, name, err)
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.WriteHeader(http.StatusOK)
	w.Write(resp.body)
	return nil
}

// peek serves GET .../subscription/{sub}/position/{n}: the n-th message
// the subscription has not acknowledged, without moving it.
func (s *Server) peek(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	n, err := messagePosition("position", r.PathValue("n"))
	if err != nil {
		return err
	}
	if err := s.notPartitioned(r, name, "peeking messages"); err != nil {
		return err
	}
	id, raw, err := s.topics.PeekMessage(r.Context(), name, r.PathValue("sub"), n)
	if err != nil {
		return err
	}
	return s.writeEntry(w, name, id, raw)
}

// examineMessage serves GET .../examinemessage?initialPosition=
// earliest|latest&messagePosition=N (defaults latest and 1): the N-th
// message from the first, or back from the last.
func (s *Server) examineMessage(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	q := r.URL.Query()
	var earliest bool
	switch v := q.Get("initialPosition"); strings.ToLower(v) {
	case "", "latest":
	case "earliest":
		earliest = true
	default:
		return badRequestf("initialPosition %q: want earliest or latest", v)
	}
	n := int64(1)
	if v := q.Get("messagePosition"); v != "" {
		var err error
		if n, err = messagePosition("messagePosition", v); err != nil {
			return err
		}
	}
	if err := s.notPartitioned(r, name, "examining messages"); err != nil {
		return err
	}
	id, raw, err := s.topics.ExamineMessage(r.Context(), name, earliest, n)
	if err != nil {
		return err
	}
	return s.writeEntry(w, name, id, raw)
}

// messageIDByTime serves GET .../messageid/{timestamp}: the id of the
// first message published at or after the time (milliseconds).
func (s *Server) messageIDByTime(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil || ms < 0 {
		return badRequestf("timestamp %q: want milliseconds since the epoch", r.PathValue("timestamp"))
	}
	if err := s.notPartitioned(r, name, "getting a message id by time"); err != nil {
		return err
	}
	id, err := s.topics.MessageIDByTime(r.Context(), name, time.UnixMilli(ms))
	if err != nil {
		return err
	}
	return ok(w, id)
}

// getProperties serves GET .../properties: a partitioned topic's from its
// record, a topic's (or partition's) from the broker.
func (s *Server) getProperties(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	m, partitioned, err := s.cfg.Policies.PartitionedMetadata(ctx, name)
	if err != nil {
		return err
	}
	props := m.Properties
	if !partitioned {
		if props, err = s.topics.Properties(ctx, name); err != nil {
			return err
		}
	}
	if props == nil {
		props = map[string]string{}
	}
	return ok(w, props)
}

// updateProperties serves PUT .../properties: body a JSON object of
// strings, set over the topic's properties (others stay).
func (s *Server) updateProperties(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	props, err := decodeProperties(body)
	if err != nil {
		return badRequest(err)
	}
	if props == nil {
		return badRequestf("properties: a JSON object is required")
	}
	if err := s.changeProperties(r, name, props, nil); err != nil {
		return err
	}
	return noContent(w)
}

// removeProperty serves DELETE .../properties?key=K.
func (s *Server) removeProperty(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	key := r.URL.Query().Get("key")
	if key == "" {
		return badRequestf("key: a property key is required (?key=)")
	}
	if err := s.changeProperties(r, name, nil, []string{key}); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) changeProperties(r *http.Request, name topic.Name, set map[string]string, remove []string) error {
	ctx := r.Context()
	n, err := s.partitions(ctx, name)
	if err != nil {
		return err
	}
	if n > 0 {
		return s.cfg.Policies.UpdatePartitionedProperties(ctx, name, set, remove)
	}
	return s.topics.UpdateProperties(ctx, name, set, remove)
}
