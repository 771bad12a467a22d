package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/topic"
)

// topicHandlerFunc handles a request about one topic named in the path.
type topicHandlerFunc func(w http.ResponseWriter, r *http.Request, name topic.Name) error

// topicHandler parses {tenant}/{namespace}/{topic} (already URL-decoded
// once by the mux) in domain d.
func (s *Server) topicHandler(d topic.Domain, h topicHandlerFunc) handlerFunc {
	if s.cfg.Policies == nil {
		return absent(errNoPolicies)
	}
	if s.topics == nil {
		return absent(errNoTopics)
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		name, err := topic.Parse(string(d) + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
		if err != nil {
			return err
		}
		return h(w, r, name)
	}
}

// partitions returns how many partitions name has when it is a
// partitioned topic (0 otherwise).
func (s *Server) partitions(ctx context.Context, name topic.Name) (int, error) {
	n, _, err := s.cfg.Policies.Partitions(ctx, name)
	return n, err
}

// targets is what an operation on name acts on: its partitions when it is
// a partitioned topic, else name itself.
func (s *Server) targets(ctx context.Context, name topic.Name) ([]topic.Name, bool, error) {
	n, err := s.partitions(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if n == 0 {
		return []topic.Name{name}, false, nil
	}
	out := make([]topic.Name, n)
	for i := range out {
		out[i] = name.Partitioned(i)
	}
	return out, true, nil
}

// eachTarget runs fn on every target; on a partitioned topic, partitions
// that do not exist yet are skipped when skipMissing is set.
func (s *Server) eachTarget(ctx context.Context, name topic.Name, skipMissing bool, fn func(topic.Name) error) error {
	ts, partitioned, err := s.targets(ctx, name)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := fn(t); err != nil {
			if partitioned && skipMissing && isKind(err, errkind.ErrTopicNotFound) {
				continue
			}
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	return nil
}

func notAllowedOnPartitioned(op string, name topic.Name) error {
	return fmt.Errorf("%w: %s is not allowed on partitioned topic %s", adminapi.ErrNotAllowed, op, name)
}

func (s *Server) namespaceExists(ctx context.Context, name topic.Name) error {
	_, err := s.cfg.Policies.Namespace(ctx, name.NamespaceName())
	return err
}

// topicExists reports whether name is an existing non-partitioned topic
// (or partition) according to the broker's listing.
func (s *Server) topicExists(ctx context.Context, name topic.Name) (bool, error) {
	names, err := s.topics.ListTopics(ctx, name.NamespaceName(), name.Domain)
	if err != nil {
		return false, err
	}
	return slices.Contains(names, name.String()), nil
}

// ---- listing

func (s *Server) listTopics(d topic.Domain) handlerFunc {
	if s.cfg.Policies == nil {
		return absent(errNoPolicies)
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		ns, err := nsName(r)
		if err != nil {
			return err
		}
		if _, err := s.cfg.Policies.Namespace(r.Context(), ns); err != nil {
			return err
		}
		if s.topics == nil {
			return errNoTopics
		}
		names, err := s.topics.ListTopics(r.Context(), ns, d)
		if err != nil {
			return err
		}
		return ok(w, nonNil(names))
	}
}

func (s *Server) listPartitioned(d topic.Domain) handlerFunc {
	if s.cfg.Policies == nil {
		return absent(errNoPolicies)
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		ns, err := nsName(r)
		if err != nil {
			return err
		}
		if _, err := s.cfg.Policies.Namespace(r.Context(), ns); err != nil {
			return err
		}
		pts, err := s.cfg.Policies.ListPartitioned(r.Context(), ns, d)
		if err != nil {
			return err
		}
		out := make([]string, 0, len(pts))
		for _, pt := range pts {
			out = append(out, pt.String())
		}
		return ok(w, out)
	}
}

// ---- create and delete

func (s *Server) createTopic(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	props, err := decodeProperties(body) // null, empty or properties
	if err != nil {
		return badRequest(err)
	}
	if err := s.namespaceExists(ctx, name); err != nil {
		return err
	}
	if n, err := s.partitions(ctx, name); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%w: %s is a partitioned topic", adminapi.ErrConflict, name)
	}
	if err := s.topics.CreateTopic(ctx, name); err != nil {
		return err
	}
	if len(props) > 0 {
		if err := s.topics.UpdateProperties(ctx, name, props, nil); err != nil {
			return fmt.Errorf("%s created, but setting its properties failed: %w", name, err)
		}
	}
	return noContent(w)
}

func (s *Server) deleteTopic(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	if n, err := s.partitions(ctx, name); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%w: %s is a partitioned topic; delete it with DELETE .../partitions", adminapi.ErrConflict, name)
	}
	if fd := s.cfg.Broker.Deletes; fd != nil {
		if handled, err := fd.DeleteTopicEverywhere(ctx, name, false, 0, boolParam(r, "force")); handled {
			if err != nil {
				return err
			}
			return noContent(w)
		}
	}
	if err := s.topics.DeleteTopic(ctx, name, boolParam(r, "force")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) createPartitioned(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	n, props, err := DecodePartitions(body)
	if err == nil {
		err = checkProperties(props)
	}
	if err != nil {
		return badRequest(err)
	}
	if name.Partition() >= 0 {
		return fmt.Errorf("%w: %s is a partition name", adminapi.ErrPreconditionFailed, name)
	}
	if err := s.namespaceExists(ctx, name); err != nil {
		return err
	}
	if exists, err := s.topicExists(ctx, name); err != nil {
		return err
	} else if exists {
		return fmt.Errorf("%w: non-partitioned topic %s exists", adminapi.ErrConflict, name)
	}
	if n <= s.cfg.Policies.MaxPartitions() {
		// (A count beyond the limit is the store's to refuse.)
		if err := s.checkTopicQuota(ctx, name, n); err != nil {
			return err
		}
	}
	if fd := s.cfg.Broker.Deletes; fd != nil {
		if err := fd.CheckCreate(ctx, name); err != nil {
			return err
		}
	}
	if err := s.cfg.Policies.CreatePartitionedWithProperties(ctx, name, n, props); err != nil {
		return err
	}
	s.createPartitions(ctx, name, 0, n, nil)
	return noContent(w)
}

// createPartitions creates partitions [from, to) of name, best effort
// (topics are also created on first use), and on each the subscriptions
// subs at the earliest position so that nothing published to a new
// partition before consumers find it is missed (as Pulsar does).
func (s *Server) createPartitions(ctx context.Context, name topic.Name, from, to int, subs []string) {
	for i := from; i < to; i++ {
		p := name.Partitioned(i)
		if err := s.topics.CreateTopic(ctx, p); err != nil && !isKind(err, errkind.ErrConflict) {
			s.log.Warn("admin: create partition", "topic", p.String(), "err", err)
			continue
		}
		for _, sub := range subs {
			at := adminapi.Earliest
			if err := s.topics.CreateSubscription(ctx, p, sub, &at); err != nil && !isKind(err, errkind.ErrConflict) {
				s.log.Warn("admin: create subscription on new partition", "topic", p.String(), "subscription", sub, "err", err)
			}
		}
	}
}

func (s *Server) updatePartitioned(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	n, _, err := DecodePartitions(body)
	if err != nil {
		return badRequest(err)
	}
	old, err := s.partitions(ctx, name)
	if err != nil {
		return err
	}
	if old == 0 {
		return fmt.Errorf("%w: %s is not a partitioned topic", adminapi.ErrTopicNotFound, name)
	}
	if n > old && n <= s.cfg.Policies.MaxPartitions() {
		// (A count beyond the limit is the store's to refuse, first.)
		if err := s.checkTopicQuota(ctx, name, n-old); err != nil {
			return err
		}
	}
	if err := s.cfg.Policies.UpdatePartitions(ctx, name, n); err != nil {
		return err
	}
	if n > old {
		subs, err := s.subscriptionNames(ctx, name, old)
		if err != nil {
			s.log.Warn("admin: list subscriptions for new partitions", "topic", name.String(), "err", err)
		}
		s.createPartitions(ctx, name, old, n, subs)
	}
	return noContent(w)
}

// subscriptionNames is the union of the subscriptions of the first n
// partitions of name.
func (s *Server) subscriptionNames(ctx context.Context, name topic.Name, n int) ([]string, error) {
	var all []string
	for i := range n {
		subs, err := s.topics.Subscriptions(ctx, name.Partitioned(i))
		if isKind(err, errkind.ErrTopicNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, subs...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

func (s *Server) getPartitions(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	if err := s.namespaceExists(ctx, name); err != nil {
		return err
	}
	n, err := s.partitions(ctx, name)
	if err != nil {
		return err
	}
	if n == 0 && boolParam(r, "checkAllowAutoCreation") && name.Partition() < 0 {
		if n, err = s.autoCreatePartitioned(ctx, name); err != nil {
			return err
		}
	}
	return ok(w, adminapi.PartitionedTopicMetadata{Partitions: n})
}

// autoCreatePartitioned creates name as a partitioned topic when auto
// topic creation (the namespace override, else the broker default) makes
// new topics partitioned and name does not exist as a topic; it returns
// the partition count (0 when it creates nothing).
func (s *Server) autoCreatePartitioned(ctx context.Context, name topic.Name) (int, error) {
	pol, err := s.cfg.Policies.Namespace(ctx, name.NamespaceName())
	if err != nil {
		return 0, err
	}
	auto := s.cfg.AutoTopicCreation
	if pol.AutoTopicCreation != nil {
		auto = *pol.AutoTopicCreation
	}
	if !auto.AllowAutoTopicCreation || auto.TopicType != policy.TopicTypePartitioned || auto.DefaultNumPartitions == nil {
		return 0, nil
	}
	if exists, err := s.topicExists(ctx, name); err != nil || exists {
		return 0, err
	}
	n := *auto.DefaultNumPartitions
	if n <= s.cfg.Policies.MaxPartitions() {
		if err := s.checkTopicQuota(ctx, name, n); err != nil {
			return 0, err
		}
	}
	err = s.cfg.Policies.CreatePartitioned(ctx, name, n)
	if errors.Is(err, policy.ErrExists) {
		n, err = s.partitions(ctx, name)
		return n, err
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (s *Server) deletePartitioned(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	force := boolParam(r, "force")
	n, err := s.partitions(ctx, name)
	if errors.Is(err, policy.ErrCorrupt) {
		// A record this server cannot act on (a count beyond the limit,
		// written by an older version, say): delete the partitions that
		// exist, found by listing the namespace, never by looping to the
		// stored count; then the record.
		s.log.Warn("admin: deleting a partitioned topic whose record is corrupt", "topic", name.String(), "err", err)
		parts, lerr := s.existingPartitions(ctx, name)
		if lerr != nil {
			return lerr
		}
		for _, p := range parts {
			if err := s.topics.DeleteTopic(ctx, p, force); err != nil && !isKind(err, errkind.ErrTopicNotFound) {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if err := s.cfg.Policies.DeletePartitioned(ctx, name); err != nil {
			return err
		}
		return noContent(w)
	}
	if err != nil {
		return err
	}
	if fd := s.cfg.Broker.Deletes; fd != nil {
		if handled, err := fd.DeleteTopicEverywhere(ctx, name, true, n, force); handled {
			if err != nil {
				return err
			}
			return noContent(w)
		}
	}
	if n == 0 {
		return fmt.Errorf("%w: partitioned topic %s does not exist", adminapi.ErrTopicNotFound, name)
	}
	for i := range n {
		if err := s.topics.DeleteTopic(ctx, name.Partitioned(i), force); err != nil && !isKind(err, errkind.ErrTopicNotFound) {
			return fmt.Errorf("%s: %w", name.Partitioned(i), err)
		}
	}
	if err := s.cfg.Policies.DeletePartitioned(ctx, name); err != nil {
		return err
	}
	return noContent(w)
}

// existingPartitions lists the partitions of name that exist as topics.
func (s *Server) existingPartitions(ctx context.Context, name topic.Name) ([]topic.Name, error) {
	names, err := s.topics.ListTopics(ctx, name.NamespaceName(), name.Domain)
	if err != nil {
		return nil, err
	}
	var out []topic.Name
	for _, n := range names {
		tn, err := topic.Parse(n)
		if err == nil && tn.Partition() >= 0 && tn.Base() == name {
			out = append(out, tn)
		}
	}
	return out, nil
}

// checkTopicQuota asks the broker, when it limits topics per namespace,
// whether name's namespace may get adding more.
func (s *Server) checkTopicQuota(ctx context.Context, name topic.Name, adding int) error {
	if q := s.cfg.Broker.Quota; q != nil {
		return q.CheckTopicQuota(ctx, name.NamespaceName(), adding)
	}
	return nil
}

// ---- stats

func (s *Server) stats(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	opts, err := parseStatsOptions(r)
	if err != nil {
		return err
	}
	ts, partitioned, err := s.targets(ctx, name)
	if err != nil {
		return err
	}
	if !partitioned {
		st, err := s.topics.Stats(ctx, name)
		if err != nil {
			return err
		}
		normalizeTopicStats(st)
		opts.apply(st)
		return ok(w, st)
	}
	ps, err := s.aggregate(ctx, ts, false, opts)
	if err != nil {
		return err
	}
	return ok(w, topicStatsOf(ps))
}

func (s *Server) partitionedStats(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	opts, err := parseStatsOptions(r)
	if err != nil {
		return err
	}
	ts, partitioned, err := s.targets(ctx, name)
	if err != nil {
		return err
	}
	if !partitioned {
		return fmt.Errorf("%w: partitioned topic %s does not exist", adminapi.ErrTopicNotFound, name)
	}
	perPartition := true // Pulsar's default
	if v := r.URL.Query().Get("perPartition"); v != "" {
		perPartition, _ = strconv.ParseBool(v)
	}
	ps, err := s.aggregate(ctx, ts, perPartition, opts)
	if err != nil {
		return err
	}
	return ok(w, ps)
}

func (s *Server) aggregate(ctx context.Context, parts []topic.Name, perPartition bool, opts statsOptions) (*adminapi.PartitionedTopicStats, error) {
	stats := make([]*adminapi.TopicStats, 0, len(parts))
	names := make([]string, 0, len(parts))
	for _, p := range parts {
		st, err := s.topics.Stats(ctx, p)
		if isKind(err, errkind.ErrTopicNotFound) {
			continue // not created yet
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		normalizeTopicStats(st)
		opts.apply(st)
		stats = append(stats, st)
		names = append(names, p.String())
	}
	return aggregateStats(len(parts), names, stats, perPartition), nil
}

func (s *Server) internalStats(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	if n, err := s.partitions(ctx, name); err != nil {
		return err
	} else if n > 0 {
		return notAllowedOnPartitioned("internalStats", name)
	}
	st, err := s.topics.InternalStats(ctx, name)
	if err != nil {
		return err
	}
	if st.Ledgers == nil {
		st.Ledgers = []adminapi.LedgerInfo{}
	}
	if st.Cursors == nil {
		st.Cursors = map[string]adminapi.CursorStats{}
	}
	if st.SchemaLedgers == nil {
		st.SchemaLedgers = []adminapi.SchemaLedger{}
	}
	return ok(w, st)
}

// ---- subscriptions

func (s *Server) subscriptions(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	ts, partitioned, err := s.targets(ctx, name)
	if err != nil {
		return err
	}
	if !partitioned {
		subs, err := s.topics.Subscriptions(ctx, name)
		if err != nil {
			return err
		}
		return ok(w, nonNil(subs))
	}
	subs, err := s.subscriptionNames(ctx, name, len(ts))
	if err != nil {
		return err
	}
	return ok(w, nonNil(subs))
}

func (s *Server) createSubscription(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	at, err := decodeMessageID(body)
	if err != nil {
		return badRequest(err)
	}
	var withProps struct {
		Properties map[string]string `json:"properties"`
	}
	if len(bytes.TrimSpace(body)) > 0 && json.Unmarshal(body, &withProps) == nil && len(withProps.Properties) > 0 {
		if err := checkProperties(withProps.Properties); err != nil {
			return badRequest(err)
		}
	}
	sub := r.PathValue("sub")
	if sub == "" {
		return badRequestf("empty subscription name")
	}
	sp := s.cfg.Broker.SubscriptionProperties
	if len(withProps.Properties) > 0 && sp == nil {
		return errNoSubscriptionProperties
	}
	if err := s.eachTarget(r.Context(), name, false, func(t topic.Name) error {
		if err := s.topics.CreateSubscription(r.Context(), t, sub, at); err != nil {
			return err
		}
		if len(withProps.Properties) > 0 {
			return sp.SetSubscriptionProperties(r.Context(), t, sub, withProps.Properties)
		}
		return nil
	}); err != nil {
		return err
	}
	return noContent(w)
}

var errNoSubscriptionProperties = fmt.Errorf("%w: subscription properties are not kept here", adminapi.ErrNotAllowed)

// subscriptionProperties serves GET .../subscription/{sub}/properties:
// the subscription's properties (a partitioned topic's: its partitions',
// merged, the lowest partition's value winning).
func (s *Server) subscriptionProperties(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	sp := s.cfg.Broker.SubscriptionProperties
	ts, _, err := s.targets(r.Context(), name)
	if err != nil {
		return err
	}
	out := map[string]string{}
	for i := len(ts) - 1; i >= 0; i-- {
		p, err := sp.SubscriptionProperties(r.Context(), ts[i], r.PathValue("sub"))
		if err != nil {
			return err
		}
		maps.Copy(out, p)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setSubscriptionProperties serves PUT .../subscription/{sub}/properties:
// a JSON object of strings replaces the subscription's properties (on
// every partition).
func (s *Server) setSubscriptionProperties(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	sp := s.cfg.Broker.SubscriptionProperties
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	props, err := decodeProperties(body)
	if err != nil {
		return badRequest(err)
	}
	if err := s.eachTarget(r.Context(), name, false, func(t topic.Name) error {
		return sp.SetSubscriptionProperties(r.Context(), t, r.PathValue("sub"), props)
	}); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	sub, force := r.PathValue("sub"), boolParam(r, "force")
	ctx := r.Context()
	ts, partitioned, err := s.targets(ctx, name)
	if err != nil {
		return err
	}
	if fd := s.cfg.Broker.Deletes; fd != nil {
		n := 0
		if partitioned {
			n = len(ts)
		}
		if handled, err := fd.DeleteSubscriptionEverywhere(ctx, name, n, sub, force); handled {
			if err != nil {
				return err
			}
			return noContent(w)
		}
	}
	found := false
	for _, t := range ts {
		err := s.topics.DeleteSubscription(ctx, t, sub, force)
		if partitioned && (isKind(err, errkind.ErrSubscriptionNotFound) || isKind(err, errkind.ErrTopicNotFound)) {
			continue
		}
		if err != nil {
			return err
		}
		found = true
	}
	if !found {
		return fmt.Errorf("%w: %s on %s", adminapi.ErrSubscriptionNotFound, sub, name)
	}
	return noContent(w)
}

func (s *Server) skip(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 {
		return badRequestf("skip %q: want a non-negative number of messages", r.PathValue("n"))
	}
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned("skip", name)
	}
	if err := s.topics.Skip(r.Context(), name, r.PathValue("sub"), n); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) skipAll(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	sub := r.PathValue("sub")
	if err := s.eachTarget(r.Context(), name, true, func(t topic.Name) error {
		return s.topics.Skip(r.Context(), t, sub, -1)
	}); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) resetCursorToTime(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil {
		return badRequestf("timestamp %q: want milliseconds since the epoch", r.PathValue("timestamp"))
	}
	sub, at := r.PathValue("sub"), time.UnixMilli(ms)
	if err := s.eachTarget(r.Context(), name, true, func(t topic.Name) error {
		return s.topics.ResetCursorToTime(r.Context(), t, sub, at)
	}); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) resetCursor(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	id, err := decodeMessageID(body)
	if err != nil {
		return badRequest(err)
	}
	if id == nil {
		return badRequestf("message id: required")
	}
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned("reset cursor to a message id", name)
	}
	if err := s.topics.ResetCursor(r.Context(), name, r.PathValue("sub"), *id); err != nil {
		return err
	}
	return noContent(w)
}

// ---- the rest

func (s *Server) unload(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if err := s.eachTarget(r.Context(), name, true, func(t topic.Name) error {
		return s.topics.Unload(r.Context(), t)
	}); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) lastMessageID(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned("lastMessageId", name)
	}
	id, err := s.topics.LastMessageID(r.Context(), name)
	if err != nil {
		return err
	}
	return ok(w, id)
}

func (s *Server) entry(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ledger, err1 := strconv.ParseInt(r.PathValue("ledger"), 10, 64)
	entryID, err2 := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if err1 != nil || err2 != nil || ledger < 0 || entryID < 0 {
		return badRequestf("ledger %q entry %q: want non-negative numbers", r.PathValue("ledger"), r.PathValue("entry"))
	}
	if p, err := s.partitions(r.Context(), name); err != nil {
		return err
	} else if p > 0 {
		return notAllowedOnPartitioned("reading an entry", name)
	}
	raw, err := s.topics.Entry(r.Context(), name, ledger, entryID)
	if err != nil {
		return err
	}
	return s.writeEntry(w, name, adminapi.MessageID{LedgerID: ledger, EntryID: entryID}, raw)
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ld, err := s.topics.Lookup(r.Context(), name)
	if err != nil {
		return err
	}
	return ok(w, ld)
}

func (s *Server) brokers(w http.ResponseWriter, r *http.Request) error {
	cluster := r.PathValue("cluster")
	if cluster != s.cfg.Cluster {
		cd, err := s.cfg.Policies.Cluster(r.Context(), cluster)
		if err != nil {
			return err
		}
		if cd.ServiceURL == "" {
			return fmt.Errorf("%w: cluster %s has no serviceUrl", adminapi.ErrPreconditionFailed, cluster)
		}
		return &adminapi.NotOwnerError{URL: cd.ServiceURL, URLTLS: cd.ServiceURLTLS}
	}
	if s.topics == nil {
		return errNoTopics
	}
	bs, err := s.topics.Brokers(r.Context())
	if err != nil {
		return err
	}
	return ok(w, nonNil(bs))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	var err error
	switch {
	case s.cfg.Health != nil:
		err = s.cfg.Health(r.Context())
	case s.cfg.Policies == nil:
		err = errNoPolicies
	default:
		_, err = s.cfg.Policies.Clusters(r.Context())
	}
	if err != nil {
		return fmt.Errorf("%w: unhealthy: %w", adminapi.ErrUnavailable, err)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("ok"))
	return nil
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	return s.health(w, r)
}

// primaryTopic is the topic whose failover policy a .../primary request
// names: a base topic, not a partition (a partitioned topic's policy is
// all its partitions').
func primaryTopic(name topic.Name) error {
	if name.Partition() >= 0 {
		return fmt.Errorf("%w: %s is a partition: set the primary of its partitioned topic %s", policy.ErrInvalid, name, name.Base())
	}
	return nil
}

// getTopicPrimary answers a topic's own failover policy
// ({"mode","primary","epoch"}; 204 when it follows its namespace's), or
// with ?applied=true the one in force (its own, else its namespace's).
func (s *Server) getTopicPrimary(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if err := primaryTopic(name); err != nil {
		return err
	}
	p, err := s.cfg.Policies.Namespace(r.Context(), name.NamespaceName())
	if err != nil {
		return err
	}
	if r.URL.Query().Get("applied") == "true" {
		return ok(w, policy.TopicFailoverOf(p, name.Local))
	}
	f, own := p.TopicFailover[name.Local]
	if !own {
		return noContent(w)
	}
	return ok(w, f)
}

// setTopicPrimary gives a topic its own failover policy: a body
// {"mode","primary"} or a bare region name (active-standby with that
// primary). The primary must be one of the namespace's replication
// clusters, and of the topic's own when it has some. The topic need not
// exist yet.
func (s *Server) setTopicPrimary(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if err := primaryTopic(name); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var v struct {
		Mode    string `json:"mode"`
		Primary string `json:"primary"`
	}
	var region string
	if json.Unmarshal(body, &region) == nil {
		v.Mode, v.Primary = policy.ActiveStandby, region
	} else if err := decodeStrict(body, &v); err != nil {
		return badRequest(err)
	}
	if v.Mode == "" {
		v.Mode = policy.ActiveStandby
	}
	tp, found, err := s.cfg.Policies.TopicPolicies(r.Context(), name)
	if err != nil {
		return err
	}
	if found && len(tp.ReplicationClusters) > 0 && v.Primary != "" && !slices.Contains(tp.ReplicationClusters, v.Primary) {
		return fmt.Errorf("%w: topic %s: primary %q is not one of its replication clusters %v", policy.ErrInvalid, name, v.Primary, tp.ReplicationClusters)
	}
	if _, err := s.cfg.Policies.UpdateNamespace(r.Context(), name.NamespaceName(), func(p *policy.Policies) error {
		return policy.SetTopicFailover(p, name.Local, v.Mode, v.Primary)
	}); err != nil {
		return err
	}
	return noContent(w)
}

// removeTopicPrimary makes the topic follow its namespace's failover
// policy again (a topic without its own is not an error).
func (s *Server) removeTopicPrimary(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if err := primaryTopic(name); err != nil {
		return err
	}
	if _, err := s.cfg.Policies.UpdateNamespace(r.Context(), name.NamespaceName(), func(p *policy.Policies) error {
		policy.RemoveTopicFailover(p, name.Local)
		return nil
	}); err != nil {
		return err
	}
	return noContent(w)
}
