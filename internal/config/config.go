// Package config loads component configuration: defaults, then a YAML file,
// then ISOBAR_* environment variables, then explicitly given command-line
// flags, each overriding the one before. Unknown YAML keys and unparsable
// values are errors that name the field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "ISOBAR_"

// Load fills dst, a pointer to a struct with yaml tags whose fields already
// hold defaults and may be bound to flags in fs. Precedence, lowest first:
// defaults, the YAML file at path (skipped when empty), environment
// variables (ISOBAR_<SECTION>_<FIELD>, upper case, e.g.
// ISOBAR_BOOKIE_JOURNALDIR; fields of an inline struct belong to the
// section that holds it), then flags the user set. An environment
// variable under a known section that names no field is an error, as an
// unknown YAML key is. Lists are comma-separated; maps are
// "key=value,key=value" (a map flag adds its keys to the file's map).
func Load(path string, dst any, fs *pflag.FlagSet, environ []string) error {
	// Flags were parsed into dst already; remember the ones the user set so
	// they can be applied again on top of the file and the environment.
	changed := map[string]string{}
	if fs != nil {
		fs.Visit(func(f *pflag.Flag) { changed[f.Name] = f.Value.String() })
	}
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(dst); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("config: %s: %w", path, err)
		}
	}
	env := envMap(environ)
	used := map[string]bool{}
	if err := applyEnv(reflect.ValueOf(dst).Elem(), EnvPrefix, env, used); err != nil {
		return err
	}
	if err := unknownEnv(reflect.ValueOf(dst).Elem().Type(), env, used); err != nil {
		return err
	}
	if fs != nil {
		for name, val := range changed {
			f := fs.Lookup(name)
			if f.Value.Type() == "stringToString" {
				val = strings.Trim(val, "[]")
			}
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				if err := sv.Replace(splitList(strings.Trim(val, "[]"))); err != nil {
					return fmt.Errorf("config: flag --%s: %w", name, err)
				}
				continue
			}
			if err := f.Value.Set(val); err != nil {
				return fmt.Errorf("config: flag --%s: %w", name, err)
			}
		}
	}
	return nil
}

func envMap(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			m[k] = v
		}
	}
	return m
}

var durationType = reflect.TypeOf(time.Duration(0))

// applyEnv walks the struct and sets every field that has an environment
// variable named after its yaml path, marking the variables it used.
func applyEnv(v reflect.Value, prefix string, env map[string]string, used map[string]bool) error {
	t := v.Type()
	var errs []error
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, inline, skip := fieldName(sf)
		if skip {
			continue
		}
		fv := v.Field(i)
		if inline {
			if err := applyEnv(fv, prefix, env, used); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		key := prefix + strings.ToUpper(name)
		if fv.Kind() == reflect.Struct && fv.Type() != durationType {
			if err := applyEnv(fv, key+"_", env, used); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		raw, ok := env[key]
		if !ok {
			continue
		}
		used[key] = true
		if err := setValue(fv, raw); err != nil {
			errs = append(errs, fmt.Errorf("config: %s=%q: %w", key, raw, err))
		}
	}
	return errors.Join(errs...)
}

// fieldName is a struct field's yaml name, whether it is inline, and
// whether it is not configuration at all (yaml "-").
func fieldName(sf reflect.StructField) (name string, inline, skip bool) {
	parts := strings.Split(sf.Tag.Get("yaml"), ",")
	if parts[0] == "-" {
		return "", false, true
	}
	for _, p := range parts[1:] {
		if p == "inline" {
			return "", true, false
		}
	}
	if parts[0] == "" {
		return sf.Name, false, false
	}
	return parts[0], false, false
}

// unknownEnv reports ISOBAR_<SECTION>_... variables under a section of t
// (a top-level struct field) that set nothing.
func unknownEnv(t reflect.Type, env map[string]string, used map[string]bool) error {
	var prefixes []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, skip := fieldName(sf)
		if skip || !sf.IsExported() || sf.Type.Kind() != reflect.Struct || sf.Type == durationType {
			continue
		}
		prefixes = append(prefixes, EnvPrefix+strings.ToUpper(name)+"_")
	}
	var bad []string
	for k := range env {
		if used[k] {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				bad = append(bad, k)
				break
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("config: unknown environment variables %s (no such setting)", strings.Join(bad, ", "))
}

func setValue(fv reflect.Value, raw string) error {
	switch {
	case fv.Type() == durationType:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return err
		}
		fv.SetInt(int64(d))
		return nil
	case fv.Kind() == reflect.String:
		fv.SetString(raw)
	case fv.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return err
		}
		fv.SetBool(b)
	case fv.Kind() >= reflect.Int && fv.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return err
		}
		fv.SetInt(n)
	case fv.Kind() >= reflect.Uint && fv.Kind() <= reflect.Uint64:
		n, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			return err
		}
		fv.SetUint(n)
	case fv.Kind() == reflect.Float64 || fv.Kind() == reflect.Float32:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return err
		}
		fv.SetFloat(f)
	case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
		fv.Set(reflect.ValueOf(splitList(raw)))
	case fv.Kind() == reflect.Map && fv.Type().Key().Kind() == reflect.String && fv.Type().Elem().Kind() == reflect.String:
		m := map[string]string{}
		for _, kv := range splitList(raw) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q is not key=value", kv)
			}
			m[k] = v
		}
		fv.Set(reflect.ValueOf(m))
	default:
		return fmt.Errorf("unsupported field type %s", fv.Type())
	}
	return nil
}

func splitList(raw string) []string {
	var out []string
	for _, p := range strings.Split(raw, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
