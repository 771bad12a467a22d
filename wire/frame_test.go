package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/isobar-mq/isobar/wire/pb"
)

func u64(v uint64) *uint64 { return &v }
func i32(v int32) *int32   { return &v }
func str(v string) *string { return &v }
func boolp(v bool) *bool   { return &v }

func msgID(l, e uint64) *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: u64(l), EntryId: u64(e)}
}

func testSchema() *pb.Schema {
	return &pb.Schema{Name: str("s"), SchemaData: []byte(`{"type":"string"}`), Type: pb.Schema_Json.Enum(),
		Properties: []*pb.KeyValue{{Key: str("k"), Value: str("v")}}}
}

// commandCases holds one command of every type the broker handles or sends.
func commandCases() []*pb.BaseCommand {
	t := func(ty pb.BaseCommand_Type) *pb.BaseCommand_Type { return ty.Enum() }
	return []*pb.BaseCommand{
		{Type: t(pb.BaseCommand_CONNECT), Connect: &pb.CommandConnect{
			ClientVersion: str("Pulsar Go 0.19.0"), ProtocolVersion: i32(20), AuthMethodName: str("token"),
			AuthData: []byte("secret"), FeatureFlags: &pb.FeatureFlags{SupportsAuthRefresh: boolp(true),
				SupportsBrokerEntryMetadata: boolp(true), SupportsPartialProducer: boolp(true), SupportsTopicWatchers: boolp(true)}}},
		{Type: t(pb.BaseCommand_CONNECTED), Connected: &pb.CommandConnected{
			ServerVersion: str("isobar"), ProtocolVersion: i32(20), MaxMessageSize: i32(1 << 20),
			FeatureFlags: &pb.FeatureFlags{SupportsBrokerEntryMetadata: boolp(true)}}},
		{Type: t(pb.BaseCommand_SUBSCRIBE), Subscribe: &pb.CommandSubscribe{
			Topic: str("persistent://public/default/t"), Subscription: str("sub"), SubType: pb.CommandSubscribe_Key_Shared.Enum(),
			ConsumerId: u64(3), RequestId: u64(4), ConsumerName: str("c"), Durable: boolp(false),
			StartMessageId: msgID(5, 6), Metadata: []*pb.KeyValue{{Key: str("a"), Value: str("b")}},
			Schema: testSchema(), InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
			KeySharedMeta: &pb.KeySharedMeta{KeySharedMode: pb.KeySharedMode_STICKY.Enum(),
				HashRanges: []*pb.IntRange{{Start: i32(0), End: i32(32767)}}, AllowOutOfOrderDelivery: boolp(true)},
			SubscriptionProperties: []*pb.KeyValue{{Key: str("x"), Value: str("y")}}, ConsumerEpoch: u64(2)}},
		{Type: t(pb.BaseCommand_PRODUCER), Producer: &pb.CommandProducer{
			Topic: str("t"), ProducerId: u64(1), RequestId: u64(2), ProducerName: str("p"),
			Metadata: []*pb.KeyValue{{Key: str("a"), Value: str("b")}}, Schema: testSchema(),
			ProducerAccessMode: pb.ProducerAccessMode_ExclusiveWithFencing.Enum(), TopicEpoch: u64(9),
			InitialSubscriptionName: str("init")}},
		{Type: t(pb.BaseCommand_PRODUCER_SUCCESS), ProducerSuccess: &pb.CommandProducerSuccess{
			RequestId: u64(2), ProducerName: str("p"), LastSequenceId: proto.Int64(-1), SchemaVersion: []byte{0, 1},
			TopicEpoch: u64(9), ProducerReady: boolp(true)}},
		{Type: t(pb.BaseCommand_SEND_RECEIPT), SendReceipt: &pb.CommandSendReceipt{
			ProducerId: u64(1), SequenceId: u64(7), MessageId: msgID(10, 0), HighestSequenceId: u64(9)}},
		{Type: t(pb.BaseCommand_SEND_ERROR), SendError: &pb.CommandSendError{
			ProducerId: u64(1), SequenceId: u64(7), Error: pb.ServerError_ChecksumError.Enum(), Message: str("bad")}},
		{Type: t(pb.BaseCommand_ACK), Ack: &pb.CommandAck{
			ConsumerId: u64(3), AckType: pb.CommandAck_Cumulative.Enum(),
			MessageId:       []*pb.MessageIdData{{LedgerId: u64(1), EntryId: u64(2), BatchIndex: i32(3), AckSet: []int64{-1, 5}, BatchSize: i32(10)}},
			ValidationError: pb.CommandAck_ChecksumMismatch.Enum(),
			Properties:      []*pb.KeyLongValue{{Key: str("k"), Value: u64(1)}}, RequestId: u64(11)}},
		{Type: t(pb.BaseCommand_ACK_RESPONSE), AckResponse: &pb.CommandAckResponse{
			ConsumerId: u64(3), Error: pb.ServerError_ConsumerNotFound.Enum(), Message: str("gone"), RequestId: u64(11)}},
		{Type: t(pb.BaseCommand_FLOW), Flow: &pb.CommandFlow{ConsumerId: u64(3), MessagePermits: proto.Uint32(1000)}},
		{Type: t(pb.BaseCommand_UNSUBSCRIBE), Unsubscribe: &pb.CommandUnsubscribe{ConsumerId: u64(3), RequestId: u64(5), Force: boolp(true)}},
		{Type: t(pb.BaseCommand_SUCCESS), Success: &pb.CommandSuccess{RequestId: u64(5), Schema: testSchema()}},
		{Type: t(pb.BaseCommand_ERROR), Error: &pb.CommandError{RequestId: u64(5), Error: pb.ServerError_TopicNotFound.Enum(), Message: str("no")}},
		{Type: t(pb.BaseCommand_CLOSE_PRODUCER), CloseProducer: &pb.CommandCloseProducer{ProducerId: u64(1), RequestId: u64(6),
			AssignedBrokerServiceUrl: str("pulsar://b:6650")}},
		{Type: t(pb.BaseCommand_CLOSE_CONSUMER), CloseConsumer: &pb.CommandCloseConsumer{ConsumerId: u64(3), RequestId: u64(7),
			AssignedBrokerServiceUrlTls: str("pulsar+ssl://b:6651")}},
		{Type: t(pb.BaseCommand_PING), Ping: &pb.CommandPing{}},
		{Type: t(pb.BaseCommand_PONG), Pong: &pb.CommandPong{}},
		{Type: t(pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES), RedeliverUnacknowledgedMessages: &pb.CommandRedeliverUnacknowledgedMessages{
			ConsumerId: u64(3), MessageIds: []*pb.MessageIdData{msgID(1, 2), msgID(1, 3)}, ConsumerEpoch: u64(1)}},
		{Type: t(pb.BaseCommand_PARTITIONED_METADATA), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{Topic: str("t"), RequestId: u64(8)}},
		{Type: t(pb.BaseCommand_PARTITIONED_METADATA_RESPONSE), PartitionMetadataResponse: &pb.CommandPartitionedTopicMetadataResponse{
			Partitions: proto.Uint32(3), RequestId: u64(8), Response: pb.CommandPartitionedTopicMetadataResponse_Success.Enum()}},
		{Type: t(pb.BaseCommand_LOOKUP), LookupTopic: &pb.CommandLookupTopic{Topic: str("t"), RequestId: u64(9), Authoritative: boolp(true),
			AdvertisedListenerName: str("internal"), Properties: []*pb.KeyValue{{Key: str("a"), Value: str("b")}}}},
		{Type: t(pb.BaseCommand_LOOKUP_RESPONSE), LookupTopicResponse: &pb.CommandLookupTopicResponse{
			BrokerServiceUrl: str("pulsar://localhost:6650"), Response: pb.CommandLookupTopicResponse_Connect.Enum(),
			RequestId: u64(9), Authoritative: boolp(true), ProxyThroughServiceUrl: boolp(false)}},
		{Type: t(pb.BaseCommand_CONSUMER_STATS), ConsumerStats: &pb.CommandConsumerStats{RequestId: u64(10), ConsumerId: u64(3)}},
		{Type: t(pb.BaseCommand_CONSUMER_STATS_RESPONSE), ConsumerStatsResponse: &pb.CommandConsumerStatsResponse{
			RequestId: u64(10), MsgRateOut: proto.Float64(1.5), ConsumerName: str("c"), AvailablePermits: u64(1000),
			MsgBacklog: u64(4), Type: str("Shared"), MessageAckRate: proto.Float64(0.25)}},
		{Type: t(pb.BaseCommand_REACHED_END_OF_TOPIC), ReachedEndOfTopic: &pb.CommandReachedEndOfTopic{ConsumerId: u64(3)}},
		{Type: t(pb.BaseCommand_SEEK), Seek: &pb.CommandSeek{ConsumerId: u64(3), RequestId: u64(12), MessageId: msgID(4, 5),
			MessagePublishTime: u64(1700000000000)}},
		{Type: t(pb.BaseCommand_GET_LAST_MESSAGE_ID), GetLastMessageId: &pb.CommandGetLastMessageId{ConsumerId: u64(3), RequestId: u64(13)}},
		{Type: t(pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE), GetLastMessageIdResponse: &pb.CommandGetLastMessageIdResponse{
			LastMessageId: &pb.MessageIdData{LedgerId: u64(4), EntryId: u64(^uint64(0)), Partition: i32(-1)}, RequestId: u64(13),
			ConsumerMarkDeletePosition: msgID(4, 2)}},
		{Type: t(pb.BaseCommand_ACTIVE_CONSUMER_CHANGE), ActiveConsumerChange: &pb.CommandActiveConsumerChange{ConsumerId: u64(3), IsActive: boolp(true)}},
		{Type: t(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{
			RequestId: u64(14), Namespace: str("public/default"), Mode: pb.CommandGetTopicsOfNamespace_ALL.Enum(), TopicsPattern: str("t.*")}},
		{Type: t(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE), GetTopicsOfNamespaceResponse: &pb.CommandGetTopicsOfNamespaceResponse{
			RequestId: u64(14), Topics: []string{"persistent://public/default/a", "persistent://public/default/b"},
			Filtered: boolp(true), TopicsHash: str("h"), Changed: boolp(true)}},
		{Type: t(pb.BaseCommand_GET_SCHEMA), GetSchema: &pb.CommandGetSchema{RequestId: u64(15), Topic: str("t"), SchemaVersion: []byte{1}}},
		{Type: t(pb.BaseCommand_GET_SCHEMA_RESPONSE), GetSchemaResponse: &pb.CommandGetSchemaResponse{RequestId: u64(15),
			Schema: testSchema(), SchemaVersion: []byte{1}}},
		{Type: t(pb.BaseCommand_GET_OR_CREATE_SCHEMA), GetOrCreateSchema: &pb.CommandGetOrCreateSchema{RequestId: u64(16), Topic: str("t"),
			Schema: testSchema()}},
		{Type: t(pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE), GetOrCreateSchemaResponse: &pb.CommandGetOrCreateSchemaResponse{
			RequestId: u64(16), ErrorCode: pb.ServerError_IncompatibleSchema.Enum(), ErrorMessage: str("no")}},
		{Type: t(pb.BaseCommand_AUTH_CHALLENGE), AuthChallenge: &pb.CommandAuthChallenge{ServerVersion: str("isobar"),
			Challenge: &pb.AuthData{AuthMethodName: str("token"), AuthData: []byte("refresh")}, ProtocolVersion: i32(20)}},
		{Type: t(pb.BaseCommand_AUTH_RESPONSE), AuthResponse: &pb.CommandAuthResponse{ClientVersion: str("go"),
			Response: &pb.AuthData{AuthMethodName: str("token"), AuthData: []byte("t2")}, ProtocolVersion: i32(20)}},
		{Type: t(pb.BaseCommand_TOPIC_MIGRATED), TopicMigrated: &pb.CommandTopicMigrated{ResourceId: u64(1),
			ResourceType: pb.CommandTopicMigrated_Consumer.Enum(), BrokerServiceUrl: str("pulsar://other:6650")}},
	}
}

func sendCmd(producerID, seq uint64) *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: u64(producerID), SequenceId: u64(seq), NumMessages: i32(1)}}
}

func messageCmd() *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: &pb.CommandMessage{
		ConsumerId: u64(3), MessageId: msgID(7, 8), RedeliveryCount: proto.Uint32(1), AckSet: []int64{3}}}
}

func testMeta() *pb.MessageMetadata {
	return &pb.MessageMetadata{ProducerName: str("standalone-0-1"), SequenceId: u64(42), PublishTime: u64(1700000000123),
		Properties: []*pb.KeyValue{{Key: str("a"), Value: str("1")}}, PartitionKey: str("key"),
		Compression: pb.CompressionType_ZSTD.Enum(), UncompressedSize: proto.Uint32(5), EventTime: u64(7),
		OrderingKey: []byte("ok"), DeliverAtTime: proto.Int64(1700000001000), Uuid: str("u"), ChunkId: i32(0)}
}

// TestCommandRoundTrip encodes and decodes every command type.
func TestCommandRoundTrip(t *testing.T) {
	seen := map[pb.BaseCommand_Type]bool{}
	for _, cmd := range commandCases() {
		t.Run(cmd.GetType().String(), func(t *testing.T) {
			seen[cmd.GetType()] = true
			frame, err := AppendCommand([]byte("prefix"), cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(frame, []byte("prefix")) {
				t.Fatal("AppendCommand lost dst")
			}
			frame = frame[len("prefix"):]
			f, err := DecodeFrame(frame)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(f.Cmd, cmd) {
				t.Fatalf("got %v\nwant %v", f.Cmd, cmd)
			}
			if f.Metadata != nil || f.Payload != nil || f.Entry != nil || f.BrokerEntryMetadata != nil || f.ChecksumOK {
				t.Fatalf("simple command decoded with payload parts: %+v", f)
			}
			got, err := ReadFrame(bytes.NewReader(frame), 0, nil)
			if err != nil || !bytes.Equal(got, frame) {
				t.Fatalf("ReadFrame = %x, %v; want %x", got, err, frame)
			}
		})
	}
	// SEND and MESSAGE are covered by TestPayloadRoundTrip.
	seen[pb.BaseCommand_SEND], seen[pb.BaseCommand_MESSAGE] = true, true
	for ty := pb.BaseCommand_CONNECT; ty <= pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE; ty++ {
		if !seen[ty] {
			t.Errorf("no round-trip case for %v", ty)
		}
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	bem := &pb.BrokerEntryMetadata{BrokerTimestamp: u64(1646983036054), Index: u64(5)}
	for _, tc := range []struct {
		name    string
		cmd     *pb.BaseCommand
		bem     *pb.BrokerEntryMetadata
		payload []byte
	}{
		{"send", sendCmd(1, 42), nil, []byte("hello")},
		{"send-empty-payload", sendCmd(1, 43), nil, nil},
		{"message", messageCmd(), nil, []byte("hello")},
		{"message-broker-entry", messageCmd(), bem, []byte("hello")},
		{"message-empty-broker-entry", messageCmd(), &pb.BrokerEntryMetadata{}, bytes.Repeat([]byte{0x0e}, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := testMeta()
			frame, err := AppendPayloadCommandWithBrokerEntry(nil, tc.cmd, tc.bem, meta, tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			f, err := DecodeFrame(frame)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(f.Cmd, tc.cmd) || !proto.Equal(f.Metadata, meta) || !bytes.Equal(f.Payload, tc.payload) || !f.ChecksumOK {
				t.Fatalf("got %+v", f)
			}
			if (tc.bem == nil) != (f.BrokerEntryMetadata == nil) || (tc.bem != nil && !proto.Equal(tc.bem, f.BrokerEntryMetadata)) {
				t.Fatalf("broker entry metadata %v, want %v", f.BrokerEntryMetadata, tc.bem)
			}
			// Re-sending the stored entry gives the same bytes.
			again, err := AppendEntryCommand(nil, tc.cmd, tc.bem, f.Entry)
			if err != nil || !bytes.Equal(again, frame) {
				t.Fatalf("AppendEntryCommand = %x, %v\nwant %x", again, err, frame)
			}
			if tc.bem == nil {
				plain, err := AppendPayloadCommand(nil, tc.cmd, meta, tc.payload)
				if err != nil || !bytes.Equal(plain, frame) {
					t.Fatalf("AppendPayloadCommand = %x, %v", plain, err)
				}
			}
		})
	}
}

// TestPayloadWithoutChecksum: clients before protocol v6 send no checksum.
func TestPayloadWithoutChecksum(t *testing.T) {
	frame, err := AppendCommand(nil, sendCmd(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	meta := testMeta()
	frame, err = AppendEntry(frame, meta, []byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	f, err := DecodeFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	if f.ChecksumOK || !proto.Equal(f.Metadata, meta) || string(f.Payload) != "old" {
		t.Fatalf("got %+v", f)
	}
}

// TestChecksumMismatch flips each byte after the checksum field (metadata
// size, metadata, payload) and the checksum itself.
func TestChecksumMismatch(t *testing.T) {
	cmd := sendCmd(5, 9)
	frame, err := AppendPayloadCommand(nil, cmd, testMeta(), []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	cmdSize := int(binary.BigEndian.Uint32(frame[4:]))
	crcAt := 8 + cmdSize + 2
	for i := crcAt; i < len(frame); i++ {
		bad := bytes.Clone(frame)
		bad[i] ^= 0x55
		f, err := DecodeFrame(bad)
		if !errors.Is(err, ErrChecksumMismatch) {
			t.Fatalf("byte %d flipped: err %v, want ErrChecksumMismatch", i, err)
		}
		if !proto.Equal(f.Cmd, cmd) || f.Metadata != nil || f.Payload != nil {
			t.Fatalf("byte %d flipped: frame %+v, want only Cmd", i, f)
		}
		if CodeOf(err) != pb.ServerError_ChecksumError {
			t.Fatalf("CodeOf = %v", CodeOf(err))
		}
	}
	// Corrupting the command or the magic is not a checksum error but still an error.
	for i := 0; i < crcAt; i++ {
		bad := bytes.Clone(frame)
		bad[i] ^= 0xff
		if _, err := DecodeFrame(bad); err == nil && i >= 8+cmdSize {
			t.Fatalf("byte %d (magic) flipped: no error", i)
		}
	}
}

func TestDecodeFrameErrors(t *testing.T) {
	ping, _ := AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	send, _ := AppendPayloadCommand(nil, sendCmd(1, 1), testMeta(), []byte("x"))
	bemMsg, _ := AppendPayloadCommandWithBrokerEntry(nil, messageCmd(), &pb.BrokerEntryMetadata{Index: u64(1)}, testMeta(), []byte("x"))
	setTotal := func(b []byte) []byte { binary.BigEndian.PutUint32(b, uint32(len(b)-4)); return b }
	cmdBytes := func(b []byte) []byte {
		var out []byte
		out = binary.BigEndian.AppendUint32(out, uint32(4+len(b)))
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		return append(out, b...)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"short", []byte{0, 0, 0, 4, 0, 0}, ErrTruncated},
		{"total-beyond-input", append([]byte{0, 0, 0, 99}, ping[4:]...), ErrTruncated},
		{"total-short-of-input", append(bytes.Clone(ping), 0), ErrMalformed},
		{"cmdsize-beyond-total", []byte{0, 0, 0, 4, 0, 0, 0, 1}, ErrMalformed},
		{"cmdsize-max", []byte{0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"empty-command", []byte{0, 0, 0, 4, 0, 0, 0, 0}, ErrBadCommand},
		{"garbage-command", cmdBytes([]byte{0xff, 0xff, 0xff}), ErrBadCommand},
		{"missing-required", cmdBytes([]byte{0x08, 0x06, 0x32, 0x02, 0x08, 0x01}), ErrBadCommand},
		{"type-without-body", cmdBytes([]byte{0x08, 0x06}), ErrBadCommand},
		{"truncated-payload", setTotal(bytes.Clone(send[:len(send)-3])), ErrChecksumMismatch},
		{"truncated-checksum", setTotal(bytes.Clone(send[:8+int(binary.BigEndian.Uint32(send[4:]))+4])), ErrTruncated},
		{"metadata-size-beyond", func() []byte {
			f := bytes.Clone(ping)
			f = append(f, 0, 0, 1, 0, 1)
			return setTotal(f)
		}(), ErrMalformed},
		{"garbage-metadata", func() []byte {
			f := bytes.Clone(ping)
			f = append(f, 0, 0, 0, 2, 0xff, 0xff)
			return setTotal(f)
		}(), ErrBadMetadata},
		{"bem-size-beyond", func() []byte {
			f := bytes.Clone(bemMsg)
			at := 8 + int(binary.BigEndian.Uint32(f[4:])) + 2
			binary.BigEndian.PutUint32(f[at:], 1<<30)
			return f
		}(), ErrMalformed},
		{"bem-cut", setTotal(bytes.Clone(bemMsg[:8+int(binary.BigEndian.Uint32(bemMsg[4:]))+3])), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeFrame(tc.frame)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Errorf("error %q lacks the wire: prefix", err)
			}
			if tc.want != ErrChecksumMismatch && f.Cmd != nil {
				t.Errorf("frame %+v returned with error", f)
			}
		})
	}
}

func TestReadFrame(t *testing.T) {
	a, _ := AppendCommand(nil, commandCases()[0])
	b, _ := AppendPayloadCommand(nil, sendCmd(1, 2), testMeta(), bytes.Repeat([]byte("z"), 3000))
	stream := append(bytes.Clone(a), b...)
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 16)
	for i, want := range [][]byte{a, b} {
		got, err := ReadFrame(r, 0, buf)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %v", i, err)
		}
		if _, err := DecodeFrame(got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		buf = got
	}
	if _, err := ReadFrame(r, 0, buf); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}

	// Too large: error before the body is read.
	big := binary.BigEndian.AppendUint32(nil, DefaultMaxFrameSize+1)
	r = bytes.NewReader(append(big, 1, 2, 3))
	if _, err := ReadFrame(r, 0, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if r.Len() != 3 {
		t.Fatalf("oversize: read %d body bytes", 3-r.Len())
	}
	if _, err := ReadFrame(bytes.NewReader(b), len(b)-5, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("configured max: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(b), len(b)-4, nil); err != nil {
		t.Fatalf("frame of exactly max: %v", err)
	}
	for _, n := range []int{1, 3, 5, len(b) - 1} {
		if _, err := ReadFrame(bytes.NewReader(b[:n]), 0, nil); !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 3, 1, 2, 3}), 0, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("totalSize 3: %v", err)
	}
}

func TestAppendErrors(t *testing.T) {
	dst := []byte("keep")
	for _, cmd := range []*pb.BaseCommand{
		nil,
		{},
		{Type: pb.BaseCommand_SEND.Enum()},
		{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: u64(1)}}, // sequence_id required
	} {
		out, err := AppendCommand(dst, cmd)
		if !errors.Is(err, ErrBadCommand) || string(out) != "keep" {
			t.Errorf("AppendCommand(%v) = %q, %v", cmd, out, err)
		}
	}
	out, err := AppendPayloadCommand(dst, sendCmd(1, 1), &pb.MessageMetadata{}, nil)
	if !errors.Is(err, ErrBadMetadata) || string(out) != "keep" {
		t.Errorf("bad metadata: %q, %v", out, err)
	}
	out, err = AppendPayloadCommand(dst, sendCmd(1, 1), nil, nil)
	if !errors.Is(err, ErrBadMetadata) || string(out) != "keep" {
		t.Errorf("nil metadata: %q, %v", out, err)
	}
	// Frames of command types without fields here (topic watchers) pass
	// through untouched.
	watch := &pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum()}
	f, err := AppendCommand(nil, watch)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeFrame(f); err != nil || got.Cmd.GetType() != pb.BaseCommand_WATCH_TOPIC_LIST {
		t.Fatalf("WATCH_TOPIC_LIST: %v, %v", got.Cmd, err)
	}
	// A transaction command without its body is a bad command.
	if _, err := AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_NEW_TXN.Enum()}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("NEW_TXN without body: %v", err)
	}
}

// TestBodyFieldNumbers checks what checkBody relies on: the BaseCommand
// field for command type T has field number T.
func TestBodyFieldNumbers(t *testing.T) {
	fields := (&pb.BaseCommand{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Number() == 1 {
			continue
		}
		if pb.BaseCommand_Type(fd.Number()).String() == "" || fd.Kind() != protoreflect.MessageKind {
			t.Errorf("field %s (%d) is not a command body", fd.Name(), fd.Number())
		}
	}
}

func TestChecksumVector(t *testing.T) {
	// The CRC-32C check value from RFC 3720 / the Castagnoli catalogue.
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("Checksum = %#x, want 0xe3069283", got)
	}
}

// TestReadFrameAllocation: a frame that has arrived whole behind a
// bufio.Reader is read into one buffer of its size; one that has not
// grows from what arrived, never to what was only announced.
func TestReadFrameAllocation(t *testing.T) {
	f, _ := AppendPayloadCommand(nil, sendCmd(1, 2), testMeta(), bytes.Repeat([]byte("z"), 12000))
	got, err := ReadFrame(bufio.NewReaderSize(bytes.NewReader(f), 64<<10), 0, nil)
	if err != nil || !bytes.Equal(got, f) {
		t.Fatalf("whole: %v", err)
	}
	if cap(got) != len(f) {
		t.Errorf("whole frame of %d bytes read into a buffer of %d", len(f), cap(got))
	}
	announced := binary.BigEndian.AppendUint32(nil, 1<<20)
	partial := append(announced, bytes.Repeat([]byte("y"), 9000)...)
	got, err = ReadFrame(bufio.NewReaderSize(bytes.NewReader(partial), 64<<10), 0, nil)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("partial: %v", err)
	}
	if cap(got) > 2*len(partial) {
		t.Errorf("9,000 bytes of an announced MiB held a buffer of %d", cap(got))
	}
}
