package filewatch

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A changed file is loaded again; one that does not load keeps the
// previous value; with no files the value never changes.
func TestReload(t *testing.T) {
	f := filepath.Join(t.TempDir(), "v")
	os.WriteFile(f, []byte("one"), 0o600)
	load := func() (string, error) {
		b, err := os.ReadFile(f)
		if err == nil && len(b) == 0 {
			err = errors.New("empty")
		}
		return string(b), err
	}
	w, err := New([]string{f}, load)
	if err != nil || w.Get() != "one" {
		t.Fatalf("%v %q", err, w.Get())
	}
	os.WriteFile(f, nil, 0o600)
	for start := time.Now(); time.Since(start) < 2*Interval; time.Sleep(20 * time.Millisecond) {
		if got := w.Get(); got != "one" {
			t.Fatalf("a file that does not load replaced the value: %q", got)
		}
	}
	os.WriteFile(f, []byte("two"), 0o600)
	deadline := time.Now().Add(10 * time.Second)
	for w.Get() != "two" {
		if time.Now().After(deadline) {
			t.Fatal("the changed file was not loaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := New([]string{filepath.Join(t.TempDir(), "absent")}, func() (string, error) { return "", errors.New("no") }); err == nil {
		t.Fatal("a failing first load was accepted")
	}
	fixed, _ := New(nil, func() (int, error) { return 7, nil })
	if fixed.Get() != 7 {
		t.Fatal("fixed value")
	}
}
