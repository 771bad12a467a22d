package atomicfile_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/isobar-mq/isobar/internal/atomicfile"
)

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, tc := range []struct {
		data string
		perm os.FileMode
	}{{"first", 0o644}, {"second, longer than the first", 0o600}, {"", 0o640}} {
		if err := atomicfile.Write(path, []byte(tc.data), tc.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tc.data {
			t.Fatalf("read %q, %v: want %q", got, err, tc.data)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != tc.perm {
			t.Fatalf("mode %v, %v: want %v", fi.Mode().Perm(), err, tc.perm)
		}
		if n := names(t, dir); !slices.Equal(n, []string{"state.json"}) {
			t.Fatalf("directory holds %q: want only the file", n)
		}
	}
}

// A relative path writes in the current directory.
func TestWriteRelative(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := atomicfile.Write("f", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile("f"); err != nil || string(got) != "x" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// A failure leaves the target as it was and no temporary file behind.
func TestWriteFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	// The rename fails: the target is a directory that is not empty.
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(target, []byte("data"), 0o600); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if n := names(t, dir); !slices.Equal(n, []string{"target"}) {
		t.Fatalf("directory holds %q after the failure: want only the target", n)
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("target changed: %v, %v", fi, err)
	}

	// The directory does not exist: nothing is created.
	if err := atomicfile.Write(filepath.Join(dir, "missing", "f"), []byte("data"), 0o600); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
	if n := names(t, dir); !slices.Equal(n, []string{"target"}) {
		t.Fatalf("directory holds %q: want only the target", n)
	}
}
