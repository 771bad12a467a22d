package provider

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/ from the schemas and examples/")

// TestDocs checks that docs/ (the registry layout: index.md,
// resources/<name>.md, data-sources/<name>.md) is what the schemas and
// examples/ make; `go test ./terraform/provider -run TestDocs -update`
// rewrites it.
func TestDocs(t *testing.T) {
	want := generateDocs(t)
	if *updateDocs {
		os.RemoveAll("docs")
		for path, text := range want {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for path, text := range want {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != text {
			t.Errorf("%s is stale or missing: run go test ./terraform/provider -run TestDocs -update", path)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../examples/multi-region/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```terraform\n"+string(example)+"```") {
		t.Error("terraform/README.md does not show terraform/examples/multi-region/main.tf as it is: copy the file into it")
	}
	filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if _, ok := want[path]; !ok {
				t.Errorf("%s is not made from any schema: run go test ./terraform/provider -run TestDocs -update", path)
			}
		}
		return nil
	})
}

// docAttribute is what the docs need of an attribute of any schema.
type docAttribute interface {
	GetMarkdownDescription() string
	IsRequired() bool
	IsOptional() bool
	IsComputed() bool
	IsSensitive() bool
	GetType() attr.Type
}

func generateDocs(t *testing.T) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	p := New("docs")()
	var ps provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &ps)
	attrs := map[string]docAttribute{}
	for n, a := range ps.Schema.Attributes {
		attrs[n] = a
	}
	var b strings.Builder
	fmt.Fprintf(&b, "---\npage_title: \"Provider: Isobar\"\ndescription: |-\n  %s\n---\n\n# Isobar Provider\n\n%s\n\n", ps.Schema.MarkdownDescription, ps.Schema.MarkdownDescription)
	b.WriteString("Resources: " + strings.Join(mapNames(kindNames(), "resources"), ", ") + ". A data source of the same name reads each.\n\n")
	writeExample(t, &b, "Example Usage", "provider/provider.tf", "terraform")
	writeSchema(&b, attrs)
	out["docs/index.md"] = b.String()

	for i, k := range kinds {
		name := kindNames()[i]
		short := strings.TrimPrefix(name, "isobar_")
		r := k.resource()
		var rs resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &rs)
		attrs := map[string]docAttribute{}
		for n, a := range rs.Schema.Attributes {
			attrs[n] = a
		}
		b.Reset()
		fmt.Fprintf(&b, "---\npage_title: \"%s Resource - terraform-provider-isobar\"\ndescription: |-\n  %s\n---\n\n# %s (Resource)\n\n%s\n\n",
			name, firstLine(rs.Schema.MarkdownDescription), name, rs.Schema.MarkdownDescription)
		writeExample(t, &b, "Example Usage", "resources/"+name+"/resource.tf", "terraform")
		writeSchema(&b, attrs)
		writeExample(t, &b, "Import", "resources/"+name+"/import.sh", "shell")
		out["docs/resources/"+short+".md"] = b.String()

		d := k.dataSource()
		var ds datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &ds)
		attrs = map[string]docAttribute{}
		for n, a := range ds.Schema.Attributes {
			attrs[n] = a
		}
		b.Reset()
		fmt.Fprintf(&b, "---\npage_title: \"%s Data Source - terraform-provider-isobar\"\ndescription: |-\n  %s\n---\n\n# %s (Data Source)\n\n%s\n\n",
			name, firstLine(ds.Schema.MarkdownDescription), name, ds.Schema.MarkdownDescription)
		writeExample(t, &b, "Example Usage", "data-sources/"+name+"/data-source.tf", "terraform")
		writeSchema(&b, attrs)
		out["docs/data-sources/"+short+".md"] = b.String()
	}
	return out
}

func mapNames(names []string, dir string) []string {
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("[`%s`](%s/%s.md)", n, dir, strings.TrimPrefix(n, "isobar_")))
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func writeExample(t *testing.T, b *strings.Builder, title, path, lang string) {
	fmt.Fprintf(b, "## %s\n\n```%s\n%s```\n\n", title, lang, example(t, path))
}

// writeSchema lists the attributes as the registry does: required,
// optional, read-only, then a section for each nested object.
func writeSchema(b *strings.Builder, attrs map[string]docAttribute) {
	b.WriteString("## Schema\n\n")
	nested := writeAttributes(b, "", attrs)
	for len(nested) > 0 {
		n := nested[0]
		nested = nested[1:]
		fmt.Fprintf(b, "<a id=\"nestedatt--%s\"></a>\n### Nested Schema for `%s`\n\n", strings.ReplaceAll(n.path, ".", "--"), n.path)
		nested = append(nested, writeAttributes(b, n.path, n.attrs)...)
	}
}

type nestedDoc struct {
	path  string
	attrs map[string]docAttribute
}

func writeAttributes(b *strings.Builder, parent string, attrs map[string]docAttribute) []nestedDoc {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range attrs {
			if !yield(n) {
				return
			}
		}
	})
	var nested []nestedDoc
	groups := []struct {
		title string
		in    func(docAttribute) bool
	}{
		{"Required", func(a docAttribute) bool { return a.IsRequired() }},
		{"Optional", func(a docAttribute) bool { return a.IsOptional() }},
		{"Read-Only", func(a docAttribute) bool { return a.IsComputed() && !a.IsOptional() && !a.IsRequired() }},
	}
	for _, g := range groups {
		var lines []string
		for _, n := range names {
			a := attrs[n]
			if !g.in(a) {
				continue
			}
			path := n
			if parent != "" {
				path = parent + "." + n
			}
			typ := typeName(a.GetType())
			if sub := nestedAttributes(a); sub != nil {
				typ += fmt.Sprintf(", see [below for nested schema](#nestedatt--%s)", strings.ReplaceAll(path, ".", "--"))
				nested = append(nested, nestedDoc{path, sub})
			}
			if a.IsSensitive() {
				typ += ", Sensitive"
			}
			lines = append(lines, fmt.Sprintf("- `%s` (%s) %s", n, typ, a.GetMarkdownDescription()))
		}
		if len(lines) > 0 {
			fmt.Fprintf(b, "### %s\n\n%s\n\n", g.title, strings.Join(lines, "\n"))
		}
	}
	return nested
}

// nestedAttributes are the attributes of a nested attribute's object, nil
// for any other attribute.
func nestedAttributes(a docAttribute) map[string]docAttribute {
	out := map[string]docAttribute{}
	switch a := a.(type) {
	case rschema.SingleNestedAttribute:
		for n, x := range a.Attributes {
			out[n] = x
		}
	case rschema.MapNestedAttribute:
		for n, x := range a.NestedObject.Attributes {
			out[n] = x
		}
	case dschema.SingleNestedAttribute:
		for n, x := range a.Attributes {
			out[n] = x
		}
	case dschema.MapNestedAttribute:
		for n, x := range a.NestedObject.Attributes {
			out[n] = x
		}
	case pschema.SingleNestedAttribute:
		for n, x := range a.Attributes {
			out[n] = x
		}
	default:
		return nil
	}
	return out
}

func typeName(t attr.Type) string {
	switch t := t.(type) {
	case basetypes.StringType:
		return "String"
	case basetypes.Int64Type, basetypes.Float64Type:
		return "Number"
	case basetypes.BoolType:
		return "Boolean"
	case basetypes.SetType:
		return "Set of " + typeName(t.ElemType)
	case basetypes.ListType:
		return "List of " + typeName(t.ElemType)
	case basetypes.MapType:
		return "Map of " + typeName(t.ElemType)
	case basetypes.ObjectType:
		return "Attributes"
	}
	return t.String()
}
