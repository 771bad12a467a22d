package broker_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/crypto"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/broker"
	"github.com/isobar-mq/isobar/broker/admin"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// setNamespace changes a namespace's policies in the store (what the
// admin endpoints do; broker/admin tests them).
func (e *env) setNamespace(ns string, fn func(p *policy.Policies)) {
	e.t.Helper()
	if _, err := e.pol.UpdateNamespace(context.Background(), ns, func(p *policy.Policies) error { fn(p); return nil }); err != nil {
		e.t.Fatal(err)
	}
}

// TestSchemaAutoUpdateDisabled: with is_allow_auto_update_schema false a
// producer or consumer bringing a schema the topic does not hold is
// refused (IncompatibleSchema, Pulsar's message), on a topic without a
// schema too, and nothing is stored; the admin API still uploads one,
// and clients bringing it are then accepted. The settings come from the
// namespace's policies through schema.SettingsFor, as in a region.
func TestSchemaAutoUpdateDisabled(t *testing.T) {
	var reg *schema.Store
	e := startEnv(t, func(s *setup) {
		var err error
		if reg, err = schema.New(s.Meta, schema.Config{}); err != nil {
			t.Fatal(err)
		}
		s.Schemas = reg
		store := s.Namespaces.(broker.PolicyNamespaces).Store
		s.SchemaSettings = func(ctx context.Context, name topic.Name) (schema.Settings, error) {
			return schema.SettingsFor(ctx, store, name)
		}
	})
	ctx := ctxT(t)
	off := false
	e.setNamespace("public/default", func(p *policy.Policies) { p.IsAllowAutoUpdateSchema = &off })
	c := e.client()
	const tn = "persistent://public/default/locked-schema"
	name, _ := topic.Parse(tn)
	avro := pulsar.NewAvroSchema(userV0, nil)
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "IncompatibleSchema") || !strings.Contains(err.Error(), "Schema not found and schema auto updating is disabled.") {
			t.Fatalf("%s: %v, want IncompatibleSchema: Schema not found and schema auto updating is disabled.", what, err)
		}
	}
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Schema: avro})
	refused("producer with a schema on a topic without one", err)
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tn, SubscriptionName: "s", Schema: avro})
	refused("consumer with a schema on a topic without one", err)
	if _, err := reg.Latest(ctx, name); err == nil {
		t.Fatal("a refused client's schema was stored")
	}
	// Clients without a schema are not concerned.
	if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tn}); err != nil {
		t.Fatalf("producer without a schema: %v", err)
	} else {
		p.Close()
	}

	// The admin API uploads regardless.
	hs := httptest.NewServer(admin.New(admin.Config{Policies: e.pol, Broker: e.b.AdminAPI(), Cluster: "test", Schemas: reg}))
	t.Cleanup(hs.Close)
	ac, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	// (The definition as the client sends it: the version is found by its
	// bytes, as in Pulsar.)
	def := avro.GetSchemaInfo().Schema
	if err := ac.Schemas().CreateSchemaByPayload(tn, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: def}); err != nil {
		t.Fatalf("admin upload with auto-update off: %v", err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Schema: avro})
	if err != nil {
		t.Fatalf("producer with the uploaded schema: %v", err)
	}
	p.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tn, SubscriptionName: "s", Schema: avro})
	if err != nil {
		t.Fatalf("consumer with the uploaded schema: %v", err)
	}
	cons.Close()
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Schema: pulsar.NewAvroSchema(userV1, nil)})
	refused("producer with a compatible but new schema", err)
	if v, err := reg.Latest(ctx, name); err != nil || v.Version != 0 {
		t.Fatalf("versions after the refusals: %+v %v, want only version 0", v, err)
	}

	// Back on (through the same field): the new version is added.
	e.setNamespace("public/default", func(p *policy.Policies) { p.IsAllowAutoUpdateSchema = nil })
	if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Schema: pulsar.NewAvroSchema(userV1, nil)}); err != nil {
		t.Fatalf("auto-update back on: %v", err)
	} else {
		p.Close()
	}
	if v, err := reg.Latest(ctx, name); err != nil || v.Version != 1 {
		t.Fatalf("after auto-update came back: %+v %v", v, err)
	}
}

// TestSchemaAutoUpdateStrategy: schema_auto_update_compatibility_strategy
// decides the strategy when schema_compatibility_strategy is not set
// (AutoUpdateDisabled is ALWAYS_INCOMPATIBLE), and does not when it is.
func TestSchemaAutoUpdateStrategy(t *testing.T) {
	var reg *schema.Store
	e := startEnv(t, func(s *setup) {
		var err error
		if reg, err = schema.New(s.Meta, schema.Config{}); err != nil {
			t.Fatal(err)
		}
		s.Schemas = reg
		store := s.Namespaces.(broker.PolicyNamespaces).Store
		s.SchemaSettings = func(ctx context.Context, name topic.Name) (schema.Settings, error) {
			return schema.SettingsFor(ctx, store, name)
		}
	})
	c := e.client()
	const tn = "persistent://public/default/auto-strategy"
	produce := func(def string) error {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Schema: pulsar.NewAvroSchema(def, nil)})
		if err == nil {
			p.Close()
		}
		return err
	}
	if err := produce(userV0); err != nil {
		t.Fatal(err)
	}
	e.setNamespace("public/default", func(p *policy.Policies) { p.SchemaAutoUpdateStrategy = "AutoUpdateDisabled" })
	if err := produce(userV1); err == nil || !strings.Contains(err.Error(), "IncompatibleSchema") {
		t.Fatalf("a new version under AutoUpdateDisabled (ALWAYS_INCOMPATIBLE): %v", err)
	}
	if err := produce(userV0); err != nil {
		t.Fatalf("the version the topic holds under AutoUpdateDisabled: %v", err)
	}
	// userBad adds a field without a default: not backward compatible,
	// but forward compatible.
	e.setNamespace("public/default", func(p *policy.Policies) { p.SchemaAutoUpdateStrategy = "Backward" })
	if err := produce(userBad); err == nil {
		t.Fatal("a backward-incompatible version under Backward was accepted")
	}
	e.setNamespace("public/default", func(p *policy.Policies) { p.SchemaCompatibilityStrategy = "FORWARD" })
	if err := produce(userBad); err != nil {
		t.Fatalf("schema_compatibility_strategy FORWARD must win over the auto-update Backward: %v", err)
	}
}

// TestSubscriptionAuthModePrefix: with authentication and authorization
// on and the namespace's subscription auth mode Prefix, pulsar-client-go
// clients with real tokens may subscribe only with names starting with
// their role (AuthorizationError with Pulsar's message otherwise, nothing
// created), superusers with any; with None, names are free again.
func TestSubscriptionAuthModePrefix(t *testing.T) {
	a := startAuthEnv(t, func(c *auth.Config) {
		c.AuthorizationEnabled = true
		c.SuperUserRoles = []string{"root"}
	})
	ctx := ctxT(t)
	pol := a.pol
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(pol.CreateTenant(ctx, "acme", policy.TenantInfo{AdminRoles: []string{"acme-admin"}, AllowedClusters: []string{"test"}}))
	must(pol.CreateNamespace(ctx, "acme/app", nil))
	must(pol.GrantNamespacePermission(ctx, "acme/app", "reader", []string{"consume"}))
	const tn = "persistent://acme/app/orders"
	name, _ := topic.Parse(tn)
	must(a.b.AdminAPI().Topics.CreateTopic(ctx, name))
	a.setNamespace("acme/app", func(p *policy.Policies) { p.SubscriptionAuthMode = policy.SubscriptionAuthPrefix })

	valid := time.Now().Add(time.Hour)
	subscribe := func(role, sub string) error {
		c := a.tokenClient(t, a.token(t, role, valid), 10*time.Second)
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tn, SubscriptionName: sub})
		if err == nil {
			cons.Close()
		}
		return err
	}
	for _, c := range []struct{ role, sub string }{{"reader", "audit"}, {"acme-admin", "audit"}, {"reader", "acme-admin-x"}} {
		err := subscribe(c.role, c.sub)
		want := "The subscription name needs to be prefixed by the authentication role, like " + c.role + "-xxxx for topic: " + tn
		if err == nil || !strings.Contains(err.Error(), "AuthorizationError") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s subscribing as %q: %v, want AuthorizationError: ...%s", c.role, c.sub, err, want)
		}
	}
	subs, err := a.b.AdminAPI().Topics.Subscriptions(ctx, name)
	if err != nil || len(subs) != 0 {
		t.Fatalf("refused subscribes created %v (%v)", subs, err)
	}
	for _, c := range []struct{ role, sub string }{{"reader", "reader-audit"}, {"acme-admin", "acme-admin-x"}, {"root", "audit"}} {
		if err := subscribe(c.role, c.sub); err != nil {
			t.Fatalf("%s subscribing as %q: %v", c.role, c.sub, err)
		}
	}
	// A producer's initial subscription follows the same rule.
	r := dialRaw(t, a.url, false)
	r.send(connectCmd("test", "token", []byte(a.token(t, "acme-admin", valid))))
	if cmd := r.recv().Cmd; cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatal(cmd)
	}
	s := &wireSession{r: r}
	if rep := s.producer(tn, "", "dlq", 1); rep.ok || rep.code != pb.ServerError_AuthorizationError || !strings.Contains(rep.msg, "prefixed by the authentication role") {
		t.Fatalf("producer with initial subscription dlq: %v", rep)
	}
	a.setNamespace("acme/app", func(p *policy.Policies) { p.SubscriptionAuthMode = policy.SubscriptionAuthNone })
	if err := subscribe("reader", "audit"); err != nil {
		t.Fatalf("mode None: %v", err)
	}
}

// rsaKeyFiles writes a fresh RSA key pair in the formats
// crypto.NewFileKeyReader reads and returns the paths.
func rsaKeyFiles(t *testing.T) (pub, priv string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub, priv = filepath.Join(dir, "pub.pem"), filepath.Join(dir, "priv.pem")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// TestEncryptionRequired: with the namespace's encryption_required, a
// pulsar-client-go producer with an encryption key reader produces and a
// consumer with the private key reads; one without is let in (the Go
// client never declares encryption either way) but none of its messages
// is stored. Over raw frames: a producer declaring encrypted=false is
// refused (MetadataError "Encryption is required in <topic>"), a SEND
// without encryption keys gets SEND_ERROR MetadataError "Messages must
// be encrypted". Turned off, plain messages pass at the next maintenance
// round.
func TestEncryptionRequired(t *testing.T) {
	e := startEnv(t, nil)
	ctx := ctxT(t)
	e.setNamespace("public/default", func(p *policy.Policies) { p.EncryptionRequired = true })
	const tn = "persistent://public/default/secret"
	name, _ := topic.Parse(tn)
	pub, priv := rsaKeyFiles(t)
	keys := crypto.NewFileKeyReader(pub, priv)

	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tn, SubscriptionName: "s", Decryption: &pulsar.MessageDecryptionInfo{KeyReader: keys}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tn, Encryption: &pulsar.ProducerEncryptionInfo{KeyReader: keys, Keys: []string{"app-key"}}})
	if err != nil {
		t.Fatalf("encrypting producer: %v", err)
	}
	defer enc.Close()
	if _, err := enc.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("top secret")}); err != nil {
		t.Fatalf("encrypted send: %v", err)
	}
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "top secret" {
		t.Fatalf("receive: %v", err)
	} else {
		cons.Ack(m)
	}
	cons.Close() // (the raw frames below send keys it could not use)
	id, entry, err := e.b.AdminAPI().Topics.ExamineMessage(ctx, name, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	md, payload, err := wire.DecodeEntry(entry)
	if err != nil || len(md.GetEncryptionKeys()) != 1 || md.GetEncryptionKeys()[0].GetKey() != "app-key" || strings.Contains(string(payload), "top secret") {
		t.Fatalf("stored entry: keys %v, payload %q, %v", md.GetEncryptionKeys(), payload, err)
	}

	// A plain producer of its own client (a SEND_ERROR makes the Go client
	// drop its connection): let in, its sends refused until they time out.
	plainClient := e.client()
	plain, err := plainClient.CreateProducer(pulsar.ProducerOptions{Topic: tn, SendTimeout: 2 * time.Second, DisableBatching: true})
	if err != nil {
		t.Fatalf("a producer that does not say whether it encrypts: %v", err)
	}
	if _, err := plain.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("in the clear")}); err == nil {
		t.Fatal("an unencrypted message was accepted")
	}
	plain.Close()
	if last, err := e.b.AdminAPI().Topics.LastMessageID(ctx, name); err != nil || last.LedgerID != id.LedgerID || last.EntryID != id.EntryID {
		t.Fatalf("last message %+v (%v), want the encrypted one %+v: something unencrypted was stored", last, err, id)
	}

	// Raw frames: the codes and messages.
	r := dialRaw(t, e.url, true)
	s := &wireSession{r: r}
	rep := s.call(func(rid *uint64) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(tn), ProducerId: proto.Uint64(1), RequestId: rid, Encrypted: proto.Bool(false)}}
	})
	if rep.ok || rep.code != pb.ServerError_MetadataError || !strings.Contains(rep.msg, "Encryption is required in "+tn) {
		t.Fatalf("producer declaring encrypted=false: %v", rep)
	}
	if rep := s.call(func(rid *uint64) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(tn), ProducerId: proto.Uint64(2), RequestId: rid, Encrypted: proto.Bool(true)}}
	}); !rep.ok {
		t.Fatalf("producer declaring encrypted=true: %v", rep)
	}
	send := func(seq uint64, md *pb.MessageMetadata) *pb.BaseCommand {
		pid := uint64(2)
		md.ProducerName, md.SequenceId, md.PublishTime = proto.String("raw"), &seq, proto.Uint64(uint64(time.Now().UnixMilli()))
		f, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: &pid, SequenceId: &seq}}, md, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		r.write(f)
		for {
			if c := r.recv().Cmd; c.GetType() == pb.BaseCommand_SEND_ERROR || c.GetType() == pb.BaseCommand_SEND_RECEIPT {
				return c
			}
		}
	}
	if c := send(0, &pb.MessageMetadata{}); c.GetType() != pb.BaseCommand_SEND_ERROR || c.SendError.GetError() != pb.ServerError_MetadataError || !strings.Contains(c.SendError.GetMessage(), "Messages must be encrypted") {
		t.Fatalf("SEND without encryption keys: %v", c)
	}
	withKey := &pb.MessageMetadata{EncryptionKeys: []*pb.EncryptionKeys{{Key: proto.String("app-key"), Value: []byte{1, 2, 3}}}}
	if c := send(1, withKey); c.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("SEND with encryption keys: %v", c)
	}
	r.alive()

	// Off again: the loaded topic follows at the next maintenance round.
	e.setNamespace("public/default", func(p *policy.Policies) { p.EncryptionRequired = false })
	e.b.MaintainOnce(ctx)
	plain, err = e.client().CreateProducer(pulsar.ProducerOptions{Topic: tn})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("in the clear")}); err != nil {
		t.Fatalf("plain send once encryption is no longer required: %v", err)
	}
}
