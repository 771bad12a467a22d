package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/topic"
)

const (
	userV0  = `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"}]}`
	userV1  = `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"name","type":"string","default":""}]}`
	userBad = `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

// TestSchemaRegistry drives the registry through the protocol: producers
// register their schemas and get refused when incompatible, messages
// carry the version, consumers' schemas are checked, and the namespace
// settings (validation enforced, auto-update off) apply.
func TestSchemaRegistry(t *testing.T) {
	var mu sync.Mutex
	settings := schema.Settings{Strategy: compat.Full, AutoUpdate: true}
	set := func(enforced, autoUpdate bool) {
		mu.Lock()
		defer mu.Unlock()
		settings.ValidationEnforced, settings.AutoUpdate = enforced, autoUpdate
	}
	var reg *schema.Store
	e := startEnv(t, func(s *setup) {
		var err error
		if reg, err = schema.New(s.Meta, schema.Config{}); err != nil {
			t.Fatal(err)
		}
		s.Schemas = reg
		s.SchemaSettings = func(context.Context, topic.Name) (schema.Settings, error) {
			mu.Lock()
			defer mu.Unlock()
			return settings, nil
		}
	})
	c := e.client()
	ctx := ctxT(t)
	const tn = "persistent://public/default/users"
	name, _ := topic.Parse(tn)
	avro := func(def string) pulsar.Schema { return pulsar.NewAvroSchema(def, nil) }
	produce := func(s pulsar.Schema) (pulsar.Producer, error) {
		return c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Schema: s, SendTimeout: 10 * time.Second})
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "IncompatibleSchema") {
			t.Fatalf("%s: %v, want IncompatibleSchema", what, err)
		}
	}

	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tn, SubscriptionName: "s", Schema: avro(userV0)})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if v, err := reg.Latest(ctx, name); err != nil || v.Version != 0 {
		t.Fatalf("a consumer's schema on a topic without one: %+v %v, want it registered as version 0", v, err)
	}
	p0, err := produce(avro(userV0))
	if err != nil {
		t.Fatal(err)
	}
	defer p0.Close()
	if _, err := p0.Send(ctx, &pulsar.ProducerMessage{Value: map[string]any{"id": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.SchemaVersion(); len(v) != 8 || binary.BigEndian.Uint64(v) != 0 {
		t.Fatalf("message schema version %x, want version 0", v)
	}
	cons.Ack(m)

	_, err = produce(avro(userBad))
	refused("incompatible producer", err)
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tn, SubscriptionName: "s2", Schema: avro(userBad)})
	refused("incompatible consumer", err)
	p1, err := produce(avro(userV1))
	if err != nil {
		t.Fatalf("compatible producer: %v", err)
	}
	p1.Close()
	if v, err := reg.Latest(ctx, name); err != nil || v.Version != 1 {
		t.Fatalf("after a compatible producer: %+v %v", v, err)
	}
	// A message with a schema of its own gets that schema's version
	// (GET_OR_CREATE_SCHEMA).
	if _, err := p0.Send(ctx, &pulsar.ProducerMessage{Value: map[string]any{"id": int64(2), "name": "x"}, Schema: avro(userV1)}); err != nil {
		t.Fatal(err)
	}
	if m, err := cons.Receive(ctx); err != nil {
		t.Fatal(err)
	} else if v := m.SchemaVersion(); len(v) != 8 || binary.BigEndian.Uint64(v) != 1 {
		t.Fatalf("message with schema v1: version %x", v)
	}

	// Without a schema: accepted unless validation is enforced.
	if p, err := produce(nil); err != nil {
		t.Fatalf("producer without a schema: %v", err)
	} else {
		p.Close()
	}
	set(true, true)
	_, err = produce(nil)
	refused("producer without a schema, validation enforced", err)
	// Auto-update off: only schemas the topic holds.
	set(false, false)
	if p, err := produce(avro(userV0)); err != nil {
		t.Fatalf("a schema the topic holds, auto-update off: %v", err)
	} else {
		p.Close()
	}
	v2 := `{"type":"record","name":"User","namespace":"acme","fields":[{"name":"id","type":"long"},{"name":"name","type":"string","default":""},{"name":"n","type":"int","default":0}]}`
	_, err = produce(avro(v2))
	refused("a new schema, auto-update off", err)
	if _, err := reg.Get(ctx, name, 2); !errors.Is(err, schema.ErrNotFound) {
		t.Fatalf("a refused schema was stored: %v", err)
	}
}
