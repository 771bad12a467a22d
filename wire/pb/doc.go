// Package pb holds the protobuf messages of the Pulsar binary protocol as
// Isobar's broker speaks it: pulsar.proto (our own description, with
// Pulsar's field numbers and enum values) and the Go code generated from it
// by scripts/gen-proto.sh. Framing and checksums live in package wire.
package pb
