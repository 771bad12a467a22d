package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/metastore"
)

// call is one admin request of a generated sequence. loses says whether
// its success may legitimately change the fate of the canary's messages
// (a backlog quota evicting them, say).
type call struct {
	method, path, body string
	loses              bool
}

func (c call) String() string {
	return fmt.Sprintf("%s %s %s", c.method, c.path, truncate(c.body, 80))
}

// Values at and beyond every limit, and some that are ordinary.
var (
	propPartitions = []string{"0", "1", "2", "15", "16", "17", "2147483647", "2147483648", "-1", `"3"`, `{"partitions":16}`,
		`{"partitions":17}`, "x", "", "18446744074"}
	// 18446744074 and 36893488148 seconds are what wrapped, as
	// nanoseconds, to 0.3 and 0.6 s.
	propTTLs = []string{"-1", "0", "3600", "2147483647", "2147483648", "18446744074", "36893488148", "9223372036854775807",
		"9223372036854775808", "1e3", "null", "", `"60"`}
	propMinutes = []int64{-2, -1, 0, 10, policy.MaxRetentionMinutes, policy.MaxRetentionMinutes + 1, math.MaxInt32, math.MaxInt64}
	propMB      = []int64{-2, -1, 0, 1, policy.MaxRetentionSizeMB, policy.MaxRetentionSizeMB + 1, math.MaxInt64}
	propSizes   = []int64{-2, -1, 0, 100, 1 << 40, math.MaxInt64}
	propTimes   = []int64{-2, -1, 0, 3600, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt64}
	propBundles = []int{-1, 0, 1, 4, 16, 17, 128, 65536, 65537}
	propQuota   = []string{policy.ProducerException, policy.ProducerRequestHold, policy.ConsumerBacklogEviction, "drop"}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// localName returns a topic name for namespace ns whose storage name is
// at, just under or just over the limit, or short.
func localName(r *rand.Rand, ns string) string {
	room := 256 - len(ns+"/persistent/")
	switch r.IntN(5) {
	case 0:
		return strings.Repeat("l", room+r.IntN(3)-1)
	case 1:
		return strings.Repeat("m", room-len("-partition-1")+r.IntN(3)-1)
	case 2:
		return strings.Repeat("x", 300)
	}
	return pick(r, []string{"a", "b", "c", "p", "q"})
}

// genCall draws one admin call. The canary namespace gets policy calls
// only, and its topic and subscription nothing that deletes or skips.
func genCall(r *rand.Rand) call {
	nss := []string{"public/canary", "public/p1", "public/p2", "public/" + strings.Repeat("n", 128), "public/" + strings.Repeat("n", 129)}
	ns := pick(r, nss)
	if r.IntN(2) == 0 {
		ns = "public/canary" // policy calls on it are what could change its messages' fate
	}
	nsPath := "/admin/v2/namespaces/" + ns
	switch r.IntN(18) {
	case 0, 16, 17:
		return call{method: "POST", path: nsPath + "/messageTTL", body: pick(r, propTTLs)}
	case 1:
		return call{method: "POST", path: nsPath + "/retention", body: fmt.Sprintf(`{"retentionTimeInMinutes":%d,"retentionSizeInMB":%d}`, pick(r, propMinutes), pick(r, propMB))}
	case 2:
		size, pol := pick(r, propSizes), pick(r, propQuota)
		return call{method: "POST", path: nsPath + "/backlogQuota?backlogQuotaType=" + pick(r, []string{"destination_storage", "message_age", "x"}),
			body:  fmt.Sprintf(`{"limitSize":%d,"limitTime":%d,"policy":%q}`, size, pick(r, propTimes), pol),
			loses: ns == "public/canary" && pol == policy.ConsumerBacklogEviction && size > 0 && size < 1<<20}
	case 3:
		return call{method: "POST", path: nsPath + "/autoTopicCreation", body: fmt.Sprintf(`{"allowAutoTopicCreation":%v,"topicType":%q,"defaultNumPartitions":%s}`,
			r.IntN(2) == 0, pick(r, []string{"partitioned", "non-partitioned", "x"}), pick(r, []string{"0", "1", "16", "17", "2147483647", "2147483648", "null"}))}
	case 4:
		return call{method: "DELETE", path: nsPath + "/" + pick(r, []string{"messageTTL", "retention", "backlogQuota", "autoTopicCreation", "deduplication"})}
	case 5:
		return call{method: "POST", path: nsPath + "/" + pick(r, []string{"deduplication", "replication"}), body: pick(r, []string{"true", "false", `"x"`, `["test"]`, `[]`, `["nope"]`, ""})}
	case 6:
		if ns == "public/canary" || r.IntN(2) == 0 {
			ns = pick(r, []string{"public/p1", "public/p2", "public/p3"})
		}
		return call{method: "PUT", path: "/admin/v2/namespaces/" + ns, body: fmt.Sprintf(`{"bundles":{"numBundles":%d},"message_ttl_in_seconds":%s}`, pick(r, propBundles), pick(r, []string{"3600", "18446744074", "2147483648", "null"}))}
	case 7:
		if ns == "public/canary" || r.IntN(3) > 0 {
			ns = "public/p3"
		}
		return call{method: "DELETE", path: "/admin/v2/namespaces/" + ns + pick(r, []string{"", "?force=true"})}
	case 8, 9:
		if ns == "public/canary" {
			ns = "public/p2"
		}
		return call{method: pick(r, []string{"PUT", "POST"}), path: "/admin/v2/persistent/" + ns + "/" + localName(r, ns) + "/partitions", body: pick(r, propPartitions)}
	case 10:
		local := localName(r, ns)
		if ns == "public/canary" {
			local = "t" // exists non-partitioned: PUT partitions is a conflict
			return call{method: "PUT", path: "/admin/v2/persistent/" + ns + "/" + local + "/partitions", body: pick(r, propPartitions)}
		}
		return call{method: pick(r, []string{"PUT", "DELETE"}), path: "/admin/v2/persistent/" + ns + "/" + local + pick(r, []string{"", "/partitions"})}
	case 11:
		sub := pick(r, []string{"s2", strings.Repeat("s", 256), strings.Repeat("s", 257), "a%2Fb", "isobar.x"})
		tp := "public/canary/t"
		if r.IntN(2) == 0 {
			tp = ns + "/" + localName(r, ns)
		}
		return call{method: "PUT", path: "/admin/v2/persistent/" + tp + "/subscription/" + sub, body: pick(r, []string{"", `{"ledgerId":-1,"entryId":-1}`, `{"ledgerId":9223372036854775807,"entryId":0}`})}
	case 12:
		return call{method: "GET", path: "/admin/v2/persistent/" + pick(r, []string{"public/canary/t", ns + "/p", ns + "/" + localName(r, ns)}) +
			pick(r, []string{"/stats", "/partitioned-stats", "/partitions", "/subscriptions", "/internalStats", "/lastMessageId", "/partitions?checkAllowAutoCreation=true"})}
	case 13:
		return call{method: "POST", path: "/admin/v2/persistent/public/canary/t/subscription/s2/" + pick(r, []string{"skip/9223372036854775807", "skip/-1", "skip_all",
			"resetcursor/-9223372036854775808", "resetcursor/9223372036854775807"})}
	case 14:
		name := pick(r, []string{"t" + strconv.Itoa(r.IntN(3)), strings.Repeat("t", 128), strings.Repeat("t", 129), "a%20b"})
		return call{method: pick(r, []string{"PUT", "DELETE"}), path: "/admin/v2/" + pick(r, []string{"tenants", "clusters"}) + "/" + name,
			body: pick(r, []string{`{"allowedClusters":["test"]}`, `{"allowedClusters":["nope"]}`, `{}`})}
	default:
		return call{method: "PUT", path: nsPath + "/x", body: strings.Repeat("y", 70<<10)}
	}
}

// storedState is what the admin API can change: every record of the
// configuration store, and which topics exist in the region.
func storedState(t *testing.T, meta *metastore.Store, region string) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]string{}
	kvs, err := meta.List(ctx, policy.Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		out[kv.Key] = string(kv.Value)
	}
	tks, err := meta.List(ctx, metastore.RegionPrefix(region)+"topics/")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range tks {
		out[kv.Key] = "(topic)" // its metadata changes as it is used
	}
	return out
}

func diffState(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "- "+k)
		} else if v != w {
			out = append(out, "~ "+k+": "+truncate(v, 200)+" -> "+truncate(w, 200))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "+ "+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestAdminCallSequences is a property test: a random (seeded,
// reproducible: ISOBAR_PROPERTY_SEED=n) sequence of admin calls, with
// values at and beyond every limit, against a real broker and store
// never crashes or answers 5xx, never leaves partial state (a refused
// call changes no stored record and no topic), and never changes the
// fate of messages produced before it unless a call that may do so
// succeeded: at the end they are all still consumable.
func TestAdminCallSequences(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ISOBAR_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ISOBAR_PROPERTY_SEED=%q: %v", s, err)
		}
		seed = v
	}
	steps := 600
	if testing.Short() {
		steps = 150
	}
	t.Logf("seed %d (rerun with ISOBAR_PROPERTY_SEED=%d)", seed, seed)
	e, h := adminEnv(t)
	ctx := ctxT(t)
	must(t, e.pol.CreateNamespace(ctx, "public/canary", nil))
	for _, ns := range []string{"public/p1", "public/p2", "public/" + strings.Repeat("n", 128)} {
		must(t, e.pol.CreateNamespace(ctx, ns, nil))
	}
	const tp, sub, n = "persistent://public/canary/t", "s", 20
	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: sub})
	must(t, err)
	cons.Close()
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s2"})
	must(t, err)
	cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	must(t, err)
	produce(t, p, "canary", n, nil)
	p.Close()

	meta := e.cl.Connect()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var lost []string
	refused := 0
	statuses := map[int]int{}
	for i := range steps {
		cl := genCall(r)
		before := storedState(t, meta, e.cl.Region)
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req := httptest.NewRequestWithContext(rctx, cl.method, "http://broker"+cl.path, bytes.NewReader([]byte(cl.body)))
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		cancel()
		if rec.Code >= 500 {
			t.Fatalf("seed %d step %d: %v: %d %s", seed, i, cl, rec.Code, truncate(rec.Body.String(), 300))
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("seed %d step %d: %v took %v", seed, i, cl, d)
		}
		statuses[rec.Code]++
		if rec.Code >= 400 {
			refused++
			if d := diffState(before, storedState(t, meta, e.cl.Region)); d != "" {
				t.Fatalf("seed %d step %d: %v was refused (%d %s) but changed the stored state:\n%s",
					seed, i, cl, rec.Code, truncate(rec.Body.String(), 300), d)
			}
		} else if cl.loses {
			lost = append(lost, cl.String())
		}
		e.b.MaintainOnce(ctx) // what a refused call did to the policies, applied now
		if n := e.b.Panics(); n > 0 {
			t.Fatalf("seed %d step %d: %d panics", seed, i, n)
		}
	}
	t.Logf("%d steps, %d refused; statuses %v", steps, refused, statuses)
	if refused == 0 || refused == steps {
		t.Fatalf("%d of %d calls refused: the generator is off", refused, steps)
	}
	if len(lost) > 0 {
		t.Logf("calls that may drop the canary's messages succeeded, not checking them: %v", lost)
		return
	}
	// Lift a backlog quota that may refuse producers or hold consumers, then
	// consume what was produced before the sequence.
	_, err = e.pol.UpdateNamespace(ctx, "public/canary", func(p *policy.Policies) error { p.BacklogQuotaMap = nil; return nil })
	must(t, err)
	cons, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: sub})
	must(t, err)
	defer cons.Close()
	seen := map[string]bool{}
	for _, m := range receiveN(t, cons, n, true) {
		seen[string(m.Payload())] = true
	}
	if len(seen) != n {
		t.Fatalf("seed %d: %d distinct messages of %d", seed, len(seen), n)
	}
	t.Logf("all %d messages produced before the sequence consumed", n)
}
