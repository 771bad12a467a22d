package region_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/region"
)

const (
	userV0 = `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"}]}`
	// userV1 adds a field with a default: FULL compatible.
	userV1 = `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"name","type":"string","default":""}]}`
	// userBad adds a field without a default: not FULL compatible.
	userBad = `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

type adminSchema struct {
	Version int64  `json:"version"`
	Type    string `json:"type"`
	Data    string `json:"data"`
}

// getSchema reads a topic's schema through a region's admin API; ok
// false on 404.
func getSchema(t *testing.T, r *region.Region, local string) (adminSchema, bool) {
	t.Helper()
	resp, err := http.Get(r.Endpoints().WebServiceURL + "/admin/v2/schemas/acme/geo/" + local + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return adminSchema{}, false
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET schema of %s in %s: %d %s", local, r.Name(), resp.StatusCode, b)
	}
	var s adminSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s, true
}

// waitSchema waits until a region's admin API shows version want of a
// topic's schema (the region learns it through its watch of the global
// store).
func waitSchema(t *testing.T, r *region.Region, local string, want int64, def string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, ok := getSchema(t, r, local)
		if ok && s.Version == want {
			// (The client sends its parsed, canonical form.)
			if s.Type != "AVRO" || s.Data != pulsar.NewAvroSchema(def, nil).GetSchemaInfo().Schema {
				t.Fatalf("%s in %s: schema %+v, want AVRO %s", local, r.Name(), s, def)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s: schema %+v (found %v), want version %d", local, r.Name(), s, ok, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func schemaProducer(c pulsar.Client, topicName, def string) (pulsar.Producer, error) {
	return c.CreateProducer(pulsar.ProducerOptions{Topic: topicName, Schema: pulsar.NewAvroSchema(def, nil), SendTimeout: 10 * time.Second})
}

// TestSchemaAcrossRegions: a schema registered by a producer in one
// region is the topic's schema in every region, versions count once for
// the federation, and an incompatible producer is refused in any region.
func TestSchemaAcrossRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("federation test: skipped with -short")
	}
	f := startFederation(t, 2, nil)
	a, b := f.Regions[0], f.Regions[1]
	ca, cb := pulsarClient(t, a.Endpoints().ServiceURL), pulsarClient(t, b.Endpoints().ServiceURL)

	// A producer in A registers version 0; B sees it.
	const ta = "persistent://acme/geo/users-a"
	sub, err := cb.Subscribe(pulsar.ConsumerOptions{Topic: ta, SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, Schema: pulsar.NewAvroSchema(userV0, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pa, err := schemaProducer(ca, ta, userV0)
	if err != nil {
		t.Fatalf("producer with a schema in %s: %v", a.Name(), err)
	}
	defer pa.Close()
	waitSchema(t, a, "users-a", 0, userV0)
	waitSchema(t, b, "users-a", 0, userV0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pa.Send(ctx, &pulsar.ProducerMessage{Value: map[string]any{"id": int64(7)}}); err != nil {
		t.Fatal(err)
	}

	// The message reaches B with its schema version, which B's broker
	// resolves from the shared registry.
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.SchemaVersion(); len(v) != 8 || binary.BigEndian.Uint64(v) != 0 {
		t.Fatalf("replicated message's schema version %x, want version 0", v)
	}
	var got map[string]any
	if err := m.GetSchemaValue(&got); err != nil || got["id"] != int64(7) {
		t.Fatalf("decoded in %s: %v %v", b.Name(), got, err)
	}

	// An incompatible producer is refused in both regions; nothing is
	// stored.
	for _, c := range []pulsar.Client{ca, cb} {
		if p, err := schemaProducer(c, ta, userBad); err == nil {
			p.Close()
			t.Fatal("an incompatible producer was accepted")
		} else if !strings.Contains(err.Error(), "IncompatibleSchema") {
			t.Fatalf("incompatible producer: %v, want IncompatibleSchema", err)
		}
	}
	waitSchema(t, a, "users-a", 0, userV0)

	// A compatible producer in B adds version 1; A sees it.
	pb, err := schemaProducer(cb, ta, userV1)
	if err != nil {
		t.Fatalf("compatible producer in %s: %v", b.Name(), err)
	}
	pb.Close()
	waitSchema(t, b, "users-a", 1, userV1)
	waitSchema(t, a, "users-a", 1, userV1)

	// And the other way: registered in B, seen in A.
	const tb = "persistent://acme/geo/users-b"
	pb, err = schemaProducer(cb, tb, userV0)
	if err != nil {
		t.Fatal(err)
	}
	pb.Close()
	waitSchema(t, a, "users-b", 0, userV0)
	if p, err := schemaProducer(ca, tb, userBad); err == nil {
		p.Close()
		t.Fatalf("%s accepted a producer incompatible with the schema registered in %s", a.Name(), b.Name())
	}
}
