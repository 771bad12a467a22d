package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/isobar-mq/isobar/wire/pb"
)

// TestProduceConsumeThroughProxies: with two brokers behind two proxies,
// the unmodified pulsar-client-go, given only the proxies' address,
// produces and consumes on a plain and a partitioned topic (created with
// pulsaradmin through the proxies' HTTP port), lists topics by
// namespace and reads a schema; every byte goes through the proxies.
func TestProduceConsumeThroughProxies(t *testing.T) {
	e := startEnv(t, func(s *setup) { s.brokers, s.proxies = 2, 2 })
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.proxies[0].Endpoints().WebServiceURL})
	if err != nil {
		t.Fatal(err)
	}
	const parted = "persistent://public/default/parted"
	tn, _ := utils.GetTopicName(parted)
	if err := adm.Topics().Create(*tn, 4); err != nil {
		t.Fatal(err)
	}
	if md, err := adm.Topics().GetMetadata(*tn); err != nil || md.Partitions != 4 {
		t.Fatalf("partitioned metadata through the proxy: %+v, %v", md, err)
	}
	c := e.client(pulsar.ClientOptions{})
	for _, topic := range []string{"persistent://public/default/plain", parted} {
		t.Run(topic, func(t *testing.T) {
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewStringSchema(nil)})
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			const n = 50
			for i := range n {
				if _, err := prod.Send(e.ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i), Value: fmt.Sprintf("m-%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]bool{}
			for len(got) < n {
				ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
				m, err := cons.Receive(ctx)
				cancel()
				if err != nil {
					t.Fatalf("after %d messages: %v", len(got), err)
				}
				got[string(m.Payload())] = true
				cons.Ack(m)
			}
		})
	}
	// Partitions are spread over both brokers: the proxies reached each.
	owners := map[int]bool{}
	for i := range 4 {
		owners[e.owner(fmt.Sprintf("%s-partition-%d", parted, i))] = true
	}
	if len(owners) < 2 || owners[-1] {
		t.Logf("partition owners %v (placement chose one broker)", owners)
	}
	// Topics of a namespace (GET_TOPICS_OF_NAMESPACE, a regex consumer's
	// lookup) and the schema (GET_SCHEMA) through the lookup connection.
	rc, err := c.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/pla.*", SubscriptionName: "re"})
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	r := dialRaw(t, e.proxies[1].Endpoints().ServiceURL)
	r.send(connectCmd("", "", nil))
	if cmd := r.recv(); cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT: %v", cmd)
	}
	id, ns, topic := uint64(7), "public/default", "persistent://public/default/plain"
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{RequestId: &id, Namespace: &ns}})
	resp := r.recv()
	if tr := resp.GetGetTopicsOfNamespaceResponse(); tr.GetRequestId() != id || !slices.Contains(tr.GetTopics(), topic) {
		t.Fatalf("GET_TOPICS_OF_NAMESPACE: %v", resp)
	}
	id++
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{RequestId: &id, Topic: &topic}})
	resp = r.recv()
	if sr := resp.GetGetSchemaResponse(); sr.GetRequestId() != id || sr.GetSchema().GetType() != pb.Schema_String {
		t.Fatalf("GET_SCHEMA: %v", resp)
	}
	// A lookup names the owner and tells the client to go through the
	// proxy.
	id++
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{RequestId: &id, Topic: &topic}})
	resp = r.recv()
	lr := resp.GetLookupTopicResponse()
	owner := e.owner(topic)
	if lr.GetRequestId() != id || lr.GetResponse() != pb.CommandLookupTopicResponse_Connect || !lr.GetProxyThroughServiceUrl() ||
		owner < 0 || lr.GetBrokerServiceUrl() != e.brokers[owner].Endpoints().ServiceURL {
		t.Fatalf("LOOKUP: %v (owner %d)", resp, owner)
	}
	// What does not belong on a lookup connection is refused, and the
	// connection stays.
	pid := uint64(1)
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{RequestId: &id, ProducerId: &pid, Topic: &topic}})
	if resp := r.recv(); resp.GetError().GetError() != pb.ServerError_NotAllowedError || !strings.Contains(resp.GetError().GetMessage(), "lookup connection") {
		t.Fatalf("PRODUCER on a lookup connection: %v", resp)
	}
	// Bytes went through the proxies and show in their metrics.
	for i, p := range e.proxies {
		if p.Server().Connections() == 0 {
			t.Errorf("proxy %d has no connection", i)
		}
	}
}

// TestAdminThroughProxy: pulsaradmin calls through the proxy's HTTP port,
// including ones the brokers answer with a 307 to the topic's owner,
// which the proxy follows itself.
func TestAdminThroughProxy(t *testing.T) {
	e := startEnv(t, func(s *setup) { s.brokers = 2 })
	web := e.proxies[0].Endpoints().WebServiceURL
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: web})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Tenants().Create(utils.TenantData{Name: "acme", AllowedClusters: []string{regionName}}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().CreateNamespace("acme/app"); err != nil {
		t.Fatal(err)
	}
	c := e.client(pulsar.ClientOptions{})
	var topics []string
	for i := range 6 {
		topics = append(topics, fmt.Sprintf("persistent://acme/app/t%d", i))
	}
	for _, topic := range topics {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Send(e.ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	// Stats are served by the owner only: with two brokers, some of these
	// go to the other one first and are redirected.
	redirected := 0
	for _, topic := range topics {
		tn, _ := utils.GetTopicName(topic)
		for range 2 { // the proxy takes the brokers in turn: one of the two is not the owner
			st, err := adm.Topics().GetStats(*tn)
			if err != nil {
				t.Fatalf("stats of %s: %v", topic, err)
			}
			if st.MsgCounterIn != 1 {
				t.Errorf("stats of %s: msgInCounter %d", topic, st.MsgCounterIn)
			}
		}
		if o := e.owner(topic); o >= 0 && e.brokers[o].Endpoints().WebServiceURL != e.brokers[0].Endpoints().WebServiceURL {
			redirected++
		}
	}
	t.Logf("%d of %d topics owned by the second broker", redirected, len(topics))
	ns, _ := utils.GetNamespaceName("acme/app")
	parts, nonParts, err := adm.Topics().List(*ns)
	if err != nil || len(parts) != 0 || len(nonParts) != len(topics) {
		t.Fatalf("topics of acme/app: %v %v, %v", parts, nonParts, err)
	}
	// HTTP lookups are forwarded too (their answer names the owner).
	resp, err := http.Get(web + "/lookup/v2/topic/persistent/acme/app/t0")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "brokerUrl") {
		t.Fatalf("HTTP lookup: %d %s", resp.StatusCode, body)
	}
	// Bad input gets the broker's 4xx through the proxy, and changes
	// nothing.
	if err := adm.Namespaces().CreateNamespace("acme/bad name"); err == nil {
		t.Fatal("a namespace with a space was created")
	}
	// The proxy's own health endpoints and metrics.
	for _, c := range []struct{ path, says string }{
		{"/healthz", "ok"}, {"/readyz", "ready"},
		{"/metrics", `pulsar_proxy_binary_bytes_total{isobar_component="proxy",isobar_direction="to_broker"`},
		{"/metrics", "pulsar_proxy_active_connections{"},
		{"/metrics", `isobar_proxy_http_requests_total{http_response_status_code="200"`},
	} {
		resp, err := http.Get(web + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), c.says) {
			t.Errorf("%s: %d, want 200 saying %s; got:\n%s", c.path, resp.StatusCode, c.says, b)
		}
	}
}

// TestProxyRefusals: the proxy is no open relay: a CONNECT naming
// anything but a live broker of the region is refused (ServiceNotReady,
// so a client with a stale lookup looks up again), as are a first frame
// that is not CONNECT and a protocol too old for proxies; the proxy keeps
// serving.
func TestProxyRefusals(t *testing.T) {
	e := startEnv(t, nil)
	url := e.proxies[0].Endpoints().ServiceURL
	meta := strings.TrimPrefix(e.meta.Endpoints[0], "http://")
	for _, c := range []struct {
		name string
		cmd  *pb.BaseCommand
		code pb.ServerError
		says string
	}{
		{"the metadata store", connectCmd(meta, "", nil), pb.ServerError_ServiceNotReady, "is not a live broker of region px"},
		{"an outside address", connectCmd("example.com:6650", "", nil), pb.ServerError_ServiceNotReady, "is not a live broker"},
		{"the proxy itself", connectCmd(strings.TrimPrefix(url, "pulsar://"), "", nil), pb.ServerError_ServiceNotReady, "is not a live broker"},
		{"not CONNECT first", &pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}, pb.ServerError_NotAllowedError, "expected CONNECT first"},
		{"protocol 5", func() *pb.BaseCommand {
			c := connectCmd("", "", nil)
			v := int32(5)
			c.Connect.ProtocolVersion = &v
			return c
		}(), pb.ServerError_UnsupportedVersionError, "needs 10 or later"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, url)
			r.send(c.cmd)
			last := r.expectClosed()
			if e := last.GetError(); e.GetError() != c.code || !strings.Contains(e.GetMessage(), c.says) {
				t.Fatalf("got %v, want ERROR %v saying %q", last, c.code, c.says)
			}
		})
	}
	// Not the Pulsar protocol at all: an HTTP request reads as a frame far
	// larger than a CONNECT may be.
	r0 := dialRaw(t, url)
	if _, err := r0.nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if last := r0.expectClosed(); last.GetError().GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("HTTP on the Pulsar port: %v", last)
	}
	// A broker's own address is accepted and the broker answers.
	r := dialRaw(t, url)
	r.send(connectCmd(strings.TrimPrefix(e.brokers[0].Endpoints().ServiceURL, "pulsar://"), "", nil))
	if cmd := r.recv(); cmd.GetType() != pb.BaseCommand_CONNECTED || cmd.Connected.GetMaxMessageSize() == 0 {
		t.Fatalf("CONNECT to the broker: %v", cmd)
	}
}

// TestProxyLimits: the proxy holds no more client connections than
// proxy.maxConnections (more are closed at accept, and a place freed is
// taken again) and no HTTP body larger than proxy.maxRequestBytes (413,
// nothing forwarded).
func TestProxyLimits(t *testing.T) {
	e := startEnv(t, func(s *setup) {
		s.proxy.MaxConnections = 2
		s.proxy.MaxRequestBytes = 1024
	})
	p := e.proxies[0]
	url := p.Endpoints().ServiceURL
	var held []*rawConn
	for range 2 {
		r := dialRaw(t, url)
		r.send(connectCmd("", "", nil))
		if cmd := r.recv(); cmd.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatalf("CONNECT: %v", cmd)
		}
		held = append(held, r)
	}
	extra := dialRaw(t, url)
	extra.send(connectCmd("", "", nil))
	if last := extra.expectClosed(); last != nil {
		t.Fatalf("a third connection was answered: %v", last)
	}
	held[0].nc.Close()
	waitFor(t, 10*time.Second, "the closed connection's place", func() bool { return p.Server().Connections() < 2 })
	again := dialRaw(t, url)
	again.send(connectCmd("", "", nil))
	if cmd := again.recv(); cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT after a place was freed: %v", cmd)
	}

	web := p.Endpoints().WebServiceURL
	body := strings.NewReader(`{"allowedClusters":["` + regionName + `"],"adminRoles":["` + strings.Repeat("x", 2048) + `"]}`)
	req, _ := http.NewRequest(http.MethodPut, web+"/admin/v2/tenants/big", body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "proxy.maxRequestBytes") {
		t.Fatalf("a 2 KiB body: %d %s, want 413", resp.StatusCode, b)
	}
	resp, err = http.Get(web + "/admin/v2/tenants/big")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("tenant big after the refusal: %d, want 404", resp.StatusCode)
	}
}
