package admin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
	"google.golang.org/protobuf/proto"
)

// TestPulsarAdminClient drives the server with the real pulsaradmin
// client, which decodes whole response objects: it proves the paths,
// methods, bodies, statuses and JSON shapes match Pulsar's.
func TestPulsarAdminClient(t *testing.T) {
	e := start(t)
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Clusters.
	cs, err := c.Clusters().List()
	check("clusters list", err)
	if !slices.Equal(cs, []string{"standalone"}) {
		t.Fatalf("clusters = %v", cs)
	}
	cd, err := c.Clusters().Get("standalone")
	check("cluster get", err)
	if cd.ServiceURL != "http://127.0.0.1:8080" || cd.BrokerServiceURL != "pulsar://127.0.0.1:6650" {
		t.Fatalf("cluster = %+v", cd)
	}
	check("cluster create", c.Clusters().Create(utils.ClusterData{Name: "west", ServiceURL: "http://west:8080", PeerClusterNames: []string{"standalone"}}))
	check("cluster update", c.Clusters().Update(utils.ClusterData{Name: "west", ServiceURL: "http://west2:8080"}))
	cd, err = c.Clusters().Get("west")
	check("cluster get", err)
	if cd.ServiceURL != "http://west2:8080" {
		t.Fatalf("west = %+v", cd)
	}
	if err := c.Clusters().Create(utils.ClusterData{Name: "west"}); err == nil {
		t.Fatal("creating an existing cluster succeeded")
	}

	// Tenants.
	check("tenant create", c.Tenants().Create(utils.TenantData{Name: "acme", AdminRoles: []string{"admin"}, AllowedClusters: []string{"standalone", "west"}}))
	td, err := c.Tenants().Get("acme")
	check("tenant get", err)
	if !slices.Equal(td.AllowedClusters, []string{"standalone", "west"}) || !slices.Equal(td.AdminRoles, []string{"admin"}) {
		t.Fatalf("tenant = %+v", td)
	}
	check("tenant update", c.Tenants().Update(utils.TenantData{Name: "acme", AllowedClusters: []string{"standalone"}}))
	ts, err := c.Tenants().List()
	check("tenant list", err)
	if !slices.Equal(ts, []string{"acme", "public"}) {
		t.Fatalf("tenants = %v", ts)
	}

	// Namespaces and policies.
	check("namespace create", c.Namespaces().CreateNamespace("acme/ns"))
	pol, err := c.Namespaces().GetPolicies("acme/ns")
	check("namespace policies", err)
	if !slices.Equal(pol.ReplicationClusters, []string{"standalone"}) || pol.Bundles == nil || pol.Bundles.NumBundles != 4 {
		t.Fatalf("policies = %+v", pol)
	}
	nss, err := c.Namespaces().GetNamespaces("acme")
	check("namespaces list", err)
	if !slices.Equal(nss, []string{"acme/ns"}) {
		t.Fatalf("namespaces = %v", nss)
	}
	check("set retention", c.Namespaces().SetRetention("acme/ns", utils.NewRetentionPolicies(60, 100)))
	ret, err := c.Namespaces().GetRetention("acme/ns")
	check("get retention", err)
	if ret.RetentionTimeInMinutes != 60 || ret.RetentionSizeInMB != 100 {
		t.Fatalf("retention = %+v", ret)
	}
	check("set ttl", c.Namespaces().SetNamespaceMessageTTL("acme/ns", 42))
	ttl, err := c.Namespaces().GetNamespaceMessageTTL("acme/ns")
	check("get ttl", err)
	if ttl != 42 {
		t.Fatalf("ttl = %d", ttl)
	}
	check("set backlog quota", c.Namespaces().SetBacklogQuota("acme/ns", utils.NewBacklogQuota(1024, -1, utils.ProducerException), utils.DestinationStorage))
	bq, err := c.Namespaces().GetBacklogQuotaMap("acme/ns")
	check("get backlog quota", err)
	if q := bq[utils.DestinationStorage]; q.LimitSize != 1024 || q.Policy != utils.ProducerException {
		t.Fatalf("backlog quota = %+v", bq)
	}
	nsName, err := utils.GetNamespaceName("acme/ns")
	check("namespace name", err)
	two := 2
	check("set auto topic creation", c.Namespaces().SetTopicAutoCreation(*nsName, utils.TopicAutoCreationConfig{Allow: true, Type: utils.Partitioned, Partitions: &two}))
	atc, err := c.Namespaces().GetTopicAutoCreation(*nsName)
	check("get auto topic creation", err)
	if !atc.Allow || atc.Type != utils.Partitioned || atc.Partitions == nil || *atc.Partitions != 2 {
		t.Fatalf("auto topic creation = %+v", atc)
	}
	check("set replication", c.Namespaces().SetNamespaceReplicationClusters("acme/ns", []string{"standalone"}))
	rc, err := c.Namespaces().GetNamespaceReplicationClusters("acme/ns")
	check("get replication", err)
	if !slices.Equal(rc, []string{"standalone"}) {
		t.Fatalf("replication = %v", rc)
	}
	pol, err = c.Namespaces().GetPolicies("acme/ns")
	check("namespace policies", err)
	if pol.RetentionPolicies == nil || *pol.MessageTTLInSeconds != 42 || pol.TopicAutoCreationConfig == nil {
		t.Fatalf("policies = %+v", pol)
	}

	// Partitioned topics.
	pt, err := utils.GetTopicName("persistent://acme/ns/pt")
	check("topic name", err)
	check("topic create", c.Topics().Create(*pt, 3))
	md, err := c.Topics().GetMetadata(*pt)
	check("topic metadata", err)
	if md.Partitions != 3 {
		t.Fatalf("partitions = %d", md.Partitions)
	}
	check("topic update", c.Topics().Update(*pt, 4))
	md, err = c.Topics().GetMetadata(*pt)
	check("topic metadata", err)
	if md.Partitions != 4 {
		t.Fatalf("partitions after update = %d", md.Partitions)
	}
	partitioned, nonPartitioned, err := c.Topics().List(*nsName)
	check("topic list", err)
	if !slices.Equal(partitioned, []string{"persistent://acme/ns/pt"}) || len(nonPartitioned) != 4 {
		t.Fatalf("list = %v, %v", partitioned, nonPartitioned)
	}
	check("subscription create", c.Subscriptions().Create(*pt, "sub", utils.Latest))
	subs, err := c.Subscriptions().List(*pt)
	check("subscription list", err)
	if !slices.Equal(subs, []string{"sub"}) {
		t.Fatalf("subscriptions = %v", subs)
	}
	check("clear backlog", c.Subscriptions().ClearBacklog(*pt, "sub"))
	check("reset cursor", c.Subscriptions().ResetCursorToTimestamp(*pt, "sub", 1000))
	ps, err := c.Topics().GetPartitionedStats(*pt, true)
	check("partitioned stats", err)
	if ps.Metadata.Partitions != 4 || len(ps.Partitions) != 4 || ps.MsgRateIn != 40 || len(ps.Subscriptions["sub"].Consumers) != 4 {
		t.Fatalf("partitioned stats = %+v", ps)
	}
	p0, err := pt.GetPartition(0)
	check("partition name", err)
	st, err := c.Topics().GetStats(*p0)
	check("stats", err)
	if len(st.Publishers) != 1 || st.Publishers[0].Metadata["k"] != "v" || st.Publishers[0].ClientVersion == "" {
		t.Fatalf("stats = %+v", st)
	}
	is, err := c.Topics().GetInternalStats(*p0)
	check("internal stats", err)
	if is.LastConfirmedEntry != "7:2" || len(is.Ledgers) != 1 {
		t.Fatalf("internal stats = %+v", is)
	}
	ld, err := c.Topics().Lookup(*p0)
	check("lookup", err)
	if ld.BrokerURL != "pulsar://127.0.0.1:6650" {
		t.Fatalf("lookup = %+v", ld)
	}
	check("subscription delete", c.Subscriptions().Delete(*pt, "sub"))
	check("partitioned delete", c.Topics().Delete(*pt, false, false))
	if _, err := c.Topics().GetPartitionedStats(*pt, false); err == nil {
		t.Fatal("stats of a deleted partitioned topic")
	}

	// A non-partitioned topic and reading an entry.
	np, err := utils.GetTopicName("persistent://acme/ns/plain")
	check("topic name", err)
	check("topic create", c.Topics().Create(*np, 0))
	raw, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1),
		PublishTime: proto.Uint64(1700000000000), Properties: []*pb.KeyValue{{Key: proto.String("color"), Value: proto.String("red")}}}, []byte("payload"))
	check("entry", err)
	e.topics.mu.Lock()
	e.topics.entries["persistent://acme/ns/plain 3:4"] = raw
	e.topics.mu.Unlock()
	msg, err := c.Subscriptions().GetMessageByID(*np, 3, 4)
	check("get message", err)
	if string(msg.Payload) != "payload" || msg.MessageID.LedgerID != 3 || msg.MessageID.EntryID != 4 || msg.Properties["color"] != "red" {
		t.Fatalf("message = %+v", msg)
	}
	var batch []byte
	for _, m := range []string{"a", "bb"} {
		batch, err = wire.AppendBatchMessage(batch, &pb.SingleMessageMetadata{PayloadSize: proto.Int32(int32(len(m)))}, []byte(m))
		check("batch", err)
	}
	braw, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(2),
		PublishTime: proto.Uint64(1), NumMessagesInBatch: proto.Int32(2)}, batch)
	check("batch entry", err)
	e.topics.mu.Lock()
	e.topics.entries["persistent://acme/ns/plain 3:5"] = braw
	e.topics.mu.Unlock()
	msgs, err := c.Subscriptions().GetMessagesByID(*np, 3, 5)
	check("get batch", err)
	if len(msgs) != 2 || string(msgs[1].Payload) != "bb" {
		t.Fatalf("batch = %+v", msgs)
	}
	check("topic delete", c.Topics().Delete(*np, true, true))

	// Brokers.
	check("health", c.Brokers().HealthCheck())
	bs, err := c.Brokers().GetActiveBrokers("standalone")
	check("brokers", err)
	if !slices.Equal(bs, []string{"127.0.0.1:8080"}) {
		t.Fatalf("brokers = %v", bs)
	}

	// Clean up in order.
	check("namespace delete", c.Namespaces().DeleteNamespace("acme/ns"))
	check("tenant delete", c.Tenants().Delete("acme"))
	check("cluster delete", c.Clusters().Delete("west"))
}

// TestPulsarAdminPermissions grants, reads and revokes permissions with
// pulsaradmin, proving the paths and shapes of Pulsar's permission API.
func TestPulsarAdminPermissions(t *testing.T) {
	e := start(t)
	c, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ns, err := utils.GetNamespaceName("public/default")
	check("namespace name", err)
	produce, _ := utils.ParseAuthAction("produce")
	consume, _ := utils.ParseAuthAction("consume")
	functions, _ := utils.ParseAuthAction("functions")

	check("grant", c.Namespaces().GrantNamespacePermission(*ns, "alice", []utils.AuthAction{produce, consume}))
	perms, err := c.Namespaces().GetNamespacePermissions(*ns)
	check("get permissions", err)
	if len(perms) != 1 || !slices.Equal(perms["alice"], []utils.AuthAction{consume, produce}) {
		t.Fatalf("namespace permissions = %v", perms)
	}
	check("grant sub", c.Namespaces().GrantSubPermission(*ns, "audit", []string{"bob", "alice"}))
	subs, err := c.Namespaces().GetSubPermissions(*ns)
	check("get sub permissions", err)
	if len(subs) != 1 || !slices.Equal(subs["audit"], []string{"alice", "bob"}) {
		t.Fatalf("subscription permissions = %v", subs)
	}
	check("revoke sub", c.Namespaces().RevokeSubPermission(*ns, "audit", "bob"))
	subs, err = c.Namespaces().GetSubPermissions(*ns)
	check("get sub permissions", err)
	if !slices.Equal(subs["audit"], []string{"alice"}) {
		t.Fatalf("subscription permissions after revoke = %v", subs)
	}

	tn, err := utils.GetTopicName("persistent://public/default/orders")
	check("topic name", err)
	check("grant topic", c.Topics().GrantPermission(*tn, "alice", []utils.AuthAction{functions}))
	check("grant topic", c.Topics().GrantPermission(*tn, "carol", []utils.AuthAction{produce}))
	tperms, err := c.Topics().GetPermissions(*tn)
	check("get topic permissions", err)
	if len(tperms) != 2 || !slices.Equal(tperms["alice"], []utils.AuthAction{consume, functions, produce}) ||
		!slices.Equal(tperms["carol"], []utils.AuthAction{produce}) {
		t.Fatalf("topic permissions = %v", tperms)
	}
	check("revoke topic", c.Topics().RevokePermission(*tn, "carol"))
	if err := c.Topics().RevokePermission(*tn, "carol"); err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("revoking a topic grant twice: %v, want 412", err)
	}
	check("revoke", c.Namespaces().RevokeNamespacePermission(*ns, "alice"))
	check("revoke again", c.Namespaces().RevokeNamespacePermission(*ns, "alice"))
	perms, err = c.Namespaces().GetNamespacePermissions(*ns)
	check("get permissions", err)
	if len(perms) != 0 {
		t.Fatalf("namespace permissions after revoke = %v", perms)
	}
	tperms, err = c.Topics().GetPermissions(*tn)
	check("get topic permissions", err)
	if len(tperms) != 1 || !slices.Equal(tperms["alice"], []utils.AuthAction{functions}) {
		t.Fatalf("topic permissions after revoke = %v", tperms)
	}
}
