package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/isobar-mq/isobar/wire/pb"
)

// Frames written by hand from the protocol description, to catch a wrong
// field number, wire type or framing detail that a round trip would hide.
// Protobuf keys are (field number << 3 | wire type): wire type 0 is a
// varint, 2 is length-delimited.

// goldenConnect is CONNECT{client_version "Go", protocol_version 20}.
var goldenConnect = []byte{
	0x00, 0x00, 0x00, 0x0e, // totalSize 14 = 4 (commandSize) + 10
	0x00, 0x00, 0x00, 0x0a, // commandSize 10
	// BaseCommand
	0x08, 0x02, // field 1 (type), varint: CONNECT = 2
	0x12, 0x06, // field 2 (connect), length 6
	// CommandConnect
	0x0a, 0x02, 'G', 'o', // field 1 (client_version), length 2, "Go"
	0x20, 0x14, // field 4 (protocol_version), varint 20
}

// goldenSend is SEND{producer_id 1, sequence_id 7} carrying
// MessageMetadata{producer_name "p", sequence_id 7, publish_time 1000} and
// the payload "hi".
var goldenSend = []byte{
	0x00, 0x00, 0x00, 0x20, // totalSize 32 = 4 + 8 (command) + 2 + 4 + 14 (entry)
	0x00, 0x00, 0x00, 0x08, // commandSize 8
	// BaseCommand
	0x08, 0x06, // field 1 (type), varint: SEND = 6
	0x32, 0x04, // field 6 (send), length 4
	// CommandSend
	0x08, 0x01, // field 1 (producer_id), varint 1
	0x10, 0x07, // field 2 (sequence_id), varint 7
	0x0e, 0x01, // magic: CRC32C follows
	0x90, 0xbb, 0x0e, 0x5a, // CRC32C of the 14 bytes below
	0x00, 0x00, 0x00, 0x08, // metadataSize 8
	// MessageMetadata
	0x0a, 0x01, 'p', // field 1 (producer_name), length 1, "p"
	0x10, 0x07, // field 2 (sequence_id), varint 7
	0x18, 0xe8, 0x07, // field 3 (publish_time), varint 1000 (0x3e8: e8 07)
	// payload
	'h', 'i',
}

// goldenMessage is MESSAGE{consumer_id 2, message_id {ledgerId 3, entryId 4}}
// with broker entry metadata {broker_timestamp 5, index 6} and the entry of
// goldenSend.
var goldenMessage = []byte{
	0x00, 0x00, 0x00, 0x2e, // totalSize 46 (see TestGoldenFrames)
	0x00, 0x00, 0x00, 0x0c, // commandSize 12
	// BaseCommand
	0x08, 0x09, // field 1 (type), varint: MESSAGE = 9
	0x4a, 0x08, // field 9 (message), length 8
	// CommandMessage
	0x08, 0x02, // field 1 (consumer_id), varint 2
	0x12, 0x04, // field 2 (message_id), length 4
	0x08, 0x03, // MessageIdData field 1 (ledgerId), varint 3
	0x10, 0x04, // MessageIdData field 2 (entryId), varint 4
	0x0e, 0x02, // magic: broker entry metadata follows
	0x00, 0x00, 0x00, 0x04, // its size, 4
	0x08, 0x05, // BrokerEntryMetadata field 1 (broker_timestamp), varint 5
	0x10, 0x06, // field 2 (index), varint 6
	0x0e, 0x01, // magic: CRC32C follows (it covers only the entry)
	0x90, 0xbb, 0x0e, 0x5a,
	0x00, 0x00, 0x00, 0x08,
	0x0a, 0x01, 'p', 0x10, 0x07, 0x18, 0xe8, 0x07,
	'h', 'i',
}

func TestGoldenFrames(t *testing.T) {
	// goldenMessage's totalSize: 4 (commandSize) + 12 (command) + 10 (broker
	// entry block) + 6 (checksum block) + 14 (entry) = 46 = 0x2e.
	if n := len(goldenMessage) - 4; n != 0x2e {
		t.Fatalf("goldenMessage body is %d bytes", n)
	}
	for _, tc := range []struct {
		name    string
		frame   []byte
		cmd     *pb.BaseCommand
		bem     *pb.BrokerEntryMetadata
		meta    *pb.MessageMetadata
		payload []byte
	}{
		{name: "connect", frame: goldenConnect, cmd: &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(),
			Connect: &pb.CommandConnect{ClientVersion: str("Go"), ProtocolVersion: i32(20)}}},
		{name: "send", frame: goldenSend, cmd: sendGolden(),
			meta: &pb.MessageMetadata{ProducerName: str("p"), SequenceId: u64(7), PublishTime: u64(1000)}, payload: []byte("hi")},
		{name: "message", frame: goldenMessage,
			cmd: &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: &pb.CommandMessage{
				ConsumerId: u64(2), MessageId: msgID(3, 4)}},
			bem:  &pb.BrokerEntryMetadata{BrokerTimestamp: u64(5), Index: u64(6)},
			meta: &pb.MessageMetadata{ProducerName: str("p"), SequenceId: u64(7), PublishTime: u64(1000)}, payload: []byte("hi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeFrame(tc.frame)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(f.Cmd, tc.cmd) {
				t.Fatalf("command %v, want %v", f.Cmd, tc.cmd)
			}
			if (tc.meta == nil) != (f.Metadata == nil) || (tc.meta != nil && !proto.Equal(f.Metadata, tc.meta)) {
				t.Fatalf("metadata %v, want %v", f.Metadata, tc.meta)
			}
			if (tc.bem == nil) != (f.BrokerEntryMetadata == nil) || (tc.bem != nil && !proto.Equal(f.BrokerEntryMetadata, tc.bem)) {
				t.Fatalf("broker entry metadata %v, want %v", f.BrokerEntryMetadata, tc.bem)
			}
			if !bytes.Equal(f.Payload, tc.payload) || f.ChecksumOK != (tc.meta != nil) {
				t.Fatalf("payload %q checksumOK %v", f.Payload, f.ChecksumOK)
			}
			if f.Cmd.GetConnect().GetProtocolVersion() != tc.cmd.GetConnect().GetProtocolVersion() {
				t.Fatal("protocol version")
			}
			// Encoding gives the same bytes (protobuf-go writes fields in
			// field-number order).
			var got []byte
			if tc.meta == nil {
				got, err = AppendCommand(nil, tc.cmd)
			} else {
				got, err = AppendPayloadCommandWithBrokerEntry(nil, tc.cmd, tc.bem, tc.meta, tc.payload)
			}
			if err != nil || !bytes.Equal(got, tc.frame) {
				t.Fatalf("encoded % x, %v\nwant     % x", got, err, tc.frame)
			}
		})
	}
}

func sendGolden() *pb.BaseCommand {
	return &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: u64(1), SequenceId: u64(7)}}
}
