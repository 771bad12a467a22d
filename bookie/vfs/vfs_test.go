package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// tester is the part of testing.TB the suite uses, so a sweep can run it
// with failures expected.
type tester interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// fakeT turns a fatal suite failure into a panic the sweep recovers.
type fakeT struct{}

var errFakeFatal = errors.New("suite failed")

func (fakeT) Helper()               {}
func (fakeT) Fatal(...any)          { panic(errFakeFatal) }
func (fakeT) Fatalf(string, ...any) { panic(errFakeFatal) }

// fsSuite is the behaviour every FS must share; it runs against each
// implementation.
func fsSuite(t tester, fsys FS, dir string) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d := filepath.Join(dir, "a", "b")
	must(fsys.MkdirAll(d, 0o755))
	must(fsys.MkdirAll(d, 0o755)) // idempotent

	name := filepath.Join(d, "f")
	f, err := fsys.Create(name)
	must(err)
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("W"), 6); err != nil {
		t.Fatal(err)
	}
	must(f.Sync())
	buf := make([]byte, 11)
	if n, err := f.ReadAt(buf, 0); err != nil || n != 11 || string(buf) != "hello World" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	// Reading past the end reports io.EOF with what was there.
	if n, err := f.ReadAt(buf, 6); n != 5 || err != io.EOF {
		t.Fatalf("short ReadAt = %d %v", n, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 11 {
		t.Fatalf("Stat = %v %v", fi, err)
	}
	must(f.Truncate(5))
	must(f.Close())

	// OpenAppend writes at the end; WriteAt past the end zero-fills.
	f, err = fsys.OpenAppend(name)
	must(err)
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 8); err != nil {
		t.Fatal(err)
	}
	must(f.Close())
	r, err := fsys.Open(name)
	must(err)
	buf = make([]byte, 9)
	if n, err := r.ReadAt(buf, 0); n != 9 || (err != nil && err != io.EOF) || !bytes.Equal(buf, []byte("hello!\x00\x00x")) {
		t.Fatalf("after append: %d %v %q", n, err, buf)
	}
	if _, err := r.Write([]byte("no")); err == nil {
		t.Fatal("write on a read-only handle succeeded")
	}
	must(r.Close())

	// Rename replaces; List is sorted; Remove.
	other := filepath.Join(d, "e")
	g, err := fsys.Create(other)
	must(err)
	must(g.Close())
	names, err := fsys.List(d)
	must(err)
	if !slices.Equal(names, []string{"e", "f"}) {
		t.Fatalf("List = %v", names)
	}
	must(fsys.Rename(name, other))
	names, err = fsys.List(d)
	must(err)
	if !slices.Equal(names, []string{"e"}) {
		t.Fatalf("List after rename = %v", names)
	}
	if fi, err := fsys.Stat(other); err != nil || fi.Size() != 9 || fi.IsDir() {
		t.Fatalf("Stat = %v %v", fi, err)
	}
	must(fsys.SyncDir(d))
	must(fsys.Remove(other))
	if _, err := fsys.Stat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after remove = %v", err)
	}
	if _, err := fsys.Open(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open after remove = %v", err)
	}
	if err := fsys.Remove(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove twice = %v", err)
	}
	if total, free, err := fsys.Usage(dir); err != nil || total == 0 || free > total {
		t.Fatalf("Usage = %d %d %v", total, free, err)
	}
}

func TestFSSuite(t *testing.T) {
	t.Run("os", func(t *testing.T) { fsSuite(t, Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { fsSuite(t, NewStrictMem(), "/data") })
	t.Run("error-none", func(t *testing.T) {
		fsSuite(t, NewErrorFS(NewStrictMem(), OnNth(0)), "/data")
	})
}

func readAll(t *testing.T, fsys FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

func exists(fsys FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}

func TestMemCrashUnsyncedDataLost(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/f")
	m.SyncDir("/")
	f.Write([]byte("durable"))
	f.Sync()
	f.Write([]byte(" lost"))
	c := m.CrashClone()
	if got := readAll(t, c, "/f"); string(got) != "durable" {
		t.Fatalf("crash clone has %q", got)
	}
	// The original keeps its unsynced data and keeps working.
	if got := readAll(t, m, "/f"); string(got) != "durable lost" {
		t.Fatalf("original has %q", got)
	}
	f.Sync()
	if got := readAll(t, m.CrashClone(), "/f"); string(got) != "durable lost" {
		t.Fatalf("after sync clone has %q", got)
	}
}

func TestMemCrashOverwriteAndTruncate(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/f")
	m.SyncDir("/")
	f.Write([]byte("0123456789"))
	f.Sync()
	f.WriteAt([]byte("ab"), 2)
	f.Truncate(6)
	if got := readAll(t, m.CrashClone(), "/f"); string(got) != "0123456789" {
		t.Fatalf("unsynced overwrite+truncate survived: %q", got)
	}
	f.Sync()
	if got := readAll(t, m.CrashClone(), "/f"); string(got) != "01ab45" {
		t.Fatalf("synced overwrite+truncate: %q", got)
	}
}

func TestMemCrashCreateNeedsDirSync(t *testing.T) {
	m := NewStrictMem()
	m.MkdirAll("/d", 0o755)
	f, _ := m.Create("/d/f")
	f.Write([]byte("x"))
	f.Sync() // data synced, but the name is not
	if c := m.CrashClone(); exists(c, "/d") {
		t.Fatal("directory survived without a sync of its parent")
	}
	m.SyncDir("/")
	if c := m.CrashClone(); !exists(c, "/d") || exists(c, "/d/f") {
		t.Fatal("want /d without /d/f")
	}
	m.SyncDir("/d")
	if got := readAll(t, m.CrashClone(), "/d/f"); string(got) != "x" {
		t.Fatalf("got %q", got)
	}
}

func TestMemCrashRenameAndRemoveNeedDirSync(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/old")
	f.Write([]byte("v1"))
	f.Sync()
	f.Close()
	m.SyncDir("/")
	m.Rename("/old", "/new")
	c := m.CrashClone()
	if !exists(c, "/old") || exists(c, "/new") {
		t.Fatal("unsynced rename survived")
	}
	m.SyncDir("/")
	c = m.CrashClone()
	if exists(c, "/old") || !exists(c, "/new") {
		t.Fatal("synced rename lost")
	}
	m.Remove("/new")
	if !exists(m.CrashClone(), "/new") {
		t.Fatal("unsynced remove survived")
	}
	m.SyncDir("/")
	if exists(m.CrashClone(), "/new") {
		t.Fatal("synced remove lost")
	}
}

func TestMemHandleSurvivesRemove(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/f")
	m.Remove("/f")
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "abc" {
		t.Fatalf("%v %q", err, b)
	}
}

func TestMemCrashInPlace(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/f")
	f.Write([]byte("a"))
	f.Sync()
	m.SyncDir("/")
	f.Write([]byte("b"))
	m.Crash()
	if _, err := f.Write([]byte("c")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write on a pre-crash handle: %v", err)
	}
	if got := readAll(t, m, "/f"); string(got) != "a" {
		t.Fatalf("got %q", got)
	}
	// The filesystem keeps working after the crash.
	g, _ := m.OpenAppend("/f")
	g.Write([]byte("z"))
	if got := readAll(t, m, "/f"); string(got) != "az" {
		t.Fatalf("got %q", got)
	}
}

func TestMemCrashCloneIsIndependent(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/f")
	f.Write([]byte("abc"))
	f.Sync()
	m.SyncDir("/")
	c := m.CrashClone()
	g, _ := c.OpenAppend("/f")
	g.Write([]byte("d"))
	g.Sync()
	if got := readAll(t, m, "/f"); string(got) != "abc" {
		t.Fatalf("write to the clone leaked into the original: %q", got)
	}
}

func TestMemCrashCloneTorn(t *testing.T) {
	m := NewStrictMem()
	f, _ := m.Create("/f")
	m.SyncDir("/")
	durable := bytes.Repeat([]byte{1}, 1000)
	f.Write(durable)
	f.Sync()
	f.Write(bytes.Repeat([]byte{2}, 4000))
	sawPartial := false
	for seed := range uint64(50) {
		c := m.CrashCloneTorn(rand.New(rand.NewPCG(seed, 1)))
		got := readAll(t, c, "/f")
		if len(got) < 1000 || len(got) > 5000 || !bytes.Equal(got[:1000], durable) {
			t.Fatalf("seed %d: durable prefix damaged (len %d)", seed, len(got))
		}
		for i, b := range got[1000:] {
			if b != 0 && b != 2 {
				t.Fatalf("seed %d: byte %d = %d", seed, 1000+i, b)
			}
		}
		if len(got) > 1000 && len(got) < 5000 {
			sawPartial = true
		}
	}
	if !sawPartial {
		t.Fatal("torn clones never kept a partial tail")
	}
}

func TestMemUsage(t *testing.T) {
	m := NewStrictMem()
	m.SetCapacity(100)
	f, _ := m.Create("/f")
	f.Write(make([]byte, 30))
	total, free, err := m.Usage("/")
	if err != nil || total != 100 || free != 70 {
		t.Fatalf("Usage = %d %d %v", total, free, err)
	}
}

func TestNthInjector(t *testing.T) {
	m := NewStrictMem()
	inj := OnNth(2, OpWrite)
	e := NewErrorFS(m, inj)
	f, err := e.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("b")); !errors.Is(err, ErrInjected) {
		t.Fatalf("second write: %v", err)
	}
	if _, err := f.Write([]byte("c")); err != nil {
		t.Fatalf("third write: %v", err)
	}
	if got := readAll(t, m, "/f"); string(got) != "ac" {
		t.Fatalf("failed write reached the inner FS: %q", got)
	}
	if !inj.Fired() || inj.Count() != 3 {
		t.Fatalf("fired %v count %d", inj.Fired(), inj.Count())
	}

	sticky := &NthInjector{N: 1, Ops: []Op{OpSync}, Sticky: true}
	e = NewErrorFS(m, sticky)
	g, _ := e.OpenAppend("/f")
	for range 3 {
		if err := g.Sync(); !errors.Is(err, ErrInjected) {
			t.Fatalf("sticky sync: %v", err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestErrorFSEveryOpCanFail(t *testing.T) {
	// Sweep a failure over every operation of the shared suite: each run must
	// see the injected error surface (the suite fails), never a panic.
	count := OnNth(0)
	fsSuite(t, NewErrorFS(NewStrictMem(), count), "/data")
	n := count.Count()
	if n < 20 {
		t.Fatalf("suite did only %d operations", n)
	}
	for i := int64(1); i <= n; i++ {
		inj := OnNth(i)
		func() {
			defer func() {
				if r := recover(); r != nil && r != errFakeFatal {
					t.Fatalf("op %d: panic %v", i, r)
				}
			}()
			fsSuite(fakeT{}, NewErrorFS(NewStrictMem(), inj), "/data")
		}()
		if !inj.Fired() {
			t.Fatalf("op %d never reached", i)
		}
	}
}
