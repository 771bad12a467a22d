package main

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAdminNamespaceAndTopicPolicyVerbs drives the namespace verbs of
// the unacked-message limits, the deduplication snapshot interval,
// delayed delivery, backlog quotas and persistence, and the topic verbs
// of persistence, delayed delivery and the deduplication snapshot
// interval (with --global and --applied), against a region: each set,
// read back as text and as JSON, and removed.
func TestAdminNamespaceAndTopicPolicyVerbs(t *testing.T) {
	url, _, _ := adminRegion(t)
	a := adminRunner{t, url}
	const ns = "public/cli-policies"
	const tp = "persistent://public/cli-policies/events"
	a.ok("namespaces", "create", ns)

	for _, s := range []struct{ verb, flag, value string }{
		{"max-unacked-messages-per-consumer", "--maxUnackedMessagesPerTopic", "5"},
		{"max-unacked-messages-per-subscription", "-c", "7"},
		{"deduplication-snapshot-interval", "-i", "30"},
	} {
		if out := a.ok("namespaces", "get-"+s.verb, ns); out != "not set\n" {
			t.Fatalf("get-%s before set: %q", s.verb, out)
		}
		a.ok("namespaces", "set-"+s.verb, ns, s.flag, s.value)
		if out := a.ok("namespaces", "get-"+s.verb, ns); out != s.value+"\n" {
			t.Fatalf("get-%s: %q, want %s", s.verb, out, s.value)
		}
		var n *int
		a.json(&n, "namespaces", "get-"+s.verb, ns)
		if want, _ := strconv.Atoi(s.value); n == nil || *n != want {
			t.Fatalf("get-%s --json: %v", s.verb, n)
		}
		a.ok("namespaces", "remove-"+s.verb, ns)
		n = new(int)
		a.json(&n, "namespaces", "get-"+s.verb, ns)
		if n != nil {
			t.Fatalf("get-%s after remove: %d", s.verb, *n)
		}
	}

	a.ok("namespaces", "set-delayed-delivery", ns, "-e", "-t", "2s", "--maxDelay", "1h")
	var dd map[string]any
	a.json(&dd, "namespaces", "get-delayed-delivery", ns)
	if dd["active"] != true || dd["tickTime"] != float64(2000) || dd["maxDeliveryDelayInMillis"] != float64(3600000) {
		t.Fatalf("namespace delayed delivery %v", dd)
	}
	if out := a.ok("namespaces", "get-delayed-delivery", ns); out != "on, tick 2s, longest delay 1h0m0s\n" {
		t.Fatalf("get-delayed-delivery: %q", out)
	}
	a.ok("namespaces", "set-delayed-delivery", ns, "--disable")
	if out := a.ok("namespaces", "get-delayed-delivery", ns); !strings.HasPrefix(out, "off") {
		t.Fatalf("get-delayed-delivery after --disable: %q", out)
	}

	a.ok("namespaces", "set-backlog-quota", ns, "-l", "10M", "-p", "producer_request_hold")
	a.ok("namespaces", "set-backlog-quota", ns, "-t", "message_age", "--limitTime", "1h", "-p", "producer_exception")
	type quota struct {
		LimitSize int64  `json:"limitSize"`
		LimitTime int64  `json:"limitTime"`
		Policy    string `json:"policy"`
	}
	var quotas map[string]quota
	a.json(&quotas, "namespaces", "get-backlog-quotas", ns)
	want := map[string]quota{
		"destination_storage": {10 << 20, -1, "producer_request_hold"},
		"message_age":         {-1, 3600, "producer_exception"},
	}
	if !reflect.DeepEqual(quotas, want) {
		t.Fatalf("backlog quotas %v, want %v", quotas, want)
	}
	if out := a.ok("namespaces", "get-backlog-quotas", ns); !strings.Contains(out, "message_age") || !strings.Contains(out, "age 1h0m0s, producer_exception") {
		t.Fatalf("get-backlog-quotas: %q", out)
	}
	a.ok("namespaces", "remove-backlog-quota", ns, "-t", "message_age")
	quotas = nil // json merges into a map it is given
	a.json(&quotas, "namespaces", "get-backlog-quotas", ns)
	if _, ok := quotas["message_age"]; ok || len(quotas) != 1 {
		t.Fatalf("backlog quotas after removing message_age: %v", quotas)
	}
	a.ok("namespaces", "remove-backlog-quota", ns)
	quotas = nil
	a.json(&quotas, "namespaces", "get-backlog-quotas", ns)
	if quotas == nil || len(quotas) != 0 {
		t.Fatalf("backlog quotas after removing both: %v", quotas)
	}

	a.ok("namespaces", "set-persistence", ns, "-e", "1", "-w", "1", "-a", "1", "-r", "2.5")
	var pers map[string]float64
	a.json(&pers, "namespaces", "get-persistence", ns)
	if pers["bookkeeperEnsemble"] != 1 || pers["managedLedgerMaxMarkDeleteRate"] != 2.5 {
		t.Fatalf("namespace persistence %v", pers)
	}

	// Topic policies: the topic's own, the global one, and the applied
	// value falling back to the namespace's once removed.
	a.ok("topics", "set-persistence", tp, "-e", "1", "-w", "1", "-a", "1")
	a.ok("topics", "set-persistence", tp, "-e", "1", "-w", "1", "-a", "1", "-r", "4", "--global")
	pers = nil // json merges into a map it is given
	a.json(&pers, "topics", "get-persistence", tp)
	if pers["bookkeeperEnsemble"] != 1 || pers["managedLedgerMaxMarkDeleteRate"] != 0 {
		t.Fatalf("topic persistence %v", pers)
	}
	pers = nil // json merges into a map it is given
	a.json(&pers, "topics", "get-persistence", tp, "--global")
	if pers["managedLedgerMaxMarkDeleteRate"] != 4 {
		t.Fatalf("topic global persistence %v", pers)
	}
	if out := a.ok("topics", "get-persistence", tp); !strings.Contains(out, "write quorum:") {
		t.Fatalf("topics get-persistence: %q", out)
	}
	a.ok("topics", "remove-persistence", tp)
	a.ok("topics", "remove-persistence", tp, "--global")
	if out := a.ok("topics", "get-persistence", tp); out != "not set\n" {
		t.Fatalf("topics get-persistence after remove: %q", out)
	}
	pers = nil // json merges into a map it is given
	a.json(&pers, "topics", "get-persistence", tp, "--applied")
	if pers["managedLedgerMaxMarkDeleteRate"] != 2.5 {
		t.Fatalf("applied persistence after remove: %v, want the namespace's", pers)
	}
	a.ok("namespaces", "remove-persistence", ns)

	a.ok("topics", "set-delayed-delivery", tp, "-e", "-t", "500ms", "--maxDelay", "10s")
	dd = nil // json merges into a map it is given
	a.json(&dd, "topics", "get-delayed-delivery", tp)
	if dd["active"] != true || dd["tickTime"] != float64(500) || dd["maxDelayInMillis"] != float64(10000) {
		t.Fatalf("topic delayed delivery %v", dd)
	}
	a.ok("topics", "set-delayed-delivery", tp, "-d", "--global")
	if out := a.ok("topics", "get-delayed-delivery", tp, "--global"); !strings.HasPrefix(out, "off") {
		t.Fatalf("topics get-delayed-delivery --global: %q", out)
	}
	a.ok("topics", "remove-delayed-delivery", tp)
	a.ok("topics", "remove-delayed-delivery", tp, "--global")
	dd = map[string]any{"stale": true}
	a.json(&dd, "topics", "get-delayed-delivery", tp)
	if dd != nil {
		t.Fatalf("topic delayed delivery after remove: %v", dd)
	}
	a.ok("namespaces", "set-delayed-delivery", ns, "-e", "-t", "3s")
	dd = nil // json merges into a map it is given
	a.json(&dd, "topics", "get-delayed-delivery", tp, "--applied")
	if dd["active"] != true || dd["tickTime"] != float64(3000) {
		t.Fatalf("applied delayed delivery %v, want the namespace's", dd)
	}
	a.ok("namespaces", "remove-delayed-delivery", ns)
	dd = map[string]any{"stale": true}
	a.json(&dd, "namespaces", "get-delayed-delivery", ns)
	if dd != nil {
		t.Fatalf("namespace delayed delivery after remove: %v", dd)
	}

	a.ok("topics", "set-deduplication-snapshot-interval", tp, "-i", "15")
	a.ok("topics", "set-deduplication-snapshot-interval", tp, "--interval", "20", "--global")
	if out := a.ok("topics", "get-deduplication-snapshot-interval", tp); out != "15\n" {
		t.Fatalf("topics get-deduplication-snapshot-interval: %q", out)
	}
	var n *int
	a.json(&n, "topics", "get-deduplication-snapshot-interval", tp, "--global")
	if n == nil || *n != 20 {
		t.Fatalf("global deduplication snapshot interval %v", n)
	}
	a.ok("topics", "remove-deduplication-snapshot-interval", tp)
	a.ok("topics", "remove-deduplication-snapshot-interval", tp, "--global")
	a.ok("namespaces", "set-deduplication-snapshot-interval", ns, "-i", "45")
	a.json(&n, "topics", "get-deduplication-snapshot-interval", tp, "--applied")
	if n == nil || *n != 45 {
		t.Fatalf("applied deduplication snapshot interval %v, want the namespace's 45", n)
	}

	a.fails(1, []string{"404"}, "namespaces", "set-delayed-delivery", "public/none", "-e")
	a.fails(1, []string{"404"}, "namespaces", "set-max-unacked-messages-per-consumer", "public/none", "-c", "1")
}

// TestAdminNamespaceAndTopicPolicyUsageErrors: bad flag values are
// refused (exit 2, the flag named) before any request.
func TestAdminNamespaceAndTopicPolicyUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"namespaces", "set-max-unacked-messages-per-consumer", "t/ns"}, []string{"--maxUnackedMessagesPerTopic", "required"}},
		{[]string{"namespaces", "set-max-unacked-messages-per-subscription", "t/ns", "-c", "-1"}, []string{"--maxUnackedMessagesPerSubscription", "-1"}},
		{[]string{"namespaces", "set-deduplication-snapshot-interval", "t/ns", "-i", "ten"}, []string{"--interval", "ten"}},
		{[]string{"namespaces", "set-deduplication-snapshot-interval", "t/ns", "-i", "4294967296"}, []string{"--interval"}},
		{[]string{"namespaces", "set-delayed-delivery", "t/ns"}, []string{"--enable", "--disable"}},
		{[]string{"namespaces", "set-delayed-delivery", "t/ns", "-e", "-t", "soon"}, []string{"--time", "soon"}},
		{[]string{"namespaces", "set-delayed-delivery", "t/ns", "-e", "-t", "2d"}, []string{"tickTime"}},
		{[]string{"namespaces", "set-delayed-delivery", "t/ns", "-e", "--maxDelay", "-5"}, []string{"--maxDelay"}},
		{[]string{"namespaces", "set-backlog-quota", "t/ns", "-p", "producer_exception"}, []string{"--limit", "destination_storage"}},
		{[]string{"namespaces", "set-backlog-quota", "t/ns", "-t", "message_age", "-p", "producer_exception"}, []string{"--limitTime", "message_age"}},
		{[]string{"namespaces", "set-backlog-quota", "t/ns", "-l", "1G"}, []string{"--policy", "required"}},
		{[]string{"namespaces", "set-backlog-quota", "t/ns", "-l", "1G", "-p", "drop_everything"}, []string{"--policy", "drop_everything"}},
		{[]string{"namespaces", "set-backlog-quota", "t/ns", "-l", "lots", "-p", "producer_exception"}, []string{"--limit", "lots"}},
		{[]string{"namespaces", "set-backlog-quota", "t/ns", "-t", "size", "-l", "1G", "-p", "producer_exception"}, []string{"--type", "size"}},
		{[]string{"namespaces", "remove-backlog-quota", "t/ns", "-t", "age"}, []string{"--type", "age"}},
		{[]string{"namespaces", "set-persistence", "t/ns", "-e", "1", "-w", "2", "-a", "1"}, []string{"--bookkeeper-ensemble"}},
		{[]string{"namespaces", "set-persistence", "t/ns", "-e", "1", "-w", "1", "-a", "1", "-r", "-1"}, []string{"--ml-mark-delete-max-rate"}},
		{[]string{"topics", "set-persistence", "t", "-e", "101", "-w", "1", "-a", "1"}, []string{"100 >= --bookkeeper-ensemble (101)"}},
		{[]string{"topics", "set-persistence", "t"}, []string{"--bookkeeper-ack-quorum"}},
		{[]string{"topics", "set-delayed-delivery", "t", "-e", "-d"}, []string{"exactly one"}},
		{[]string{"topics", "set-delayed-delivery", "t", "-d", "--maxDelay", "forever"}, []string{"--maxDelay", "forever"}},
		{[]string{"topics", "set-deduplication-snapshot-interval", "t"}, []string{"--interval", "required"}},
		{[]string{"topics", "set-deduplication-snapshot-interval", "t", "-i", "-3"}, []string{"--interval", "negative"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			start := time.Now()
			adminRunner{t, "http://127.0.0.1:1"}.fails(2, tc.want, tc.args...)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v: a usage error must not wait for a server", d)
			}
		})
	}
}

// A topic's own backlog quotas and de-duplication through the CLI: set,
// read back (text, --json, --applied falling back to the namespace's),
// removed.
func TestAdminTopicQuotaAndDedupVerbs(t *testing.T) {
	url, _, _ := adminRegion(t)
	a := adminRunner{t, url}
	const ns = "public/cli-topic-quota"
	const tp = "persistent://public/cli-topic-quota/events"
	a.ok("namespaces", "create", ns)
	a.ok("namespaces", "set-backlog-quota", ns, "-l", "1G", "-p", "producer_exception")

	if out := a.ok("topics", "get-backlog-quotas", tp); out != "not set\n" {
		t.Fatalf("get-backlog-quotas before set: %q", out)
	}
	a.ok("topics", "set-backlog-quota", tp, "-l", "10M", "-p", "consumer_backlog_eviction")
	a.ok("topics", "set-backlog-quota", tp, "-t", "message_age", "--limitTime", "2h", "-p", "producer_request_hold")
	type quota struct {
		LimitSize int64  `json:"limitSize"`
		LimitTime int64  `json:"limitTime"`
		Policy    string `json:"policy"`
	}
	var m map[string]quota
	a.json(&m, "topics", "get-backlog-quotas", tp)
	if m["destination_storage"] != (quota{10 << 20, -1, "consumer_backlog_eviction"}) || m["message_age"] != (quota{-1, 7200, "producer_request_hold"}) {
		t.Fatalf("topic backlog quotas %+v", m)
	}
	a.ok("topics", "remove-backlog-quota", tp)
	a.ok("topics", "remove-backlog-quota", tp, "-t", "message_age")
	m = nil
	a.json(&m, "topics", "get-backlog-quotas", tp, "--applied")
	if m["destination_storage"].LimitSize != 1<<30 || len(m) != 1 {
		t.Fatalf("applied after remove: %+v, want the namespace's", m)
	}

	if out := a.ok("topics", "get-deduplication", tp); out != "not set\n" {
		t.Fatalf("get-deduplication before set: %q", out)
	}
	a.ok("topics", "set-deduplication", tp, "--enable")
	if out := a.ok("topics", "get-deduplication", tp); out != "true\n" {
		t.Fatalf("get-deduplication: %q", out)
	}
	a.ok("topics", "remove-deduplication", tp)
	var on *bool
	a.json(&on, "topics", "get-deduplication", tp, "--applied")
	if on == nil || *on {
		t.Fatalf("applied de-duplication after remove: %v, want false", on)
	}
}
