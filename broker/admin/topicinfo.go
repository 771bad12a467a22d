package admin

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
)

// bundleOfTopic answers GET /lookup/v2/topic/{domain}/{t}/{ns}/{topic}/bundle:
// the range of the namespace bundle the topic falls in, as Pulsar names it
// ("0x00000000_0x40000000"), in plain text.
func (s *Server) bundleOfTopic(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ns := name.NamespaceName()
	if _, err := s.cfg.Policies.Namespace(r.Context(), ns); err != nil {
		return s.namespaceErr(r, err)
	}
	api := s.cfg.Broker.Bundles
	if api == nil {
		return errNoBundles
	}
	bs, err := api.Bundles(r.Context(), ns)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain")
	_, err = fmt.Fprint(w, topic.BundleFor(name, bs).String())
	return err
}

// internalInfo answers GET .../{topic}/internal-info from the topic's
// internal stats (the same metadata, in the shape Pulsar gives it here).
func (s *Server) internalInfo(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	ctx := r.Context()
	if n, err := s.partitions(ctx, name); err != nil {
		return err
	} else if n > 0 {
		return notAllowedOnPartitioned("internal-info", name)
	}
	st, err := s.topics.InternalStats(ctx, name)
	if err != nil {
		return err
	}
	info, err := internalInfoOf(st)
	if err != nil {
		return err
	}
	return ok(w, info)
}

func internalInfoOf(st *adminapi.PersistentTopicInternalStats) (adminapi.ManagedLedgerInfo, error) {
	info := adminapi.ManagedLedgerInfo{Ledgers: []adminapi.LedgerInfoBrief{}, Cursors: map[string]adminapi.CursorInfo{}}
	for _, l := range st.Ledgers {
		info.Ledgers = append(info.Ledgers, adminapi.LedgerInfoBrief{LedgerID: l.LedgerID, Entries: l.Entries, Size: l.Size, Timestamp: l.Timestamp, IsOffloaded: l.Offloaded})
	}
	for name, c := range st.Cursors {
		md, err := parsePosition(c.MarkDeletePosition)
		if err != nil {
			return info, fmt.Errorf("cursor %s: %w", name, err)
		}
		ranges, err := parseRanges(c.IndividuallyDeletedMessages)
		if err != nil {
			return info, fmt.Errorf("cursor %s: %w", name, err)
		}
		props := c.Properties
		if props == nil {
			props = map[string]int64{}
		}
		info.Cursors[name] = adminapi.CursorInfo{CursorsLedgerID: c.CursorLedger, MarkDelete: md, IndividualDeletedMessages: ranges, Properties: props}
	}
	return info, nil
}

// parsePosition reads "ledger:entry".
func parsePosition(s string) (adminapi.PositionInfo, error) {
	l, e, ok := strings.Cut(s, ":")
	if !ok {
		return adminapi.PositionInfo{}, fmt.Errorf("position %q: want ledger:entry", s)
	}
	li, err1 := strconv.ParseInt(l, 10, 64)
	ei, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil {
		return adminapi.PositionInfo{}, fmt.Errorf("position %q: want ledger:entry", s)
	}
	return adminapi.PositionInfo{LedgerID: li, EntryID: ei}, nil
}

var rangeRE = regexp.MustCompile(`\((-?\d+:-?\d+)\.\.(-?\d+:-?\d+)\]`)

// parseRanges reads the internal stats' "[(l:e..l:e],...]".
func parseRanges(s string) ([]adminapi.MessageRangeInfo, error) {
	out := []adminapi.MessageRangeInfo{}
	for _, m := range rangeRE.FindAllStringSubmatch(s, -1) {
		from, err := parsePosition(m[1])
		if err != nil {
			return nil, err
		}
		to, err := parsePosition(m[2])
		if err != nil {
			return nil, err
		}
		out = append(out, adminapi.MessageRangeInfo{From: from, To: to})
	}
	return out, nil
}
