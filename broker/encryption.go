package broker

import (
	"fmt"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire/pb"
)

// A namespace's encryption_required (NamespacePolicy.EncryptionRequired):
// messages are encrypted by their producers (the broker never sees a key),
// and the broker refuses what is not, as Pulsar does, with its codes and
// messages:
//
//   - PRODUCER with encrypted=false: MetadataError "Encryption is
//     required in <topic>". A producer that does not say (pulsar-client-go
//     never sets the field, encrypting or not) is let in, and its messages
//     are checked one by one: Pulsar refuses it, which would shut every Go
//     producer out of such a namespace (docs/decisions.md);
//   - SEND whose metadata carries no encryption keys: SEND_ERROR
//     MetadataError "Messages must be encrypted"; nothing is stored.
//
// Replicator producers are not checked: they copy entries their source
// region accepted under the same (global) policy, byte for byte.
var (
	ErrEncryptionRequired = errkind.Sentinel(errkind.ErrMetadata, "broker: Encryption is required")
	ErrNotEncrypted       = errkind.Sentinel(errkind.ErrMetadata, "broker: Messages must be encrypted")
)

// checkProducerEncryption refuses a producer that declares it does not
// encrypt on a topic that requires encryption.
func checkProducerEncryption(t *Topic, cmd *pb.CommandProducer, replicator bool) error {
	if replicator || !t.flag(flEncryption) || cmd.Encrypted == nil || cmd.GetEncrypted() {
		return nil
	}
	return fmt.Errorf("%w in %s", ErrEncryptionRequired, t.name)
}

// checkEncrypted refuses a message of p without encryption keys on a
// topic that requires encryption.
func (p *producer) checkEncrypted(md *pb.MessageMetadata) error {
	if p.replFrom != "" || !p.t.flag(flEncryption) || len(md.GetEncryptionKeys()) > 0 {
		return nil
	}
	return ErrNotEncrypted
}
