package admin_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
)

// fakeTopics is an in-memory adminapi.Topics for handler tests.
type fakeTopics struct {
	mu       sync.Mutex
	topics   map[string]*fakeTopic // by full name
	calls    []string              // one line per mutating call
	owner    string                // when set, every topic is owned there
	brokers  []string
	entries  map[string][]byte // "topic ledger:entry" -> raw entry
	lastID   adminapi.MessageID
	busyTops map[string]bool // topics with producers (delete needs force)
}

type fakeTopic struct {
	subs  map[string]bool
	msgs  []fakeMsg // in publish order
	props map[string]string
}

type fakeMsg struct {
	id      adminapi.MessageID
	raw     []byte
	publish time.Time
}

func newFakeTopics() *fakeTopics {
	return &fakeTopics{topics: map[string]*fakeTopic{}, entries: map[string][]byte{}, busyTops: map[string]bool{},
		brokers: []string{"127.0.0.1:8080"}}
}

func (f *fakeTopics) log(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// Calls returns and clears the call log.
func (f *fakeTopics) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeTopics) get(name topic.Name) (*fakeTopic, error) {
	if f.owner != "" {
		return nil, &adminapi.NotOwnerError{URL: f.owner}
	}
	t := f.topics[name.String()]
	if t == nil {
		return nil, fmt.Errorf("%w: %s", adminapi.ErrTopicNotFound, name)
	}
	return t, nil
}

func (f *fakeTopics) CreateTopic(_ context.Context, name topic.Name) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[name.String()]; ok {
		return fmt.Errorf("%w: topic %s", adminapi.ErrConflict, name)
	}
	f.topics[name.String()] = &fakeTopic{subs: map[string]bool{}}
	f.log("create %s", name)
	return nil
}

func (f *fakeTopics) DeleteTopic(_ context.Context, name topic.Name, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(name); err != nil {
		return err
	}
	if f.busyTops[name.String()] && !force {
		return fmt.Errorf("%w: topic has active producers", adminapi.ErrPreconditionFailed)
	}
	delete(f.topics, name.String())
	f.log("delete %s force=%v", name, force)
	return nil
}

func (f *fakeTopics) ListTopics(_ context.Context, ns string, d topic.Domain) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	prefix := string(d) + "://" + ns + "/"
	for n := range f.topics {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeTopics) Stats(_ context.Context, name topic.Name) (*adminapi.TopicStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return nil, err
	}
	st := &adminapi.TopicStats{
		MsgRateIn: 10, MsgThroughputIn: 1000, MsgCounterIn: 5, StorageSize: 100,
		Publishers: []adminapi.PublisherStats{{ProducerName: "p-" + name.Local, ClientVersion: "Pulsar-Go-version-0.19.0",
			Metadata: map[string]string{"k": "v"}, AccessMode: "Shared"}},
		Subscriptions:       map[string]adminapi.SubscriptionStats{},
		DeDuplicationStatus: "Disabled",
	}
	for s := range t.subs {
		st.Subscriptions[s] = adminapi.SubscriptionStats{MsgBacklog: 2, SubType: "Exclusive", IsDurable: true,
			Consumers: []adminapi.ConsumerStats{{ConsumerName: "c", Metadata: map[string]string{"ck": "cv"}}}}
	}
	return st, nil
}

func (f *fakeTopics) InternalStats(_ context.Context, name topic.Name) (*adminapi.PersistentTopicInternalStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(name); err != nil {
		return nil, err
	}
	return &adminapi.PersistentTopicInternalStats{NumberOfEntries: 3, LastConfirmedEntry: "7:2", State: "LedgerOpened",
		Ledgers: []adminapi.LedgerInfo{{LedgerID: 7, Entries: 3, Size: 30}},
		Cursors: map[string]adminapi.CursorStats{"s": {MarkDeletePosition: "7:0", ReadPosition: "7:1"}}}, nil
}

func (f *fakeTopics) Subscriptions(_ context.Context, name topic.Name) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for s := range t.subs {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeTopics) CreateSubscription(_ context.Context, name topic.Name, sub string, at *adminapi.MessageID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return err
	}
	if t.subs[sub] {
		return fmt.Errorf("%w: subscription %s", adminapi.ErrConflict, sub)
	}
	t.subs[sub] = true
	pos := "latest"
	if at != nil {
		pos = fmt.Sprintf("%d:%d", at.LedgerID, at.EntryID)
	}
	f.log("subscribe %s %s at %s", name, sub, pos)
	return nil
}

func (f *fakeTopics) subOp(name topic.Name, sub, line string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return err
	}
	if !t.subs[sub] {
		return fmt.Errorf("%w: %s", adminapi.ErrSubscriptionNotFound, sub)
	}
	f.log("%s", line)
	return nil
}

func (f *fakeTopics) DeleteSubscription(_ context.Context, name topic.Name, sub string, force bool) error {
	if err := f.subOp(name, sub, fmt.Sprintf("unsubscribe %s %s force=%v", name, sub, force)); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.topics[name.String()].subs, sub)
	f.mu.Unlock()
	return nil
}

func (f *fakeTopics) Skip(_ context.Context, name topic.Name, sub string, n int64) error {
	return f.subOp(name, sub, fmt.Sprintf("skip %s %s %d", name, sub, n))
}

func (f *fakeTopics) ResetCursor(_ context.Context, name topic.Name, sub string, id adminapi.MessageID) error {
	return f.subOp(name, sub, fmt.Sprintf("reset %s %s %d:%d", name, sub, id.LedgerID, id.EntryID))
}

func (f *fakeTopics) ResetCursorToTime(_ context.Context, name topic.Name, sub string, t time.Time) error {
	return f.subOp(name, sub, fmt.Sprintf("reset %s %s t=%d", name, sub, t.UnixMilli()))
}

func (f *fakeTopics) Terminate(_ context.Context, name topic.Name) (adminapi.MessageID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(name); err != nil {
		return adminapi.MessageID{}, err
	}
	f.log("terminate %s", name)
	return adminapi.MessageID{LedgerID: 1, EntryID: -1, PartitionIndex: name.Partition()}, nil
}

func (f *fakeTopics) Unload(_ context.Context, name topic.Name) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(name); err != nil {
		return err
	}
	f.log("unload %s", name)
	return nil
}

func (f *fakeTopics) LastMessageID(_ context.Context, name topic.Name) (adminapi.MessageID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(name); err != nil {
		return adminapi.MessageID{}, err
	}
	return f.lastID, nil
}

func (f *fakeTopics) Entry(_ context.Context, name topic.Name, ledger, entry int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.get(name); err != nil {
		return nil, err
	}
	e, ok := f.entries[fmt.Sprintf("%s %d:%d", name, ledger, entry)]
	if !ok {
		return nil, fmt.Errorf("%w: %d:%d", adminapi.ErrEntryNotFound, ledger, entry)
	}
	return e, nil
}

func (f *fakeTopics) Lookup(_ context.Context, name topic.Name) (adminapi.LookupData, error) {
	return adminapi.LookupData{BrokerURL: "pulsar://127.0.0.1:6650", HTTPURL: "http://127.0.0.1:8080"}, nil
}

func (f *fakeTopics) Brokers(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.brokers, nil
}

// addMessage stores raw as the next message of name (which must exist).
func (f *fakeTopics) addMessage(name topic.Name, id adminapi.MessageID, raw []byte, publish time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.topics[name.String()]
	t.msgs = append(t.msgs, fakeMsg{id, raw, publish})
}

func (f *fakeTopics) nth(name topic.Name, i int64) (adminapi.MessageID, []byte, error) {
	t, err := f.get(name)
	if err != nil {
		return adminapi.MessageID{}, nil, err
	}
	if i < 0 || i >= int64(len(t.msgs)) {
		return adminapi.MessageID{}, nil, fmt.Errorf("%w: message %d", adminapi.ErrEntryNotFound, i)
	}
	return t.msgs[i].id, t.msgs[i].raw, nil
}

func (f *fakeTopics) PeekMessage(_ context.Context, name topic.Name, sub string, n int64) (adminapi.MessageID, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nth(name, n-1)
}

func (f *fakeTopics) ExamineMessage(_ context.Context, name topic.Name, earliest bool, n int64) (adminapi.MessageID, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if earliest {
		return f.nth(name, n-1)
	}
	t, err := f.get(name)
	if err != nil {
		return adminapi.MessageID{}, nil, err
	}
	return f.nth(name, int64(len(t.msgs))-n)
}

func (f *fakeTopics) MessageIDByTime(_ context.Context, name topic.Name, at time.Time) (adminapi.MessageID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return adminapi.MessageID{}, err
	}
	for _, m := range t.msgs {
		if !m.publish.Before(at) {
			return m.id, nil
		}
	}
	return adminapi.MessageID{}, fmt.Errorf("%w: none at or after %v", adminapi.ErrEntryNotFound, at)
}

func (f *fakeTopics) Properties(_ context.Context, name topic.Name) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return nil, err
	}
	return maps.Clone(t.props), nil
}

func (f *fakeTopics) UpdateProperties(_ context.Context, name topic.Name, set map[string]string, remove []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.get(name)
	if err != nil {
		return err
	}
	if t.props == nil {
		t.props = map[string]string{}
	}
	maps.Copy(t.props, set)
	for _, k := range remove {
		delete(t.props, k)
	}
	f.log("properties %s set %v remove %v", name, set, remove)
	return nil
}
