package broker_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/wire/pb"
)

// TestMissingTenantOrNamespaceSaysWhich: a lookup, partitioned-metadata
// request, producer or subscription on a topic whose tenant or namespace
// does not exist is answered TopicNotFound saying which of the two is
// missing, as the admin API does, in words meant for the client: no
// package prefix of the broker's own errors ("broker:", "policy:").
func TestMissingTenantOrNamespaceSaysWhich(t *testing.T) {
	e := startEnv(t, nil)
	if err := e.pol.CreateTenant(context.Background(), "acme", policy.TenantInfo{AllowedClusters: []string{"test"}}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, e.url, true)
	id := uint64(0)
	for _, c := range []struct{ topic, says string }{
		{"persistent://nobody/ns/t", `tenant "nobody" does not exist`},
		{"persistent://acme/nowhere/t", `namespace "acme/nowhere" does not exist`},
	} {
		requests := map[string]*pb.BaseCommand{
			"lookup": {Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: proto.String(c.topic), RequestId: proto.Uint64(id + 1)}},
			"partitioned metadata": {Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
				Topic: proto.String(c.topic), RequestId: proto.Uint64(id + 2)}},
			"producer": {Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{Topic: proto.String(c.topic), ProducerId: proto.Uint64(id + 3), RequestId: proto.Uint64(id + 3)}},
			"subscribe": {Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{Topic: proto.String(c.topic), Subscription: proto.String("s"),
				SubType: pb.CommandSubscribe_Exclusive.Enum(), ConsumerId: proto.Uint64(id + 4), RequestId: proto.Uint64(id + 4)}},
		}
		id += 4
		for what, req := range requests {
			r.send(req)
			cmd := r.recv().Cmd
			var code pb.ServerError
			var msg string
			switch cmd.GetType() {
			case pb.BaseCommand_LOOKUP_RESPONSE:
				code, msg = cmd.LookupTopicResponse.GetError(), cmd.LookupTopicResponse.GetMessage()
			case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
				code, msg = cmd.PartitionMetadataResponse.GetError(), cmd.PartitionMetadataResponse.GetMessage()
			case pb.BaseCommand_ERROR:
				code, msg = cmd.Error.GetError(), cmd.Error.GetMessage()
			default:
				t.Fatalf("%s %s: %v", what, c.topic, cmd)
			}
			if code != pb.ServerError_TopicNotFound || !strings.Contains(msg, c.says) {
				t.Errorf("%s %s: %v %q, want TopicNotFound saying %q", what, c.topic, code, msg, c.says)
			}
			for _, prefix := range []string{"broker:", "policy:", "errkind:"} {
				if strings.Contains(msg, prefix) {
					t.Errorf("%s %s: %q names the broker's own package %q", what, c.topic, msg, prefix)
				}
			}
		}
	}
	r.alive()
}
