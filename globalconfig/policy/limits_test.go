package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
	"github.com/isobar-mq/isobar/topic"
)

// newRawStore is newStore that also returns the metadata store, to write
// records the store itself would refuse (as an older version, or a hand,
// might have).
func newRawStore(t *testing.T, cfg policy.Config) (*policy.Store, *metastore.Store) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	meta := c.Connect()
	s, err := policy.New(meta, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, meta
}

func intp(v int) *int { return &v }

// Every numeric policy value is range-checked where it enters: a value
// that does not fit is refused, never clamped, and nothing is written.
func TestPolicyValueRanges(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "standalone"})
	must(t, s.EnsureStandalone(ctx, "standalone", policy.ClusterData{}))
	const ns = "public/default"
	ok := []*policy.Policies{
		{MessageTTLInSeconds: intp(policy.MaxMessageTTLSeconds)},
		{RetentionPolicies: &policy.RetentionPolicies{RetentionTimeInMinutes: int(policy.MaxRetentionMinutes), RetentionSizeInMB: policy.MaxRetentionSizeMB}},
		{RetentionPolicies: &policy.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}},
		{BacklogQuotaMap: map[string]policy.BacklogQuota{policy.MessageAge: {LimitTime: policy.MaxBacklogQuotaTimeSeconds, LimitSize: math.MaxInt64, Policy: policy.ProducerException}}},
		{AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: intp(policy.DefaultMaxPartitions)}},
		{Bundles: &policy.BundlesData{NumBundles: policy.DefaultMaxBundles}},
	}
	bad := map[string]*policy.Policies{
		"ttl 18446744074":              {MessageTTLInSeconds: intp(18446744074)},
		"ttl beyond int32":             {MessageTTLInSeconds: intp(policy.MaxMessageTTLSeconds + 1)},
		"ttl max int":                  {MessageTTLInSeconds: intp(math.MaxInt)},
		"retention time beyond":        {RetentionPolicies: &policy.RetentionPolicies{RetentionTimeInMinutes: int(policy.MaxRetentionMinutes) + 1}},
		"retention time max int":       {RetentionPolicies: &policy.RetentionPolicies{RetentionTimeInMinutes: math.MaxInt}},
		"retention size beyond":        {RetentionPolicies: &policy.RetentionPolicies{RetentionSizeInMB: policy.MaxRetentionSizeMB + 1}},
		"retention size max":           {RetentionPolicies: &policy.RetentionPolicies{RetentionSizeInMB: math.MaxInt64}},
		"backlog time beyond int32":    {BacklogQuotaMap: map[string]policy.BacklogQuota{policy.MessageAge: {LimitTime: math.MaxInt32 + 1, Policy: policy.ProducerException}}},
		"auto partitions beyond limit": {AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: intp(policy.DefaultMaxPartitions + 1)}},
		"auto partitions max int":      {AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: intp(math.MaxInt)}},
		"bundles beyond limit":         {Bundles: &policy.BundlesData{NumBundles: policy.DefaultMaxBundles + 1}},
		"bundles beyond topic max":     {Bundles: &policy.BundlesData{NumBundles: topic.MaxBundles + 1}},
	}
	for i, p := range ok {
		must(t, s.CreateNamespace(ctx, "public/ok"+string(rune('a'+i)), p))
	}
	before, err := s.Namespace(ctx, ns)
	must(t, err)
	for what, p := range bad {
		err := s.CreateNamespace(ctx, "public/bad", p)
		if !errors.Is(err, policy.ErrInvalid) || errkind.HTTPStatusOf(err) != 412 {
			t.Errorf("create with %s: %v, want ErrInvalid (412)", what, err)
		}
		_, err = s.UpdateNamespace(ctx, ns, func(q *policy.Policies) error {
			q.MessageTTLInSeconds, q.RetentionPolicies, q.BacklogQuotaMap, q.AutoTopicCreation = p.MessageTTLInSeconds, p.RetentionPolicies, p.BacklogQuotaMap, p.AutoTopicCreation
			if p.Bundles != nil {
				q.Bundles = p.Bundles
			}
			return nil
		})
		if !errors.Is(err, policy.ErrInvalid) {
			t.Errorf("update with %s: %v, want ErrInvalid", what, err)
		}
	}
	if _, err := s.Namespace(ctx, "public/bad"); !errors.Is(err, policy.ErrNotFound) {
		t.Fatalf("a refused create left public/bad: %v", err)
	}
	after, err := s.Namespace(ctx, ns)
	must(t, err)
	if !jsonEqual(t, before, after) {
		t.Fatalf("refused updates changed %s:\n%+v\n%+v", ns, before, after)
	}
}

// The conversions the broker applies never wrap: a value in range gives
// its duration or size exactly, one beyond is an error.
func TestPolicyConversions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		v := int(r.Int64())
		switch r.IntN(4) {
		case 0:
			v = int(r.Int64N(math.MaxInt32 + 2))
		case 1:
			v = int(policy.MaxRetentionMinutes) - 2 + r.IntN(4)
		case 2:
			v = math.MaxInt32 - 2 + r.IntN(4)
		}
		ttl, err := policy.MessageTTL(v)
		switch {
		case v > policy.MaxMessageTTLSeconds:
			if err == nil {
				t.Fatalf("MessageTTL(%d) = %v, want an error", v, ttl)
			}
		case v <= 0:
			if err != nil || ttl != 0 {
				t.Fatalf("MessageTTL(%d) = %v, %v", v, ttl, err)
			}
		default:
			if err != nil || ttl <= 0 || ttl/time.Second != time.Duration(v) {
				t.Fatalf("MessageTTL(%d) = %v, %v", v, ttl, err)
			}
		}
		rt, err := policy.RetentionTime(v)
		switch {
		case int64(v) > policy.MaxRetentionMinutes:
			if err == nil {
				t.Fatalf("RetentionTime(%d) = %v, want an error", v, rt)
			}
		case v < 0:
			if err != nil || rt != -1 {
				t.Fatalf("RetentionTime(%d) = %v, %v", v, rt, err)
			}
		default:
			if err != nil || rt < 0 || rt/time.Minute != time.Duration(v) {
				t.Fatalf("RetentionTime(%d) = %v, %v", v, rt, err)
			}
		}
		mb := r.Int64()
		if r.IntN(2) == 0 {
			mb = policy.MaxRetentionSizeMB - 2 + r.Int64N(4)
		}
		sz, err := policy.RetentionSize(mb)
		if mb > policy.MaxRetentionSizeMB && err == nil || mb <= policy.MaxRetentionSizeMB && (err != nil || sz < 0 || sz>>20 != mb) {
			t.Fatalf("RetentionSize(%d) = %d, %v", mb, sz, err)
		}
	}
}

// Partitions per topic are limited (DefaultMaxPartitions when the config
// says nothing) on create, update and auto-creation, and a partitioned
// topic whose partitions' names storage cannot hold is refused with
// InvalidTopicName; a refused call writes nothing.
func TestPartitionLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{LocalCluster: "standalone"})
	must(t, s.EnsureStandalone(ctx, "standalone", policy.ClusterData{}))
	if s.MaxPartitions() != policy.DefaultMaxPartitions {
		t.Fatalf("MaxPartitions() = %d", s.MaxPartitions())
	}
	huge := mustName(t, "public/default/huge")
	for _, n := range []int{math.MaxInt32, policy.DefaultMaxPartitions + 1, 0, -1} {
		wantErr(t, s.CreatePartitioned(ctx, huge, n), policy.ErrInvalid)
	}
	if _, ok, err := s.PartitionedMetadata(ctx, huge); ok || err != nil {
		t.Fatalf("refused creates left a record: %v %v", ok, err)
	}
	must(t, s.CreatePartitioned(ctx, huge, 2))
	wantErr(t, s.UpdatePartitions(ctx, huge, policy.DefaultMaxPartitions+1), policy.ErrInvalid)
	must(t, s.UpdatePartitions(ctx, huge, policy.DefaultMaxPartitions))

	// 225 bytes: a valid topic name, but "-partition-0" does not fit.
	long := mustName(t, "public/default/"+strings.Repeat("x", 225))
	err := s.CreatePartitioned(ctx, long, 1)
	if errkind.KindOf(err) != errkind.ErrInvalidTopicName || !errors.Is(err, topic.ErrInvalidName) {
		t.Fatalf("225-byte partitioned topic: %v (kind %v), want InvalidTopicName", err, errkind.KindOf(err))
	}
	if _, ok, _ := s.PartitionedMetadata(ctx, long); ok {
		t.Fatal("refused partitioned topic recorded")
	}
	// Room for 10 partitions (one digit) but not 11.
	edge := mustName(t, "public/default/"+strings.Repeat("x", topic.MaxNameLen-len("public/default/persistent/-partition-9")))
	must(t, s.CreatePartitioned(ctx, edge, 10))
	if err := s.UpdatePartitions(ctx, edge, 11); errkind.KindOf(err) != errkind.ErrInvalidTopicName {
		t.Fatalf("growing past the name limit: %v", err)
	}
	if n, _, _ := s.Partitions(ctx, edge); n != 10 {
		t.Fatalf("partitions = %d after a refused update", n)
	}

	small := newStore(t, policy.Config{MaxPartitions: 3})
	must(t, small.CreateTenant(ctx, "t", policy.TenantInfo{}))
	must(t, small.CreateNamespace(ctx, "t/ns", nil))
	wantErr(t, small.CreatePartitioned(ctx, mustName(t, "t/ns/x"), 4), policy.ErrInvalid)
	wantErr(t, small.CreateNamespace(ctx, "t/auto", &policy.Policies{AutoTopicCreation: &policy.AutoTopicCreation{
		AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: intp(4)}}), policy.ErrInvalid)
}

// A limit checks what a write changes: a namespace made under a higher
// bundle limit can still have its other policies updated after the limit
// is lowered, but cannot be given more bundles.
func TestLoweredLimitsKeepNamespacesUsable(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	high, err := policy.New(c.Connect(), policy.Config{MaxBundles: 16, MaxPartitions: 8})
	must(t, err)
	must(t, high.CreateTenant(ctx, "t", policy.TenantInfo{}))
	must(t, high.CreateNamespace(ctx, "t/ns", &policy.Policies{Bundles: &policy.BundlesData{NumBundles: 16},
		AutoTopicCreation: &policy.AutoTopicCreation{AllowAutoTopicCreation: true, TopicType: policy.TopicTypePartitioned, DefaultNumPartitions: intp(8)}}))
	low, err := policy.New(c.Connect(), policy.Config{MaxBundles: 4, MaxPartitions: 4})
	must(t, err)
	if _, err := low.UpdateNamespace(ctx, "t/ns", func(p *policy.Policies) error {
		p.MessageTTLInSeconds = intp(60)
		return nil
	}); err != nil {
		t.Fatalf("update under a lowered limit: %v", err)
	}
	p, err := low.Namespace(ctx, "t/ns")
	must(t, err)
	if p.Bundles.NumBundles != 16 || *p.MessageTTLInSeconds != 60 {
		t.Fatalf("policies = %+v", p)
	}
	_, err = low.UpdateNamespace(ctx, "t/ns", func(p *policy.Policies) error {
		p.AutoTopicCreation.DefaultNumPartitions = intp(6)
		return nil
	})
	wantErr(t, err, policy.ErrInvalid)
	wantErr(t, low.CreateNamespace(ctx, "t/ns2", &policy.Policies{Bundles: &policy.BundlesData{NumBundles: 16}}), policy.ErrInvalid)
}

// A bad record already in the store (written by an older version, or by
// hand) is reported, logged once per version, and never acted on; it can
// still be fixed or deleted.
func TestCorruptRecords(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	s, meta := newRawStore(t, policy.Config{LocalCluster: "standalone", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	must(t, s.EnsureStandalone(ctx, "standalone", policy.ClusterData{}))

	huge := mustName(t, "public/default/huge")
	_, err := meta.Put(ctx, policy.PartitionedKey(huge), []byte(`{"partitions":2147483647}`))
	must(t, err)
	for range 3 {
		_, ok, err := s.PartitionedMetadata(ctx, huge)
		if ok || !errors.Is(err, policy.ErrCorrupt) || errkind.HTTPStatusOf(err) != 500 || errkind.KindOf(err).Retriable {
			t.Fatalf("huge record: ok %v, %v", ok, err)
		}
		if !strings.Contains(err.Error(), "2147483647 partitions, more than the maximum 1024") {
			t.Fatalf("error does not say what is wrong: %v", err)
		}
		if _, _, err := s.Partitions(ctx, huge); !errors.Is(err, policy.ErrCorrupt) {
			t.Fatalf("Partitions: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "corrupt record"); n != 1 {
		t.Fatalf("reported %d times, want once:\n%s", n, logs.String())
	}
	wantErr(t, s.UpdatePartitions(ctx, huge, 4), policy.ErrCorrupt)
	names, err := s.ListPartitioned(ctx, "public/default", "")
	must(t, err)
	if len(names) != 1 || names[0] != huge {
		t.Fatalf("ListPartitioned = %v", names)
	}
	must(t, s.DeletePartitioned(ctx, huge))

	for key, v := range map[string]string{
		policy.PartitionedKey(mustName(t, "public/default/zero")):                      `{"partitions":0}`,
		policy.PartitionedKey(mustName(t, "public/default/junk")):                      `{"partitions":"x"`,
		policy.PartitionedKey(mustName(t, "public/default/"+strings.Repeat("y", 228))): `{"partitions":2}`,
	} {
		_, err := meta.Put(ctx, key, []byte(v))
		must(t, err)
	}
	for _, n := range []string{"zero", "junk", strings.Repeat("y", 228)} {
		if _, _, err := s.PartitionedMetadata(ctx, mustName(t, "public/default/"+n)); !errors.Is(err, policy.ErrCorrupt) {
			t.Errorf("record %.10s: %v, want ErrCorrupt", n, err)
		}
	}

	// A TTL an older version accepted, which wrapped to 0.3 s.
	must(t, s.CreateNamespace(ctx, "public/x", nil))
	_, err = meta.Put(ctx, policy.NamespaceKey("public", "x"), []byte(`{"replication_clusters":["standalone"],"message_ttl_in_seconds":18446744074}`))
	must(t, err)
	if _, err := s.Namespace(ctx, "public/x"); !errors.Is(err, policy.ErrCorrupt) || !strings.Contains(err.Error(), "message_ttl_in_seconds") {
		t.Fatalf("namespace with a huge TTL: %v", err)
	}
	// Fixing the field (what DELETE .../messageTTL does) makes it usable.
	_, err = s.UpdateNamespace(ctx, "public/x", func(p *policy.Policies) error { p.MessageTTLInSeconds = nil; return nil })
	must(t, err)
	if _, err := s.Namespace(ctx, "public/x"); err != nil {
		t.Fatalf("after the fix: %v", err)
	}
	// Undecodable JSON: reported, and the namespace can still be deleted.
	_, err = meta.Put(ctx, policy.NamespaceKey("public", "x"), []byte(`{"replication_clusters":`))
	must(t, err)
	wantErr(t, func() error { _, err := s.Namespace(ctx, "public/x"); return err }(), policy.ErrCorrupt)
	must(t, s.DeleteNamespace(ctx, "public/x"))
}

// A body naming many clusters is checked with one read and answered with
// a short error.
func TestManyClusterNames(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, policy.Config{})
	names := make([]string, 50000)
	for i := range names {
		names[i] = "c" + strings.Repeat("x", i%50)
	}
	start := time.Now()
	err := s.CreateTenant(ctx, "t", policy.TenantInfo{AllowedClusters: names})
	wantErr(t, err, policy.ErrInvalid)
	if len(err.Error()) > 2000 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d bytes of error after %v", len(err.Error()), time.Since(start))
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	must(t, err)
	y, err := json.Marshal(b)
	must(t, err)
	return bytes.Equal(x, y)
}
