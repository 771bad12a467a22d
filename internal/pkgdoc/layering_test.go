package pkgdoc

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/isobar-mq/isobar"

// etcdPrefix is the import path prefix of etcd's Go modules (client,
// server, API).
const etcdPrefix = "go.etcd.io/etcd/"

// moduleImports maps every package of the module (by import path) to the
// module packages its non-test files import, and tells which are commands.
// etcd lists, by package, the files (test files included) that import one
// of etcd's packages.
func moduleImports(t *testing.T) (imports map[string][]string, commands map[string]bool, etcd map[string][]string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s", root)
	}
	out := map[string][]string{}
	commands = map[string]bool{}
	etcd = map[string][]string{}
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := module
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, etcdPrefix) {
				etcd[pkg] = append(etcd[pkg], filepath.Base(path))
				break
			}
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		if f.Name.Name == "main" {
			commands[pkg] = true
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module+"/") && !slices.Contains(out[pkg], p) {
				out[pkg] = append(out[pkg], p)
			}
		}
		return nil
	})
	return out, commands, etcd
}

// deps is every module package pkg links, directly or not.
func deps(imports map[string][]string, pkg string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, d := range imports[p] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(pkg)
	return seen
}

// TestLayering checks the import rules of the architecture: the
// replicator talks to brokers over the wire and links none of the broker,
// the managed ledger or the bookie client; the metadata store is a leaf
// but for the TLS files utilities (its clients and members serve TLS
// like every server), which are leaves themselves;
// only commands import region (composition); only the metadata store
// talks to etcd (every other package, tests included, goes through
// metastore.Meta, where a test can put a fault-injecting wrapper).
func TestLayering(t *testing.T) {
	// leafUtilities may be linked by the leaves ("*" below): TLS from
	// files and the reload-on-change they share.
	leafUtilities := []string{"internal/tlsfiles", "internal/filewatch"}
	imports, commands, etcd := moduleImports(t)
	for pkg, files := range etcd {
		if pkg != module+"/metastore" {
			t.Errorf("%s imports etcd (%s): only metastore may; use metastore.Meta", strings.TrimPrefix(pkg, module+"/"), strings.Join(files, ", "))
		}
	}
	if len(etcd[module+"/metastore"]) == 0 {
		t.Error("metastore imports no etcd package: is the check looking at the right files?")
	}
	forbidden := map[string][]string{
		"replicator":        {"broker", "broker/mledger", "bookie", "bookie/ledger", "bookie/client", "region"},
		"metastore":         {"*"},
		"internal/tlsfiles": {"*"},
		"wire":              {"*"},
		"topic":             {"*"},
		"bookie":            {"broker", "replicator", "region", "globalconfig"},
		"broker":            {"replicator", "region"},
		// The proxy forwards bytes to brokers it finds in the region's
		// registrations: it links no broker, storage or policy code.
		"proxy": {"broker", "broker/mledger", "broker/admin", "bookie", "bookie/ledger", "bookie/client", "replicator", "region", "globalconfig", "globalconfig/policy"},
		// The Terraform provider is a client of the admin REST API: it
		// links no server part.
		"terraform/provider": {"broker", "broker/admin", "bookie", "replicator", "region", "globalconfig", "globalconfig/policy", "metastore"},
	}
	for pkg, bad := range forbidden {
		full := module + "/" + pkg
		if _, ok := imports[full]; !ok {
			t.Errorf("package %s not found", pkg)
			continue
		}
		for d := range deps(imports, full) {
			for _, b := range bad {
				if b == "*" && !strings.HasPrefix(d, full+"/") && !slices.Contains(leafUtilities, strings.TrimPrefix(d, module+"/")) || d == module+"/"+b {
					t.Errorf("%s links %s", pkg, strings.TrimPrefix(d, module+"/"))
				}
			}
		}
	}
	for pkg, imps := range imports {
		if commands[pkg] || strings.HasPrefix(pkg, module+"/region") {
			continue
		}
		if slices.Contains(imps, module+"/region") {
			t.Errorf("%s imports region (composition only: nothing below it may import it)", pkg)
		}
	}
}
