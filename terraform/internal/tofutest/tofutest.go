// Package tofutest runs OpenTofu on the repository's modules and examples
// in tests: it finds the tofu binary (scripts/install-tofu.sh), installs
// providers offline through scripts/tofu-mirror.sh, and runs tofu commands
// in a directory, failing the test with tofu's output when one fails.
package tofutest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Root is the repository's root (the directory holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("tofutest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Binary is OpenTofu's path: TF_ACC_TERRAFORM_PATH, or .bin/tofu. The test
// is skipped, naming the script that builds it, when it is not there.
func Binary(t testing.TB) string {
	t.Helper()
	p := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if p == "" {
		p = filepath.Join(Root(t), ".bin", "tofu")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("OpenTofu not found at %s: run scripts/install-tofu.sh (or set TF_ACC_TERRAFORM_PATH)", p)
	}
	return p
}

var mirror struct {
	once sync.Once
	rc   string
	out  []byte
	err  error
}

// CLIConfig runs scripts/tofu-mirror.sh once per test binary and returns
// the CLI configuration it writes.
func CLIConfig(t testing.TB) string {
	t.Helper()
	mirror.once.Do(func() {
		cmd := exec.Command("bash", filepath.Join(Root(t), "scripts", "tofu-mirror.sh"))
		cmd.Stderr = os.Stderr
		mirror.out, mirror.err = cmd.Output()
		lines := strings.Split(strings.TrimSpace(string(mirror.out)), "\n")
		mirror.rc = lines[len(lines)-1]
	})
	if mirror.err != nil {
		t.Fatalf("scripts/tofu-mirror.sh: %v\n%s", mirror.err, mirror.out)
	}
	return mirror.rc
}

// HasAWSProvider reports whether the mirror holds the hashicorp/aws
// provider (this machine carries one; it cannot be downloaded here).
func HasAWSProvider(t testing.TB) bool {
	t.Helper()
	rc := CLIConfig(t)
	_, err := os.Stat(filepath.Join(filepath.Dir(rc), "tofu-plugins", "registry.opentofu.org", "hashicorp", "aws"))
	return err == nil
}

// Tofu runs OpenTofu commands in one directory with the offline CLI
// configuration and extra environment.
type Tofu struct {
	Bin string
	Dir string
	Env []string
}

// New prepares tofu for dir (skipping the test without OpenTofu).
func New(t testing.TB, dir string) *Tofu {
	t.Helper()
	bin := Binary(t)
	rc := CLIConfig(t)
	return &Tofu{Bin: bin, Dir: dir, Env: []string{
		"TF_CLI_CONFIG_FILE=" + rc,
		"CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1",
		"TF_PLUGIN_CACHE_DIR=",
		"NO_COLOR=1",
	}}
}

// Exec runs tofu with args and returns its combined output and error.
func (tf *Tofu) Exec(args ...string) (string, error) {
	if len(args) > 0 && args[0] != "fmt" && args[0] != "version" {
		args = append([]string{args[0], "-no-color"}, args[1:]...)
	}
	cmd := exec.Command(tf.Bin, args...)
	cmd.Dir = tf.Dir
	cmd.Env = append(os.Environ(), tf.Env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// Run runs tofu with args and fails the test, with tofu's output, when it
// fails.
func (tf *Tofu) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := tf.Exec(args...)
	if err != nil {
		t.Fatalf("tofu %s (in %s): %v\n%s", strings.Join(args, " "), tf.Dir, err, out)
	}
	return out
}

// Outputs runs `tofu output -json` and decodes each output's value into
// the matching field of v (a pointer to a map or a struct).
func (tf *Tofu) Outputs(t testing.TB, v any) {
	t.Helper()
	out := tf.Run(t, "output", "-json")
	var raw map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("tofu output -json: %v\n%s", err, out)
	}
	vals := make(map[string]json.RawMessage, len(raw))
	for k, o := range raw {
		vals[k] = o.Value
	}
	b, _ := json.Marshal(vals)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode outputs: %v\n%s", err, b)
	}
}

// CopyDir copies the module or example at src (relative to the
// repository's root) into a new temporary directory and returns it, so
// that tofu's state and lock files are not written into the repository.
// Relative module sources ("../../modules/x") keep working because the
// whole terraform/ tree is copied, keeping its shape.
func CopyDir(t testing.TB, src string) string {
	t.Helper()
	root := Root(t)
	dst := t.TempDir()
	from := filepath.Join(root, "terraform")
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if info.IsDir() {
			switch info.Name() {
			case ".terraform", "provider", "internal":
				if rel != "." {
					return filepath.SkipDir
				}
			}
			return os.MkdirAll(filepath.Join(dst, "terraform", rel), 0o755)
		}
		switch filepath.Ext(p) {
		case ".tf", ".tftpl", ".hcl", ".tfvars", ".sh":
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, "terraform", rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, filepath.Join(root, src))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, rel)
}
