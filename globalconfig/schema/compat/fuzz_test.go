package compat

import "testing"

// FuzzCheck: any pair of definitions is checked without panicking, and
// a definition that parses can always read its own data.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{v1, addDefault, addNoDef, removeField, promote, renamed, toUnion,
		`"int"`, `["null","string"]`, `{"type":"enum","name":"E","symbols":["A"]}`,
		`{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}`,
		`{"type":"map","values":{"type":"array","items":{"type":"fixed","name":"F","size":2}}}`} {
		f.Add([]byte(s), []byte(v1))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		_ = Check(Full, []Schema{{"AVRO", a}}, Schema{"JSON", b})
		_ = Check(FullTransitive, []Schema{{"JSON", a}, {"JSON", b}}, Schema{"JSON", a})
		sa, err := parse(Schema{"AVRO", a})
		if err != nil {
			return
		}
		if err := CanRead(sa, sa); err != nil {
			t.Fatalf("%s cannot read itself: %v", a, err)
		}
		if sb, err := parse(Schema{"AVRO", b}); err == nil {
			_ = CanRead(sa, sb)
		}
	})
}
