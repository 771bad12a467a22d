// Package compat decides whether a schema may be added to a topic's
// schema history under a compatibility strategy: Avro's schema resolution
// rules for AVRO and JSON schemas (both are Avro definitions in Pulsar),
// identity of type for the others. It is pure: no I/O, no clock.
package compat

import (
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/isobar-mq/isobar/errkind"
)

// Errors, checked with errors.Is.
var (
	// ErrIncompatible: the schema cannot be added under the strategy.
	ErrIncompatible = errkind.Sentinel(errkind.ErrIncompatibleSchema, "compat: incompatible schema")
	// ErrInvalid: the schema's type is unknown or its definition does not
	// parse.
	ErrInvalid = errkind.Sentinel(errkind.ErrBadRequest, "compat: invalid schema")
)

// Strategy is a compatibility strategy, in Pulsar's names.
type Strategy string

// The strategies. BACKWARD: the new schema reads data written with the
// latest one; FORWARD: the latest one reads data written with the new
// one; FULL: both. The transitive forms check against every version
// since the last deletion instead of the latest alone.
const (
	AlwaysCompatible   Strategy = "ALWAYS_COMPATIBLE"
	AlwaysIncompatible Strategy = "ALWAYS_INCOMPATIBLE"
	Backward           Strategy = "BACKWARD"
	Forward            Strategy = "FORWARD"
	Full               Strategy = "FULL"
	BackwardTransitive Strategy = "BACKWARD_TRANSITIVE"
	ForwardTransitive  Strategy = "FORWARD_TRANSITIVE"
	FullTransitive     Strategy = "FULL_TRANSITIVE"
)

// Default is the strategy of a namespace that sets none (Pulsar's
// broker default, schemaCompatibilityStrategy=FULL).
const Default = Full

// ParseStrategy parses a strategy name; "" and "UNDEFINED" give Default.
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case "", "UNDEFINED":
		return Default, nil
	case AlwaysCompatible, AlwaysIncompatible, Backward, Forward, Full, BackwardTransitive, ForwardTransitive, FullTransitive:
		return st, nil
	}
	return "", fmt.Errorf("%w: unknown compatibility strategy %q", ErrInvalid, s)
}

// Types are the schema types, in Pulsar's names (SchemaType).
var Types = []string{
	"NONE", "STRING", "JSON", "PROTOBUF", "AVRO", "BOOLEAN", "INT8", "INT16", "INT32", "INT64",
	"FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "KEY_VALUE", "INSTANT", "LOCAL_DATE",
	"LOCAL_TIME", "LOCAL_DATE_TIME", "PROTOBUF_NATIVE", "BYTES",
}

// Schema is one version of a topic's schema, as the checks see it.
type Schema struct {
	Type string
	Data []byte
}

// avroLike reports whether a type's definition is an Avro schema.
func avroLike(typ string) bool { return typ == "AVRO" || typ == "JSON" }

// Validate checks that a schema's type is known and, for AVRO and JSON,
// that its definition parses as an Avro schema.
func Validate(s Schema) error {
	known := false
	for _, t := range Types {
		known = known || t == s.Type
	}
	if !known {
		return fmt.Errorf("%w: unknown schema type %q (one of %s)", ErrInvalid, s.Type, strings.Join(Types, ", "))
	}
	if avroLike(s.Type) {
		if _, err := parse(s); err != nil {
			return err
		}
	}
	return nil
}

// parse parses an Avro definition with a cache of its own, so that named
// types never leak from one schema into another. A definition the parser
// cannot cope with (it panics) is invalid like any other.
func parse(s Schema) (sc avro.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			sc, err = nil, fmt.Errorf("%w: %s definition does not parse: %v", ErrInvalid, s.Type, p)
		}
	}()
	sc, err = avro.ParseBytesWithCache(s.Data, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%w: %s definition does not parse: %w", ErrInvalid, s.Type, err)
	}
	return sc, nil
}

// Check reports whether next may follow existing (oldest first, the
// versions since the last deletion) under st: nil, or an error wrapping
// ErrIncompatible with the reason (ErrInvalid when a definition does not
// parse). A first schema is always accepted.
func Check(st Strategy, existing []Schema, next Schema) error {
	if err := Validate(next); err != nil {
		return err
	}
	if len(existing) == 0 || st == AlwaysCompatible {
		return nil
	}
	if st == AlwaysIncompatible {
		return fmt.Errorf("%w: strategy %s accepts no new version", ErrIncompatible, st)
	}
	against := existing[len(existing)-1:]
	switch st {
	case BackwardTransitive, ForwardTransitive, FullTransitive:
		against = existing
	case Backward, Forward, Full:
	default:
		return fmt.Errorf("%w: unknown compatibility strategy %q", ErrInvalid, st)
	}
	for i := len(against) - 1; i >= 0; i-- {
		if err := pair(st, against[i], next); err != nil {
			return err
		}
	}
	return nil
}

// pair checks next against one existing schema.
func pair(st Strategy, old, next Schema) error {
	if old.Type != next.Type {
		return fmt.Errorf("%w: type %s cannot follow type %s", ErrIncompatible, next.Type, old.Type)
	}
	if !avroLike(next.Type) {
		return nil // the same primitive (or opaque) type
	}
	n, err := parse(next)
	if err != nil {
		return err
	}
	o, err := parse(old)
	if err != nil {
		return fmt.Errorf("stored schema: %w", err)
	}
	if st == Backward || st == BackwardTransitive || st == Full || st == FullTransitive {
		if err := CanRead(n, o); err != nil {
			return fmt.Errorf("%w: the new schema cannot read data written with an existing one: %w", ErrIncompatible, err)
		}
	}
	if st == Forward || st == ForwardTransitive || st == Full || st == FullTransitive {
		if err := CanRead(o, n); err != nil {
			return fmt.Errorf("%w: an existing schema cannot read data written with the new one: %w", ErrIncompatible, err)
		}
	}
	return nil
}

// CanRead reports whether data written with writer can be read with
// reader under Avro's schema resolution rules: nil, or why not.
func CanRead(reader, writer avro.Schema) error {
	r := resolver{seen: map[[2]string]bool{}}
	return r.check(reader, writer, "")
}

type resolver struct {
	// seen holds the (reader, writer) named-type pairs being checked, so
	// recursive types end.
	seen map[[2]string]bool
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

func at(path string) string {
	if path == "" {
		return "at the top"
	}
	return "at " + path
}

// promotable lists, per writer type, the reader types it is promoted to.
var promotable = map[avro.Type][]avro.Type{
	avro.Int:    {avro.Long, avro.Float, avro.Double},
	avro.Long:   {avro.Float, avro.Double},
	avro.Float:  {avro.Double},
	avro.String: {avro.Bytes},
	avro.Bytes:  {avro.String},
}

func (r *resolver) check(reader, writer avro.Schema, path string) error {
	reader, writer = deref(reader), deref(writer)
	if wu, ok := writer.(*avro.UnionSchema); ok {
		// Every branch the writer may have written must be readable.
		for _, w := range wu.Types() {
			if err := r.check(reader, w, path); err != nil {
				return err
			}
		}
		return nil
	}
	if ru, ok := reader.(*avro.UnionSchema); ok {
		for _, rb := range ru.Types() {
			if r.check(rb, writer, path) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: no branch of the reader's union reads the writer's %s", at(path), writer.Type())
	}
	rt, wt := reader.Type(), writer.Type()
	if rt != wt {
		for _, p := range promotable[wt] {
			if p == rt {
				return nil
			}
		}
		return fmt.Errorf("%s: the reader's %s cannot read the writer's %s", at(path), rt, wt)
	}
	switch rs := reader.(type) {
	case *avro.RecordSchema:
		ws := writer.(*avro.RecordSchema)
		if err := sameName(rs, ws, path); err != nil {
			return err
		}
		key := [2]string{rs.FullName(), ws.FullName()}
		if r.seen[key] {
			return nil
		}
		r.seen[key] = true
		for _, rf := range rs.Fields() {
			fp := path + "." + rf.Name()
			if path == "" {
				fp = rf.Name()
			}
			wf := writerField(ws, rf)
			if wf == nil {
				if !rf.HasDefault() {
					return fmt.Errorf("at %s: the reader's field has no default and the writer has no such field", fp)
				}
				continue
			}
			if err := r.check(rf.Type(), wf.Type(), fp); err != nil {
				return err
			}
		}
	case *avro.EnumSchema:
		ws := writer.(*avro.EnumSchema)
		if err := sameName(rs, ws, path); err != nil {
			return err
		}
		if rs.HasDefault() {
			return nil
		}
		for _, sym := range ws.Symbols() {
			found := false
			for _, s := range rs.Symbols() {
				found = found || s == sym
			}
			if !found {
				return fmt.Errorf("%s: the writer's enum symbol %s is not the reader's and the reader has no default", at(path), sym)
			}
		}
	case *avro.FixedSchema:
		ws := writer.(*avro.FixedSchema)
		if err := sameName(rs, ws, path); err != nil {
			return err
		}
		if rs.Size() != ws.Size() {
			return fmt.Errorf("%s: fixed sizes differ (%d, %d)", at(path), rs.Size(), ws.Size())
		}
	case *avro.ArraySchema:
		return r.check(rs.Items(), writer.(*avro.ArraySchema).Items(), path+"[]")
	case *avro.MapSchema:
		return r.check(rs.Values(), writer.(*avro.MapSchema).Values(), path+"{}")
	}
	return nil
}

// sameName: named types match by unqualified name (as Avro's Java
// implementation, which Pulsar uses, matches them), or by one of the
// reader's aliases.
func sameName(reader, writer avro.NamedSchema, path string) error {
	if reader.Name() == writer.Name() {
		return nil
	}
	for _, a := range reader.Aliases() {
		if a == writer.FullName() || a == writer.Name() {
			return nil
		}
	}
	return fmt.Errorf("%s: the reader's %s %s does not match the writer's %s", at(path), reader.Type(), reader.FullName(), writer.FullName())
}

// writerField finds the writer's field a reader's field reads: by name,
// else by one of the reader field's aliases.
func writerField(w *avro.RecordSchema, rf *avro.Field) *avro.Field {
	for _, wf := range w.Fields() {
		if wf.Name() == rf.Name() {
			return wf
		}
	}
	for _, a := range rf.Aliases() {
		for _, wf := range w.Fields() {
			if wf.Name() == a {
				return wf
			}
		}
	}
	return nil
}
