package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/globalconfig"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore/metafault"
	"github.com/isobar-mq/isobar/topic"
)

const (
	userV1 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}`
	userV2 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string","default":""}]}`
	userV3 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}` // no default: not FULL
)

func mustParse(t *testing.T, s string) topic.Name {
	t.Helper()
	n, err := topic.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStore(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	ctx := context.Background()
	meta := c.Connect()
	cache, err := globalconfig.Start(ctx, meta, globalconfig.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	for _, tc := range []struct {
		name  string
		cache policy.Reader
		topic string
	}{{"direct", nil, "persistent://acme/app/direct"}, {"cached", cache, "persistent://acme/app/cached"}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.UnixMilli(1_700_000_000_000)
			s, err := schema.New(meta, schema.Config{Cache: tc.cache, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			n := mustParse(t, tc.topic)
			part := mustParse(t, tc.topic+"-partition-3")
			if _, err := s.Latest(ctx, n); !errors.Is(err, schema.ErrNotFound) {
				t.Fatalf("Latest of nothing: %v", err)
			}
			v1 := schema.Info{Type: "AVRO", Data: []byte(userV1), Properties: map[string]string{"k": "v"}}
			if v, created, err := s.Add(ctx, n, compat.Full, v1); err != nil || v != 0 || !created {
				t.Fatalf("Add v1 = %d %v %v", v, created, err)
			}
			// A partition shares its partitioned topic's schema.
			if v, created, err := s.Add(ctx, part, compat.Full, v1); err != nil || v != 0 || created {
				t.Fatalf("Add v1 again through a partition = %d %v %v", v, created, err)
			}
			if v, _, err := s.Add(ctx, n, compat.Full, schema.Info{Type: "AVRO", Data: []byte(userV2)}); err != nil || v != 1 {
				t.Fatalf("Add v2 = %d %v", v, err)
			}
			v3 := schema.Info{Type: "AVRO", Data: []byte(userV3)}
			if _, _, err := s.Add(ctx, n, compat.Full, v3); !errors.Is(err, compat.ErrIncompatible) {
				t.Fatalf("Add v3 under FULL: %v, want ErrIncompatible", err)
			}
			if err := s.Check(ctx, n, compat.Full, v3); !errors.Is(err, compat.ErrIncompatible) {
				t.Fatalf("Check v3 under FULL: %v", err)
			}
			if err := s.Check(ctx, n, compat.Backward, v3); !errors.Is(err, compat.ErrIncompatible) {
				t.Fatalf("Check v3 under BACKWARD: %v", err)
			}
			if err := s.Check(ctx, n, compat.Forward, v3); err != nil {
				t.Fatalf("Check v3 under FORWARD: %v", err)
			}
			for _, bad := range []schema.Info{{Type: "NOPE"}, {Type: "AVRO", Data: []byte("{")}, {Type: "JSON", Data: make([]byte, schema.MaxSchemaBytes+1)}} {
				if _, _, err := s.Add(ctx, n, compat.AlwaysCompatible, bad); !errors.Is(err, compat.ErrInvalid) && !errors.Is(err, schema.ErrTooLarge) {
					t.Fatalf("Add %s: %v", bad.Type, err)
				}
			}
			all, err := s.All(ctx, part)
			if err != nil || len(all) != 2 || all[0].Version != 0 || all[1].Version != 1 || all[0].Properties["k"] != "v" || all[0].Timestamp != now.UnixMilli() {
				t.Fatalf("All = %+v %v", all, err)
			}
			if v, err := s.Get(ctx, n, 0); err != nil || string(v.Data) != userV1 {
				t.Fatalf("Get 0 = %+v %v", v, err)
			}
			if _, err := s.Get(ctx, n, 7); !errors.Is(err, schema.ErrNotFound) {
				t.Fatalf("Get 7: %v", err)
			}
			if v, err := s.Find(ctx, n, v1); err != nil || v != 0 {
				t.Fatalf("Find v1 = %d %v", v, err)
			}
			// Deletion adds a tombstone; the next schema starts a new
			// history with the next version number.
			if v, err := s.Delete(ctx, n); err != nil || v != 2 {
				t.Fatalf("Delete = %d %v", v, err)
			}
			if _, err := s.Latest(ctx, n); !errors.Is(err, schema.ErrNotFound) {
				t.Fatalf("Latest after delete: %v", err)
			}
			if _, err := s.Get(ctx, n, 0); !errors.Is(err, schema.ErrNotFound) {
				t.Fatalf("Get 0 after delete: %v, want ErrNotFound", err)
			}
			if _, err := s.Delete(ctx, n); !errors.Is(err, schema.ErrNotFound) {
				t.Fatalf("Delete twice: %v", err)
			}
			if v, _, err := s.Add(ctx, n, compat.Full, v3); err != nil || v != 3 {
				t.Fatalf("Add after delete = %d %v", v, err)
			}
			if err := s.ForceDelete(ctx, n); err != nil {
				t.Fatal(err)
			}
			if err := s.ForceDelete(ctx, n); !errors.Is(err, schema.ErrNotFound) {
				t.Fatalf("ForceDelete twice: %v", err)
			}
			if all, err := s.All(ctx, n); err != nil || len(all) != 0 {
				t.Fatalf("All after force delete = %+v %v", all, err)
			}
			if v, _, err := s.Add(ctx, n, compat.Full, v1); err != nil || v != 0 {
				t.Fatalf("Add after force delete = %d %v", v, err)
			}
		})
	}
	// A topic holds at most MaxVersions versions.
	full := mustParse(t, "persistent://acme/app/full")
	for v := range schema.MaxVersions {
		b, _ := json.Marshal(schema.Version{Version: int64(v), Info: schema.Info{Type: "STRING"}, Deleted: v%2 == 1})
		if _, err := meta.Put(ctx, schema.Key(full, int64(v)), b); err != nil {
			t.Fatal(err)
		}
	}
	s0, _ := schema.New(meta, schema.Config{})
	if _, _, err := s0.Add(ctx, full, compat.AlwaysCompatible, schema.Info{Type: "INT64"}); !errors.Is(err, schema.ErrTooMany) {
		t.Fatalf("Add beyond MaxVersions: %v", err)
	}
	if err := s0.ForceDelete(ctx, full); err != nil {
		t.Fatalf("ForceDelete of %d versions: %v", schema.MaxVersions, err)
	}
	if v, _, err := s0.Add(ctx, full, compat.AlwaysCompatible, schema.Info{Type: "INT64"}); err != nil || v != 0 {
		t.Fatalf("Add after ForceDelete = %d %v", v, err)
	}

	// Deleting a namespace's schemas leaves other namespaces' alone.
	other := mustParse(t, "persistent://acme/other/t")
	if _, _, err := s0.Add(ctx, other, compat.Full, schema.Info{Type: "STRING"}); err != nil {
		t.Fatal(err)
	}
	if err := s0.DeleteNamespace(ctx, "acme/app"); err != nil {
		t.Fatal(err)
	}
	if _, err := s0.Latest(ctx, full); !errors.Is(err, schema.ErrNotFound) {
		t.Fatalf("after DeleteNamespace: %v", err)
	}
	if _, err := s0.Latest(ctx, other); err != nil {
		t.Fatalf("another namespace's schema after DeleteNamespace: %v", err)
	}
	if err := s0.DeleteNamespace(ctx, "acme"); !errors.Is(err, compat.ErrInvalid) {
		t.Fatalf("DeleteNamespace(acme): %v", err)
	}

	// A corrupt record is reported, not used.
	n := mustParse(t, "persistent://acme/app/corrupt")
	if _, err := meta.Put(ctx, schema.Key(n, 0), []byte("{")); err != nil {
		t.Fatal(err)
	}
	s, _ := schema.New(meta, schema.Config{})
	if _, err := s.Latest(ctx, n); !errors.Is(err, schema.ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
}

func TestSettingsOf(t *testing.T) {
	st, err := schema.SettingsOf(&policy.Policies{})
	if err != nil || st.Strategy != compat.Full || st.ValidationEnforced || !st.AutoUpdate {
		t.Fatalf("defaults = %+v %v", st, err)
	}
	var p policy.Policies
	if err := p.UnmarshalJSON([]byte(`{"schema_compatibility_strategy":"BACKWARD","schema_validation_enforced":true,"is_allow_auto_update_schema":false}`)); err != nil {
		t.Fatal(err)
	}
	st, err = schema.SettingsOf(&p)
	if err != nil || st.Strategy != compat.Backward || !st.ValidationEnforced || st.AutoUpdate {
		t.Fatalf("set = %+v %v", st, err)
	}
	if err := p.UnmarshalJSON([]byte(`{"schema_compatibility_strategy":"UNDEFINED","schema_auto_update_compatibility_strategy":"AutoUpdateDisabled"}`)); err != nil {
		t.Fatal(err)
	}
	if st, err = schema.SettingsOf(&p); err != nil || st.Strategy != compat.AlwaysIncompatible {
		t.Fatalf("auto update strategy = %+v %v", st, err)
	}
	if err := p.UnmarshalJSON([]byte(`{"schema_compatibility_strategy":"SOMETIMES"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err = schema.SettingsOf(&p); !errors.Is(err, compat.ErrInvalid) {
		t.Fatalf("unknown strategy: %v", err)
	}
}

// TestStoreUnreachable: with the global store failing, a schema the
// topic holds is still found through the local copy (producers and
// consumers that bring it keep working) and a new one fails cleanly.
func TestStoreUnreachable(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Bookies: 0})
	ctx := context.Background()
	meta := c.Connect()
	cache, err := globalconfig.Start(ctx, meta, globalconfig.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	faulty := metafault.Wrap(meta, nil)
	s, err := schema.New(faulty, schema.Config{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	n := mustParse(t, "persistent://acme/app/t")
	v1 := schema.Info{Type: "AVRO", Data: []byte(userV1)}
	if _, _, err := s.Add(ctx, n, compat.Full, v1); err != nil {
		t.Fatal(err)
	}
	faulty.Set(metafault.Always(schema.Prefix, metafault.OpList, metafault.OpTxn, metafault.OpGet))
	if v, created, err := s.Add(ctx, n, compat.Full, v1); err != nil || v != 0 || created {
		t.Fatalf("Add of a held schema, store down = %d %v %v", v, created, err)
	}
	if v, err := s.Latest(ctx, n); err != nil || v.Version != 0 {
		t.Fatalf("Latest, store down = %+v %v", v, err)
	}
	if _, _, err := s.Add(ctx, n, compat.Full, schema.Info{Type: "AVRO", Data: []byte(userV2)}); err == nil {
		t.Fatal("a new version was added with the store down")
	}
}
