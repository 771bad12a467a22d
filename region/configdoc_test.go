package region

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/internal/configdoc"
)

var updateDocs = flag.Bool("update-config-doc", false, "rewrite docs/config.md from the configuration structs")

// configDocHead is the hand-written part of docs/config.md; the reference
// tables after it are generated.
const configDocHead = "<!-- Generated below this line by `go test ./region -run TestConfigReference -update-config-doc`: do not edit the tables by hand. -->\n"

// TestConfigReference: docs/config.md lists every key of the configuration
// file (region.File), with its type, its environment variable and the
// field's doc comment, exactly as the structs say.
func TestConfigReference(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := configdoc.Keys(reflect.TypeOf(File{}), root, "github.com/isobar-mq/isobar")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Doc == "" {
			t.Errorf("key %s has no doc comment", k.Path)
		}
	}
	path := filepath.Join(root, "docs", "config.md")
	raw, err := os.ReadFile(path)
	if err != nil && !*updateDocs {
		t.Fatal(err)
	}
	head, _, found := strings.Cut(string(raw), configDocHead)
	if !found && !*updateDocs {
		t.Fatalf("docs/config.md lacks the line %q", configDocHead)
	}
	want := head + configDocHead + configdoc.Markdown(keys)
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(raw) != want {
		t.Fatalf("docs/config.md is out of date with the configuration structs: run go test ./region -run TestConfigReference -update-config-doc")
	}
}
