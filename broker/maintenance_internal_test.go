package broker

import (
	"reflect"
	"testing"
)

// setNonZero gives v, settable, a value other than its zero value.
func setNonZero(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		setNonZero(t, v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setNonZero(t, k)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setNonZero(t, v.Field(i))
				return
			}
		}
		t.Fatalf("no exported field in %s", v.Type())
	default:
		t.Fatalf("no non-zero value for %s", v.Type())
	}
}

// Every field runtimePolicy takes from a new policy is one
// sameRuntimePolicy compares: otherwise a change of it would not reach a
// loaded topic. Field by field, a policy differing from the zero one in
// that field alone.
func TestRuntimePolicyFields(t *testing.T) {
	ty := reflect.TypeFor[NamespacePolicy]()
	taken := 0
	for i := range ty.NumField() {
		var pol NamespacePolicy
		setNonZero(t, reflect.ValueOf(&pol).Elem().Field(i))
		old := NamespacePolicy{}
		p := runtimePolicy(&old, pol)
		if reflect.DeepEqual(p, old) {
			continue // kept from the load
		}
		taken++
		if sameRuntimePolicy(&p, &old) {
			t.Errorf("%s: taken by runtimePolicy, not compared by sameRuntimePolicy", ty.Field(i).Name)
		}
		// An equal value elsewhere (a new pointer, a new slice) is the same.
		var pol2 NamespacePolicy
		setNonZero(t, reflect.ValueOf(&pol2).Elem().Field(i))
		again := runtimePolicy(&old, pol2)
		if !sameRuntimePolicy(&p, &again) {
			t.Errorf("%s: an equal value is not the same", ty.Field(i).Name)
		}
	}
	if taken == 0 {
		t.Fatal("runtimePolicy takes no field")
	}
}
