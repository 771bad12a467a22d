// Package configdoc renders the reference of every configuration key
// (docs/config.md) from the configuration structs themselves: the key
// paths and types come from their yaml tags by reflection, the text from
// the fields' doc comments in the source. A test in package region checks
// that docs/config.md is what Render makes, so the reference cannot drift
// from the code.
package configdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// Key is one configuration key.
type Key struct {
	Path string // dotted yaml path, e.g. broker.ledger.maxEntriesPerLedger
	Env  string // its environment variable
	Type string
	Doc  string
}

// Keys lists every key of the struct type t (yaml tags, inline structs
// flattened into their section), with the doc comments of the fields
// found in the source under root (the module root) for module.
func Keys(t reflect.Type, root, module string) ([]Key, error) {
	docs := map[string]map[string]string{} // pkg path -> "Type.Field" -> doc
	var out []Key
	var walk func(t reflect.Type, prefix, env string) error
	walk = func(t reflect.Type, prefix, env string) error {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			parts := strings.Split(f.Tag.Get("yaml"), ",")
			if parts[0] == "-" {
				continue
			}
			inline := len(parts) > 1 && parts[1] == "inline"
			if inline {
				if err := walk(f.Type, prefix, env); err != nil {
					return err
				}
				continue
			}
			name := parts[0]
			if name == "" {
				name = f.Name
			}
			path, ev := name, "ISOBAR_"+strings.ToUpper(name)
			if prefix != "" {
				path, ev = prefix+"."+name, env+"_"+strings.ToUpper(name)
			}
			doc, err := fieldDoc(docs, t, f.Name, root, module)
			if err != nil {
				return err
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				if prefix == "" {
					out = append(out, Key{Path: path, Doc: doc, Type: "section"})
				}
				if err := walk(f.Type, path, ev); err != nil {
					return err
				}
				continue
			}
			out = append(out, Key{Path: path, Env: ev, Type: typeName(f.Type), Doc: doc})
		}
		return nil
	}
	if err := walk(t, "", ""); err != nil {
		return nil, err
	}
	return out, nil
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + typeName(t.Key()) + " to " + typeName(t.Elem())
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		return "number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	}
	return t.Kind().String()
}

// fieldDoc returns the doc comment of field name of struct t, parsing the
// package's source once. Comments shared by fields declared together
// ("A, B int") are the same for each.
func fieldDoc(cache map[string]map[string]string, t reflect.Type, field, root, module string) (string, error) {
	pkg := t.PkgPath()
	if !strings.HasPrefix(pkg, module) {
		return "", nil
	}
	m, ok := cache[pkg]
	if !ok {
		m = map[string]string{}
		dir := filepath.Join(root, strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/"))
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
		if err != nil {
			return "", fmt.Errorf("configdoc: parse %s: %w", dir, err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					ts, ok := n.(*ast.TypeSpec)
					if !ok {
						return true
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						return true
					}
					prev := ""
					for _, fl := range st.Fields.List {
						text := clean(fl.Doc.Text())
						for _, nm := range fl.Names {
							// A field declared right after a comment that
							// names it ("A and B are ...") shares it.
							if text == "" && strings.Contains(prev, nm.Name) {
								text = prev
							}
							m[ts.Name.Name+"."+nm.Name] = text
						}
						prev = text
					}
					return true
				})
			}
		}
		cache[pkg] = m
	}
	return m[t.Name()+"."+field], nil
}

// clean joins a comment's lines into one paragraph.
func clean(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Markdown renders keys as the body of docs/config.md: a table per
// top-level section.
func Markdown(keys []Key) string {
	var b strings.Builder
	row := func(k Key) {
		doc := strings.ReplaceAll(k.Doc, "|", `\|`)
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", k.Path, k.Type, k.Env, doc)
	}
	header := "| key | type | environment | meaning |\n|---|---|---|---|\n"
	fmt.Fprintf(&b, "\n## Top level\n\n%s", header)
	for _, k := range keys {
		if k.Type != "section" && !strings.Contains(k.Path, ".") {
			row(k)
		}
	}
	for _, k := range keys {
		if k.Type != "section" && !strings.Contains(k.Path, ".") {
			continue
		}
		if k.Type == "section" {
			fmt.Fprintf(&b, "\n## `%s`\n\n%s\n\n%s", k.Path, k.Doc, header)
			continue
		}
		row(k)
	}
	return b.String()
}
