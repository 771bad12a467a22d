package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// Peek, examine and message id by time: answers with Pulsar's headers,
// and every bad input refused with a reason before the broker is asked.
func TestMessagesEndpoints(t *testing.T) {
	e := start(t)
	const tp = "/admin/v2/persistent/public/default/m"
	e.run([]step{
		{"PUT", tp, `null`, 204, "", ""},
		{"PUT", "/admin/v2/persistent/public/default/pt/partitions", `2`, 204, "", ""},
	})
	name, _ := topic.Parse("persistent://public/default/m")
	for i, at := range []int64{1000, 2000} {
		meta := &pb.MessageMetadata{ProducerName: proto.String("prod"), SequenceId: proto.Uint64(uint64(i)), PublishTime: proto.Uint64(uint64(at)),
			Properties: []*pb.KeyValue{{Key: proto.String("k"), Value: proto.String("v")}}}
		raw, err := wire.AppendEntry(nil, meta, []byte("hello"))
		if err != nil {
			t.Fatal(err)
		}
		e.topics.addMessage(name, adminapi.MessageID{LedgerID: 7, EntryID: int64(i), PartitionIndex: -1}, raw, time.UnixMilli(at))
	}
	e.topics.Calls()

	status, body, hdr := e.do("GET", tp+"/subscription/s/position/2", "")
	if status != 200 || body != "hello" || hdr.Get("X-Pulsar-Message-Id") != "7:1" || hdr.Get("X-Pulsar-Property") != `{"k":"v"}` || hdr.Get("X-Pulsar-Publish-Time") == "" {
		t.Fatalf("peek 2: %d %q %v", status, body, hdr)
	}
	status, _, hdr = e.do("GET", tp+"/examinemessage?initialPosition=earliest&messagePosition=1", "")
	if status != 200 || hdr.Get("X-Pulsar-Message-Id") != "7:0" {
		t.Fatalf("examine earliest 1: %d %v", status, hdr)
	}
	status, _, hdr = e.do("GET", tp+"/examinemessage", "")
	if status != 200 || hdr.Get("X-Pulsar-Message-Id") != "7:1" {
		t.Fatalf("examine (latest 1): %d %v", status, hdr)
	}
	e.run([]step{
		{"GET", tp + "/messageid/1500", "", 200, `{"ledgerId":7,"entryId":1,"partitionIndex":-1}`, ""},
		{"GET", tp + "/messageid/3000", "", 404, "", ""},
		// Bad input: 400 with a reason.
		{"GET", tp + "/subscription/s/position/0", "", 400, "position", ""},
		{"GET", tp + "/subscription/s/position/-1", "", 400, "position", ""},
		{"GET", tp + "/subscription/s/position/x", "", 400, "position", ""},
		{"GET", tp + "/examinemessage?initialPosition=middle", "", 400, "initialPosition", ""},
		{"GET", tp + "/examinemessage?messagePosition=0", "", 400, "messagePosition", ""},
		{"GET", tp + "/examinemessage?messagePosition=two", "", 400, "messagePosition", ""},
		{"GET", tp + "/messageid/yesterday", "", 400, "timestamp", ""},
		{"GET", tp + "/messageid/-5", "", 400, "timestamp", ""},
		// Past the end, missing topics: 404; partitioned topics: 405.
		{"GET", tp + "/subscription/s/position/3", "", 404, "", ""},
		{"GET", "/admin/v2/persistent/public/default/none/subscription/s/position/1", "", 404, "", ""},
		{"GET", "/admin/v2/persistent/public/default/pt/subscription/s/position/1", "", 405, "partitioned", ""},
		{"GET", "/admin/v2/persistent/public/default/pt/examinemessage", "", 405, "partitioned", ""},
		{"GET", "/admin/v2/persistent/public/default/pt/messageid/1", "", 405, "partitioned", ""},
	})
	if calls := e.topics.Calls(); len(calls) > 0 {
		t.Fatalf("reading messages changed something: %v", calls)
	}
}

// Topic properties: a topic's through the broker, a partitioned topic's in
// its record; bad bodies and a missing key are refused, changing nothing.
func TestTopicPropertiesEndpoints(t *testing.T) {
	e := start(t)
	const tp, pt = "/admin/v2/persistent/public/default/p", "/admin/v2/persistent/public/default/pt"
	big := `{"k":"` + strings.Repeat("x", 20<<10) + `"}`
	e.run([]step{
		{"PUT", tp, `{"a":"1"}`, 204, "", ""},
		{"GET", tp + "/properties", "", 200, `{"a":"1"}`, ""},
		{"PUT", tp + "/properties", `{"b":"2"}`, 204, "", ""},
		{"GET", tp + "/properties", "", 200, `{"a":"1","b":"2"}`, ""},
		{"DELETE", tp + "/properties?key=a", "", 204, "", ""},
		{"GET", tp + "/properties", "", 200, `{"b":"2"}`, ""},
		{"PUT", pt + "/partitions", `{"partitions":2,"properties":{"x":"1"}}`, 204, "", "application/vnd.partitioned-topic-metadata+json"},
		{"GET", pt + "/properties", "", 200, `{"x":"1"}`, ""},
		{"PUT", pt + "/properties", `{"y":"2"}`, 204, "", ""},
		{"DELETE", pt + "/properties?key=x", "", 204, "", ""},
		{"GET", pt + "/properties", "", 200, `{"y":"2"}`, ""},
		{"GET", "/admin/v2/persistent/public/default/none/properties", "", 404, "", ""},
	})
	e.topics.Calls()
	before := func() string {
		_, b, _ := e.do("GET", tp+"/properties", "")
		_, c, _ := e.do("GET", pt+"/properties", "")
		return b + c
	}()
	e.run([]step{
		{"PUT", tp + "/properties", `{"a":1}`, 400, "properties", ""},
		{"PUT", tp + "/properties", `["a"]`, 400, "properties", ""},
		{"PUT", tp + "/properties", `{`, 400, "properties", ""},
		{"PUT", tp + "/properties", ``, 400, "properties", ""},
		{"PUT", tp + "/properties", `{"":"x"}`, 400, "empty key", ""},
		{"PUT", tp + "/properties", big, 400, "bytes", ""},
		{"PUT", pt + "/properties", `{"":"x"}`, 400, "empty key", ""},
		{"DELETE", tp + "/properties", "", 400, "key", ""},
		{"DELETE", pt + "/properties?key=", "", 400, "key", ""},
		{"PUT", "/admin/v2/persistent/public/default/q", `{"a":1}`, 400, "properties", ""},
		{"PUT", "/admin/v2/persistent/public/default/q2/partitions", `{"partitions":2,"properties":{"":"1"}}`, 400, "empty key", "application/vnd.partitioned-topic-metadata+json"},
	})
	if calls := e.topics.Calls(); len(calls) > 0 {
		t.Fatalf("refused requests reached the broker: %v", calls)
	}
	after := func() string {
		_, b, _ := e.do("GET", tp+"/properties", "")
		_, c, _ := e.do("GET", pt+"/properties", "")
		return b + c
	}()
	if before != after {
		t.Fatalf("refused requests changed the properties: %s, was %s", after, before)
	}
	if n, _, _ := e.store.Partitions(context.Background(), mustParse(t, "persistent://public/default/q2")); n != 0 {
		t.Fatalf("a refused create made a partitioned topic of %d", n)
	}
}

// ?excludePublishers and ?excludeConsumers drop them from the stats, of
// a topic and of every partition; a value that is not a boolean is a 400.
func TestStatsExclude(t *testing.T) {
	e := start(t)
	e.run([]step{
		{"PUT", "/admin/v2/persistent/public/default/st", ``, 204, "", ""},
		{"PUT", "/admin/v2/persistent/public/default/st/subscription/s", ``, 204, "", ""},
		{"PUT", "/admin/v2/persistent/public/default/pst/partitions", `2`, 204, "", ""},
		{"PUT", "/admin/v2/persistent/public/default/pst/subscription/s", ``, 204, "", ""},
		{"GET", "/admin/v2/persistent/public/default/st/stats", "", 200, `"consumerName":"c"`, ""},
		{"GET", "/admin/v2/persistent/public/default/st/stats?excludePublishers=true&excludeConsumers=true", "", 200, `"publishers":[]`, ""},
		{"GET", "/admin/v2/persistent/public/default/st/stats?excludePublishers=maybe", "", 400, "excludePublishers", ""},
		{"GET", "/admin/v2/persistent/public/default/pst/partitioned-stats?excludeConsumers=yes", "", 400, "excludeConsumers", ""},
	})
	for _, path := range []string{"/admin/v2/persistent/public/default/st/stats", "/admin/v2/persistent/public/default/pst/partitioned-stats", "/admin/v2/persistent/public/default/pst/stats"} {
		_, body, _ := e.do("GET", path+"?excludePublishers=true&excludeConsumers=true", "")
		if strings.Contains(body, `"producerName"`) || strings.Contains(body, `"consumerName"`) {
			t.Fatalf("%s: publishers or consumers left: %s", path, body)
		}
	}
}

func mustParse(t *testing.T, s string) topic.Name {
	t.Helper()
	n, err := topic.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
