package pkgdoc

import (
	"go/parser"
	"go/token"
	"io/fs"
	"iter"
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
// of etcd's packages. tests maps every package to the module packages its
// test files (of the package and of its _test package) import, other than
// itself, each with the files that import it.
func moduleImports(t *testing.T) (imports map[string][]string, commands map[string]bool, etcd map[string][]string, tests map[string]map[string][]string) {
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
	tests = map[string]map[string][]string{}
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
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, module+"/") && p != pkg {
					if tests[pkg] == nil {
						tests[pkg] = map[string][]string{}
					}
					tests[pkg][p] = append(tests[pkg][p], filepath.Base(path))
				}
			}
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
	return out, commands, etcd, tests
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

// under reports whether pkg is the package p or one of its sub-packages
// (both import paths).
func under(pkg, p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }

// forbidden are the import rules of the architecture: a package, and
// every package under it, links none of the packages listed, nor any
// package under them; "*" means nothing of the module but the package's
// own sub-packages and the leaf utilities.
var forbidden = map[string][]string{
	"replicator":        {"broker", "bookie", "region", "internal/natsembed"},
	"metastore":         {"*"},
	"internal/tlsfiles": {"*"},
	// The leaf utilities are leaves themselves.
	"internal/filewatch":  {"*"},
	"internal/atomicfile": {"*"},
	"internal/faultrule":  {"*"},
	"wire":                {"*"},
	"errkind":             {"*"},
	"topic":               {"*"},
	// The admin API's types and the interfaces its server needs of the
	// broker: shared by the server, the broker and the CLI, they link no
	// server code (nor net/http: noNetHTTP below), only topic names and
	// error kinds (leafAllowed).
	"broker/adminapi": {"*"},
	// The console is static files; its data comes from the admin API in
	// the browser, so it links nothing of the broker.
	"console": {"*"},
	// The transaction coordinator's driver reaches the managed ledger and
	// the broker only through its Log and Ender interfaces (leafAllowed:
	// its pure core and what that links).
	"broker/txncoord": {"*"},
	// Storage, policy and authentication code ties its errors to
	// errkind's kinds; it does not link the protocol codec.
	"auth":             {"wire"},
	"broker/mledger":   {"wire"},
	"broker/ownership": {"wire"},
	"broker/dynconfig": {"wire"},
	"globalconfig":     {"wire"},
	"bookie":           {"broker", "replicator", "region", "globalconfig"},
	// The broker implements the admin API (broker/adminapi); it does not
	// link the HTTP server that serves it, which region wires to it
	// (broker/admin itself is under broker and trivially keeps the rule).
	"broker": {"replicator", "region", "broker/admin"},
	// The proxy forwards bytes to brokers it finds in the region's
	// registrations (the region hands them over as proxy.Broker): it
	// links no broker, storage or policy code.
	"proxy": {"broker", "bookie", "replicator", "region", "globalconfig"},
	// The Terraform provider is a client of the admin REST API: it
	// links no server part.
	"terraform/provider": {"broker", "bookie", "replicator", "region", "roles", "globalconfig", "metastore"},
	// The single roles (one process each) are what region composes: they
	// link no composition.
	"roles": {"region"},
}

// knownTestImports are the test files that break a rule of forbidden
// (by package, then import): known, and listed so that no new ones
// appear. An entry that no longer matches fails too, so the list only
// shrinks. What the listed import links is not checked further.
var knownTestImports = map[string]map[string]string{
	// The Transport contract runs against a real NATS server as well as
	// the in-memory fake, so that the fake behaves as NATS does.
	"replicator": {"internal/natsembed": "transport_test.go: the Transport contract against a real NATS server"},
	// BenchmarkIdleTopics and BenchmarkManyTopics (scale_test.go,
	// manytopics_test.go) measure a broker as the region composes it
	// (roles.NewBroker: ownership registry, policies, listeners) over a
	// region's storage run in a child process (region.Start with no
	// brokers; scale_test.go's TestMain, which every test of the package
	// goes through); BenchmarkManyTopics calls Broker.MaintainOnce from
	// broker/export_test.go, so it cannot simply move into region.
	//
	// A few tests put the admin server in front of a real broker, as
	// region does: its fuzz test, and the namespace affinity, error
	// answer and namespace schema tests.
	"broker": {
		"region":       "scale_test.go, manytopics_test.go: the million-topic benchmarks run a composed broker over a region's storage",
		"roles":        "manytopics_test.go: the million-topic benchmark's broker is the broker role",
		"broker/admin": "adminfuzz_test.go, affinity_test.go, errors_test.go, nsschema_test.go: the admin server in front of a real broker",
	},
	// The chart's tests load each rendered process's configuration with
	// the region's file type and validation (region.File), as the
	// processes will; they start no region (the Docker test runs the
	// built image).
	"deploy/helm": {"region": "helm_test.go: rendered configuration loaded as region.File and validated"},
	// The proxy's tests put it (the proxy role) in front of a real
	// region's brokers (harness_test.go).
	"proxy": {
		"region": "harness_test.go: a real region's storage",
		"roles":  "harness_test.go: the broker and proxy roles on it",
	},
	// The provider's acceptance tests run against a real region; one test
	// checks that the provider's copies of the server's tables (the
	// permission actions, the longest role) still match them.
	"terraform/provider": {
		"region":              "acc_test.go, replication_test.go: acceptance tests against a real region",
		"globalconfig/policy": "permission_test.go: the provider's copies of policy.AuthActions and MaxRoleLen match",
	},
	// pulsarconn is the replicator's Pulsar client; its tests talk to a
	// real broker (pulsarconn_test.go), with its ledgers on real bookies
	// and its namespace policies.
	"replicator/pulsarconn": {
		"broker":               "pulsarconn_test.go: a real broker to talk to",
		"bookie/ledger":        "the broker's ledgers",
		"internal/testcluster": "the bookies the ledgers are on",
		"globalconfig/policy":  "the broker's namespace policies",
	},
}

// TestLayering checks the import rules of the architecture: the
// replicator talks to brokers over the wire and links no broker or bookie
// package; the metadata store is a leaf but for the leaf utilities (TLS
// files: its clients and members serve TLS like every server);
// the admin API's types (broker/adminapi) link only topic and errkind,
// and the broker does not link the admin HTTP server;
// only commands import region (composition), and only commands and
// region the single roles (roles); only the metadata store
// talks to etcd (every other package, tests included, goes through
// metastore.Meta, where a test can put a fault-injecting wrapper).
// A rule on a package holds for its sub-packages, and what it forbids
// includes the forbidden packages' sub-packages. The named rules hold
// for test files too (what they import and what that links), but for
// knownTestImports; the leaf rules ("*") do not: tests may use helpers.
func TestLayering(t *testing.T) {
	// leafUtilities may be linked by the leaves ("*" above): TLS from
	// files, the reload-on-change they share, and atomic file writes.
	leafUtilities := []string{"internal/tlsfiles", "internal/filewatch", "internal/atomicfile"}
	// leafAllowed are the module packages a leaf may link besides its
	// own sub-packages and leafUtilities: the protocol codec maps the
	// error kinds, which import nothing of ours.
	leafAllowed := map[string][]string{
		"wire":            {"errkind"},
		"broker/adminapi": {"errkind", "topic"},
		// The metadata store's fault injector (metafault) counts with
		// the rule counter the in-memory ledgers' injector shares.
		"metastore":       {"internal/faultrule"},
		"broker/txncoord": {"broker/txn", "broker/mledger/ackset", "errkind"},
	}
	imports, commands, etcd, tests := moduleImports(t)
	for pkg, files := range etcd {
		if pkg != module+"/metastore" {
			t.Errorf("%s imports etcd (%s): only metastore may; use metastore.Meta", strings.TrimPrefix(pkg, module+"/"), strings.Join(files, ", "))
		}
	}
	if len(etcd[module+"/metastore"]) == 0 {
		t.Error("metastore imports no etcd package: is the check looking at the right files?")
	}
	// breaks reports whether pkg, under the rule of subject, may not
	// link d.
	breaks := func(subject, d string, bad []string) (bool, string) {
		full := module + "/" + subject
		for _, b := range bad {
			if b == "*" && !under(d, full) && !slices.Contains(leafUtilities, strings.TrimPrefix(d, module+"/")) && !slices.Contains(leafAllowed[subject], strings.TrimPrefix(d, module+"/")) {
				return true, "*"
			}
			if b != "*" && under(d, module+"/"+b) {
				return true, b
			}
		}
		return false, ""
	}
	usedKnown := map[[2]string]bool{}
	for subject, bad := range forbidden {
		full := module + "/" + subject
		if _, ok := imports[full]; !ok {
			t.Errorf("package %s not found", subject)
			continue
		}
		var named []string // the rules that hold for test files too
		for _, b := range bad {
			if b != "*" {
				named = append(named, b)
			}
		}
		for pkg := range imports {
			if !under(pkg, full) {
				continue
			}
			short := strings.TrimPrefix(pkg, module+"/")
			for d := range deps(imports, pkg) {
				if ok, rule := breaks(subject, d, bad); ok {
					t.Errorf("%s links %s (rule %s: %s)", short, strings.TrimPrefix(d, module+"/"), subject, rule)
				}
			}
			for imp, files := range tests[pkg] {
				shortImp := strings.TrimPrefix(imp, module+"/")
				if _, ok := knownTestImports[short][shortImp]; ok {
					usedKnown[[2]string{short, shortImp}] = true
					continue
				}
				linked := deps(imports, imp)
				linked[imp] = true
				for d := range linked {
					if ok, rule := breaks(subject, d, named); ok && !under(d, pkg) {
						t.Errorf("tests of %s (%s) import %s, which is or links %s (rule %s: %s)", short, strings.Join(files, ", "), shortImp, strings.TrimPrefix(d, module+"/"), subject, rule)
					}
				}
			}
		}
	}
	// Tests importing region or roles are checked below, not by a rule
	// above: their known entries are in use when the import is there.
	for pkg, imps := range tests {
		short := strings.TrimPrefix(pkg, module+"/")
		for _, imp := range []string{"region", "roles"} {
			if _, ok := imps[module+"/"+imp]; ok {
				usedKnown[[2]string{short, imp}] = true
			}
		}
	}
	for pkg, m := range knownTestImports {
		for imp := range m {
			if !usedKnown[[2]string{pkg, imp}] {
				t.Errorf("knownTestImports lists %s tests importing %s, which they no longer do: remove the entry", pkg, imp)
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
	for pkg, imps := range imports {
		if commands[pkg] || under(pkg, module+"/region") || under(pkg, module+"/roles") {
			continue
		}
		if slices.Contains(imps, module+"/roles") {
			t.Errorf("%s imports roles (only commands and region run roles)", pkg)
		}
	}
	// Tests may stand up a region only where a rule above lets them (or
	// lists them): region's own, the commands', and the process tests'.
	for pkg, imps := range tests {
		short := strings.TrimPrefix(pkg, module+"/")
		if commands[pkg] || under(pkg, module+"/region") || pkg == module+"/internal/proctest" {
			continue
		}
		if files, ok := imps[module+"/region"]; ok {
			if _, known := knownTestImports[short]["region"]; !known {
				t.Errorf("tests of %s (%s) import region: only region's, the commands' and internal/proctest's tests compose a region", short, strings.Join(files, ", "))
			}
		}
		if files, ok := imps[module+"/roles"]; ok && !under(pkg, module+"/roles") {
			if _, known := knownTestImports[short]["roles"]; !known {
				t.Errorf("tests of %s (%s) import roles: only region's, the commands' and internal/proctest's tests run a role", short, strings.Join(files, ", "))
			}
		}
	}
}

// notImported are imports a package's own files (tests included) may not
// make, though it may link the imported package through another: the
// CLI is a client of the admin REST API and takes the API's types from
// broker/adminapi, not from the HTTP server (which the one binary links
// through region, to run brokers).
var notImported = map[string][]string{
	"cmd/isobar": {"broker/admin"},
}

func TestNotImported(t *testing.T) {
	imports, _, _, tests := moduleImports(t)
	for pkg, bad := range notImported {
		full := module + "/" + pkg
		if _, ok := imports[full]; !ok {
			t.Errorf("package %s not found", pkg)
			continue
		}
		for _, b := range bad {
			if slices.Contains(imports[full], module+"/"+b) {
				t.Errorf("%s imports %s", pkg, b)
			}
			if files, ok := tests[full][module+"/"+b]; ok {
				t.Errorf("tests of %s (%s) import %s", pkg, strings.Join(files, ", "), b)
			}
		}
	}
}

// noNetHTTP are packages that neither import net/http nor link a
// package of the module that does: the admin API's types and
// interfaces, which the broker implements and the CLI decodes, are no
// part of the HTTP layer.
var noNetHTTP = []string{"broker/adminapi"}

// fileImports yields every import (file name, import path) of the
// non-test files of the module package pkg (an import path), with the
// module root at root.
func fileImports(t *testing.T, root, pkg string) iter.Seq2[string, string] {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")))
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	type imp struct{ file, path string }
	var all []imp
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range f.Imports {
			p, _ := strconv.Unquote(i.Path.Value)
			all = append(all, imp{filepath.Base(path), p})
		}
	}
	return func(yield func(string, string) bool) {
		for _, i := range all {
			if !yield(i.file, i.path) {
				return
			}
		}
	}
}

func TestNoNetHTTP(t *testing.T) {
	imports, _, _, _ := moduleImports(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range noNetHTTP {
		full := module + "/" + pkg
		if _, ok := imports[full]; !ok {
			t.Errorf("package %s not found", pkg)
			continue
		}
		linked := deps(imports, full)
		linked[full] = true
		for d := range linked {
			for file, p := range fileImports(t, root, d) {
				if !under(p, "net/http") {
					continue
				}
				if d == full {
					t.Errorf("%s: %s imports %s", pkg, file, p)
				} else {
					t.Errorf("%s links %s, whose %s imports %s", pkg, strings.TrimPrefix(d, module+"/"), file, p)
				}
			}
		}
	}
}

// cores are the pure cores (docs/architecture.md): state machines that
// do no I/O, take no lock and read no clock, driven by a package that
// does. Each may link only the module packages listed, and may import
// none of the standard library's packages for I/O, locks or processes.
var cores = map[string][]string{
	"broker/dispatch":       {"broker/mledger/ackset", "topic"},
	"broker/mledger/ackset": nil,
	"broker/txn":            {"broker/mledger/ackset", "errkind"},
	"replicator/frame":      nil,
	"replicator/zdict":      nil,
}

// coreForbiddenStd are the standard library packages a core may not
// import.
var coreForbiddenStd = []string{"os", "net", "net/http", "sync", "sync/atomic", "io/fs", "os/exec", "context", "log", "log/slog"}

func TestCores(t *testing.T) {
	imports, _, _, _ := moduleImports(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for core, allowed := range cores {
		full := module + "/" + core
		if _, ok := imports[full]; !ok {
			t.Errorf("core %s not found", core)
			continue
		}
		for d := range deps(imports, full) {
			short := strings.TrimPrefix(d, module+"/")
			if !slices.Contains(allowed, short) {
				t.Errorf("core %s links %s; it may link only %v", core, short, allowed)
			}
		}
		for file, p := range fileImports(t, root, full) {
			if slices.Contains(coreForbiddenStd, p) {
				t.Errorf("core %s: %s imports %s (no I/O, locks or processes in a core)", core, file, p)
			}
		}
	}
}

// testSupport are packages for tests only: fakes and suites. No
// package's production files import them, but other test-support
// packages.
var testSupport = []string{
	"broker/mledger/memledger",
	"broker/mledger/ledgers/ledgerstest",
	"internal/faultrule",
	"internal/payloadgen",
	"internal/testcluster",
	"internal/tlsfiles/tlstest",
	"metastore/metafault",
}

func TestTestSupportOnlyInTests(t *testing.T) {
	imports, _, _, _ := moduleImports(t)
	for pkg, imps := range imports {
		short := strings.TrimPrefix(pkg, module+"/")
		if slices.Contains(testSupport, short) {
			continue
		}
		for _, imp := range imps {
			if s := strings.TrimPrefix(imp, module+"/"); slices.Contains(testSupport, s) {
				t.Errorf("%s imports %s, which is for tests only", short, s)
			}
		}
	}
}
