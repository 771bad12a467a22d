package compat

import (
	"errors"
	"fmt"
	"testing"
)

func rec(fields string) string {
	return `{"type":"record","name":"User","namespace":"acme","fields":[` + fields + `]}`
}

// The schemas of the table, each a change from v1.
var (
	v1          = rec(`{"name":"id","type":"long"},{"name":"name","type":"string"}`)
	addDefault  = rec(`{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"age","type":"int","default":0}`)
	addNoDef    = rec(`{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"age","type":"int"}`)
	removeField = rec(`{"name":"id","type":"long"}`)
	promote     = rec(`{"name":"id","type":"double"},{"name":"name","type":"bytes"}`)
	renamed     = `{"type":"record","name":"Other","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
	toUnion     = rec(`{"name":"id","type":"long"},{"name":"name","type":["null","string"]}`)
)

// v1Def is v1 with a default on name, so that removing it is FORWARD
// compatible.
var v1Def = rec(`{"name":"id","type":"long"},{"name":"name","type":"string","default":""}`)

func TestStrategies(t *testing.T) {
	// want: compatible under BACKWARD, FORWARD, FULL (non-transitive).
	cases := []struct {
		name           string
		old, next      string
		back, fwd, ful bool
	}{
		{"same", v1, v1, true, true, true},
		{"add field with default", v1, addDefault, true, true, true},
		{"add field without default", v1, addNoDef, false, true, false},
		{"remove field without default", v1, removeField, true, false, false},
		{"remove field with default", v1Def, removeField, true, true, true},
		{"promote int to double, string to bytes", v1, promote, true, false, false},
		{"record renamed", v1, renamed, false, false, false},
		{"field becomes a union with it", v1, toUnion, true, false, false},
	}
	for _, typ := range []string{"AVRO", "JSON"} {
		for _, c := range cases {
			want := map[Strategy]bool{
				AlwaysCompatible: true, AlwaysIncompatible: false,
				Backward: c.back, Forward: c.fwd, Full: c.ful,
				BackwardTransitive: c.back, ForwardTransitive: c.fwd, FullTransitive: c.ful,
			}
			for st, ok := range want {
				t.Run(fmt.Sprintf("%s/%s/%s", typ, c.name, st), func(t *testing.T) {
					err := Check(st, []Schema{{typ, []byte(c.old)}}, Schema{typ, []byte(c.next)})
					if ok && err != nil {
						t.Fatalf("refused: %v", err)
					}
					if !ok && !errors.Is(err, ErrIncompatible) {
						t.Fatalf("got %v, want ErrIncompatible", err)
					}
				})
			}
		}
	}
}

func TestTransitive(t *testing.T) {
	// A history where the latest version alone accepts the next schema
	// and the first does not.
	h0 := rec(`{"name":"id","type":"long"}`)
	next := rec(`{"name":"x","type":"int","default":1}`) // drops id, which h0 needs (no default)
	h1b := rec(`{"name":"id","type":"long","default":0},{"name":"x","type":"int","default":1}`)
	hist := []Schema{{"AVRO", []byte(h0)}, {"AVRO", []byte(h1b)}}
	if err := Check(Forward, hist, Schema{"AVRO", []byte(next)}); err != nil {
		t.Fatalf("FORWARD against the latest: %v", err)
	}
	if err := Check(ForwardTransitive, hist, Schema{"AVRO", []byte(next)}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("FORWARD_TRANSITIVE: %v, want ErrIncompatible (h0 cannot read it)", err)
	}
	if err := Check(FullTransitive, hist, Schema{"AVRO", []byte(next)}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("FULL_TRANSITIVE: %v, want ErrIncompatible", err)
	}
	// BACKWARD_TRANSITIVE: the new schema must read every old version.
	b0 := rec(`{"name":"id","type":"long"},{"name":"a","type":"int"}`)
	b1 := rec(`{"name":"id","type":"long"}`)
	bn := rec(`{"name":"id","type":"long"},{"name":"a","type":"string","default":"x"}`)
	bh := []Schema{{"JSON", []byte(b0)}, {"JSON", []byte(b1)}}
	if err := Check(Backward, bh, Schema{"JSON", []byte(bn)}); err != nil {
		t.Fatalf("BACKWARD: %v", err)
	}
	if err := Check(BackwardTransitive, bh, Schema{"JSON", []byte(bn)}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("BACKWARD_TRANSITIVE: %v, want ErrIncompatible (int a cannot be read as string)", err)
	}
}

func TestResolutionRules(t *testing.T) {
	cases := []struct {
		name           string
		reader, writer string
		ok             bool
	}{
		{"int to long", `"long"`, `"int"`, true},
		{"int to float", `"float"`, `"int"`, true},
		{"long to double", `"double"`, `"long"`, true},
		{"long to int", `"int"`, `"long"`, false},
		{"double to float", `"float"`, `"double"`, false},
		{"string to bytes", `"bytes"`, `"string"`, true},
		{"bytes to string", `"string"`, `"bytes"`, true},
		{"string to int", `"int"`, `"string"`, false},
		{"enum symbol added (reader)", `{"type":"enum","name":"E","symbols":["A","B","C"]}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, true},
		{"enum symbol unknown to reader", `{"type":"enum","name":"E","symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, false},
		{"enum reader default", `{"type":"enum","name":"E","symbols":["A","Z"],"default":"Z"}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, true},
		{"enum renamed", `{"type":"enum","name":"F","symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["A"]}`, false},
		{"enum alias", `{"type":"enum","name":"F","aliases":["E"],"symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["A"]}`, true},
		{"writer union, reader takes all", `["null","long"]`, `["null","int"]`, true},
		{"writer union, reader misses a branch", `"long"`, `["null","long"]`, false},
		{"reader union takes writer", `["null","string"]`, `"string"`, true},
		{"array items promoted", `{"type":"array","items":"long"}`, `{"type":"array","items":"int"}`, true},
		{"map values incompatible", `{"type":"map","values":"int"}`, `{"type":"map","values":"string"}`, false},
		{"fixed size differs", `{"type":"fixed","name":"F","size":4}`, `{"type":"fixed","name":"F","size":8}`, false},
		{"nested record field added without default",
			rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}}`),
			rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}`), false},
		{"nested record field added with default",
			rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string","default":""}]}}`),
			rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}`), true},
		{"field alias", rec(`{"name":"ident","aliases":["id"],"type":"long"}`), rec(`{"name":"id","type":"long"}`), true},
		{"recursive", `{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"],"default":null},{"name":"v","type":"long"}]}`,
			`{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]},{"name":"v","type":"int"}]}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := parse(Schema{"AVRO", []byte(c.reader)})
			if err != nil {
				t.Fatal(err)
			}
			w, err := parse(Schema{"AVRO", []byte(c.writer)})
			if err != nil {
				t.Fatal(err)
			}
			err = CanRead(r, w)
			if c.ok != (err == nil) {
				t.Fatalf("CanRead = %v, want ok %v", err, c.ok)
			}
		})
	}
}

func TestTypesAndInput(t *testing.T) {
	if err := Check(Full, []Schema{{"STRING", nil}}, Schema{"STRING", nil}); err != nil {
		t.Fatalf("same primitive type: %v", err)
	}
	if err := Check(Full, []Schema{{"STRING", nil}}, Schema{"INT64", nil}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("STRING then INT64: %v", err)
	}
	if err := Check(AlwaysCompatible, []Schema{{"STRING", nil}}, Schema{"INT64", nil}); err != nil {
		t.Fatalf("ALWAYS_COMPATIBLE: %v", err)
	}
	if err := Check(AlwaysIncompatible, []Schema{{"STRING", nil}}, Schema{"STRING", nil}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("ALWAYS_INCOMPATIBLE: %v", err)
	}
	if err := Check(AlwaysIncompatible, nil, Schema{"STRING", nil}); err != nil {
		t.Fatalf("ALWAYS_INCOMPATIBLE, first schema: %v", err)
	}
	for _, bad := range []Schema{
		{"WHATEVER", nil},
		{"AVRO", []byte(`{"type":"record"`)},
		{"JSON", []byte(`{"type":"record","name":"X","fields":[{"name":"a","type":"nosuchtype"}]}`)},
		{"AVRO", nil},
	} {
		if err := Check(Full, nil, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %q: %v, want ErrInvalid", bad.Type, bad.Data, err)
		}
	}
	// Named types do not leak from one parse into another.
	if err := Validate(Schema{"AVRO", []byte(v1)}); err != nil {
		t.Fatal(err)
	}
	if err := Validate(Schema{"AVRO", []byte(`{"type":"array","items":"acme.User"}`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a reference to a type defined elsewhere: %v, want ErrInvalid", err)
	}
	for _, s := range []string{"", "UNDEFINED", "FULL", "BACKWARD_TRANSITIVE"} {
		if _, err := ParseStrategy(s); err != nil {
			t.Errorf("ParseStrategy(%q): %v", s, err)
		}
	}
	if _, err := ParseStrategy("Full"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseStrategy(Full): %v", err)
	}
}
