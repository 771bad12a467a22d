// Package filewatch keeps a value loaded from files up to date: it loads
// the value again when one of the files changes (looked at, at most, once
// per Interval, when the value is asked for), and keeps the previous value
// when the new files do not load (half written, say). Keys and
// certificates rotate this way without a restart.
package filewatch

import (
	"os"
	"slices"
	"sync"
	"time"
)

// Interval is the most often the files are looked at.
const Interval = time.Second

// stamp identifies a version of a file.
type stamp struct {
	mod  time.Time
	size int64
}

func stamps(files []string) []stamp {
	out := make([]stamp, len(files))
	for i, f := range files {
		if fi, err := os.Stat(f); err == nil {
			out[i] = stamp{fi.ModTime(), fi.Size()}
		}
	}
	return out
}

// Value is a value loaded from files.
type Value[T any] struct {
	files []string
	load  func() (T, error)

	mu      sync.Mutex
	v       T
	seen    []stamp
	checked time.Time
}

// New loads the value now (its error is New's) and watches files; with no
// files the value never changes.
func New[T any](files []string, load func() (T, error)) (*Value[T], error) {
	seen := stamps(files)
	v, err := load()
	if err != nil {
		return nil, err
	}
	return &Value[T]{files: files, load: load, v: v, seen: seen, checked: time.Now()}, nil
}

// Get returns the value, loading it again first when a file changed.
func (w *Value[T]) Get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.files) == 0 || time.Since(w.checked) < Interval {
		return w.v
	}
	w.checked = time.Now()
	now := stamps(w.files)
	if slices.Equal(now, w.seen) {
		return w.v
	}
	if v, err := w.load(); err == nil {
		w.v, w.seen = v, now
	}
	return w.v
}
