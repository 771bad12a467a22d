package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/topic"
	"github.com/isobar-mq/isobar/wire/pb"
)

// The binary protocol's side of the schema registry (docs/schemas.md):
// GET_SCHEMA, GET_OR_CREATE_SCHEMA, a producer's schema on PRODUCER and a
// consumer's on SUBSCRIBE. Schema versions travel as 8-byte big-endian
// numbers, as in Pulsar; producers put them in MessageMetadata
// themselves, and the broker stores metadata as sent.

// ErrSchemaAutoUpdateDisabled refuses a client's schema that the topic
// does not hold when its namespace sets is_allow_auto_update_schema to
// false (Pulsar's IncompatibleSchema and message).
var ErrSchemaAutoUpdateDisabled = errkind.Sentinel(errkind.ErrIncompatibleSchema, "broker: Schema not found and schema auto updating is disabled.")

// schemaTypeNames maps the protocol's schema types to the registry's
// names (Pulsar's SchemaType); AutoConsume has none, BYTES travels as
// None.
func schemaTypeName(t pb.Schema_Type) (string, bool) {
	if t < 0 || t > pb.Schema_ProtobufNative {
		return "", false
	}
	return compat.Types[t], true
}

func schemaTypeOf(name string) pb.Schema_Type {
	for i, n := range compat.Types[:pb.Schema_ProtobufNative+1] {
		if n == name {
			return pb.Schema_Type(i)
		}
	}
	return pb.Schema_None
}

// schemaInfo is the registry's form of a client's schema; ok is false
// when the client sent none (absent, None or AutoConsume).
func schemaInfo(s *pb.Schema) (schema.Info, bool) {
	if s == nil {
		return schema.Info{}, false
	}
	name, ok := schemaTypeName(s.GetType())
	if !ok || s.GetType() == pb.Schema_None {
		return schema.Info{}, false
	}
	return schema.Info{Type: name, Data: s.GetSchemaData(), Properties: kvMap(s.GetProperties())}, true
}

func schemaPB(name topic.Name, v schema.Version) *pb.Schema {
	t := schemaTypeOf(v.Type)
	out := &pb.Schema{Name: strp(name.Base().Local), SchemaData: v.Data, Type: &t}
	if out.SchemaData == nil {
		out.SchemaData = []byte{}
	}
	for k, val := range v.Properties {
		out.Properties = append(out.Properties, &pb.KeyValue{Key: strp(k), Value: strp(val)})
	}
	return out
}

// schemaVersionBytes encodes a schema version as the protocol carries it.
func schemaVersionBytes(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

// schemaSettings are the settings that apply to a topic's schema.
func (b *Broker) schemaSettings(ctx context.Context, name topic.Name) (schema.Settings, error) {
	if b.deps.SchemaSettings == nil {
		return schema.Settings{Strategy: compat.Default, AutoUpdate: true}, nil
	}
	return b.deps.SchemaSettings(ctx, name)
}

// incompatible gives a schema refusal the protocol's IncompatibleSchema
// code (a definition that does not parse included, as in Pulsar).
func incompatible(err error) error {
	if errors.Is(err, compat.ErrIncompatible) || errors.Is(err, compat.ErrInvalid) || errors.Is(err, schema.ErrTooLarge) {
		return fmt.Errorf("%w: %s", errkind.ErrIncompatibleSchema, errkind.MessageOf(err))
	}
	return err
}

// useSchema decides a client's schema for a topic: the version that holds
// it, or a new version if auto-update is on and the strategy allows it. A
// client without a schema gets nil, or IncompatibleSchema when the
// namespace enforces validation and the topic has a schema.
func (b *Broker) useSchema(ctx context.Context, name topic.Name, s *pb.Schema) ([]byte, error) {
	reg := b.deps.Schemas
	info, has := schemaInfo(s)
	if reg == nil {
		return nil, nil // no registry: schemas are taken unchecked
	}
	st, err := b.schemaSettings(ctx, name)
	if err != nil {
		return nil, err
	}
	if !has {
		if !st.ValidationEnforced {
			return nil, nil
		}
		_, err := reg.Latest(ctx, name)
		if errors.Is(err, schema.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: topic %s has a schema and its namespace enforces schema validation: a producer must give one", errkind.ErrIncompatibleSchema, name.Base())
	}
	if !st.AutoUpdate {
		// Only a version the topic holds, even on a topic without a
		// schema (Pulsar's addSchema with auto-update off).
		v, err := reg.Find(ctx, name, info)
		if errors.Is(err, schema.ErrNotFound) {
			return nil, fmt.Errorf("%w (topic %s)", ErrSchemaAutoUpdateDisabled, name.Base())
		}
		if err != nil {
			return nil, err
		}
		return schemaVersionBytes(v), nil
	}
	v, _, err := reg.Add(ctx, name, st.Strategy, info)
	if err != nil {
		return nil, incompatible(err)
	}
	return schemaVersionBytes(v), nil
}

// checkConsumerSchema checks a consumer's schema: one the topic holds,
// or one compatible with the topic's under the namespace's strategy; a
// topic without a schema takes the consumer's when auto-update is on and
// refuses it otherwise.
func (b *Broker) checkConsumerSchema(ctx context.Context, name topic.Name, s *pb.Schema) error {
	info, has := schemaInfo(s)
	if !has || b.deps.Schemas == nil {
		return nil
	}
	reg := b.deps.Schemas
	st, err := b.schemaSettings(ctx, name)
	if err != nil {
		return err
	}
	if _, err := reg.Latest(ctx, name); errors.Is(err, schema.ErrNotFound) {
		if !st.AutoUpdate {
			return fmt.Errorf("%w (topic %s)", ErrSchemaAutoUpdateDisabled, name.Base())
		}
		_, _, err := reg.Add(ctx, name, st.Strategy, info)
		return incompatible(err)
	} else if err != nil {
		return err
	}
	return incompatible(reg.Check(ctx, name, st.Strategy, info))
}
