package bookie_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie"
	"github.com/isobar-mq/isobar/bookie/ledger"
	"github.com/isobar-mq/isobar/internal/testcluster"
	"github.com/isobar-mq/isobar/metastore"
)

// identityEnv is an embedded etcd for bookies the test starts itself.
type identityEnv struct {
	t  *testing.T
	cl *testcluster.Cluster
}

func newIdentityEnv(t *testing.T) *identityEnv {
	return &identityEnv{t: t, cl: testcluster.Start(t, testcluster.Options{})}
}

// config is a bookie config on dir/journal and dir/ledgers, on a free port.
func (e *identityEnv) config(dir string) bookie.Config {
	return bookie.Config{
		Region:          e.cl.Region,
		ListenAddr:      "127.0.0.1:0",
		JournalDir:      filepath.Join(dir, "journal"),
		LedgerDir:       filepath.Join(dir, "ledgers"),
		RegistrationTTL: 10 * time.Second,
		UsageInterval:   200 * time.Millisecond,
	}
}

// start starts a bookie (New and Start) and returns it or the error.
func (e *identityEnv) start(cfg bookie.Config) (*bookie.Server, error) {
	s, err := bookie.New(cfg, bookie.Deps{Meta: e.cl.Meta})
	if err != nil {
		return nil, err
	}
	if err := s.Start(context.Background()); err != nil {
		s.Shutdown(context.Background())
		return nil, err
	}
	e.t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, nil
}

func (e *identityEnv) mustStart(cfg bookie.Config) *bookie.Server {
	e.t.Helper()
	s, err := e.start(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func stop(t *testing.T, s *bookie.Server) {
	t.Helper()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// state is everything on disk under root (path → size and hash) and
// everything in the metadata store under /isobar/ (key → value and revision).
func (e *identityEnv) state(root string) string {
	e.t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			fmt.Fprintf(&b, "dir %s\n", rel)
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "file %s %d %x\n", rel, len(data), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	kvs, err := e.cl.Meta.List(context.Background(), "/isobar/")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, kv := range kvs {
		fmt.Fprintf(&b, "key %s rev %d %q\n", kv.Key, kv.Rev, kv.Value)
	}
	return b.String()
}

// refused starts a bookie that must be refused by the identity check
// named check, and verifies that nothing under root nor in the metadata
// store changed.
func (e *identityEnv) refused(cfg bookie.Config, root, check string) error {
	e.t.Helper()
	before := e.state(root)
	s, err := e.start(cfg)
	if err == nil {
		stop(e.t, s)
		e.t.Fatalf("bookie started; want the identity check %q to refuse it", check)
	}
	if !errors.Is(err, bookie.ErrIdentity) || !strings.Contains(err.Error(), check) {
		e.t.Fatalf("start: %v; want ErrIdentity naming %q", err, check)
	}
	if after := e.state(root); after != before {
		e.t.Fatalf("a refused start changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	e.t.Logf("refused as wanted: %v", err)
	return err
}

func readCookieFile(t *testing.T, dir string) bookie.Cookie {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, bookie.CookieFile))
	if err != nil {
		t.Fatal(err)
	}
	var c bookie.Cookie
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCookieFormat: a first start without a configured id generates one
// and writes the same cookie into both directories and the metadata store.
func TestCookieFormat(t *testing.T) {
	e := newIdentityEnv(t)
	cfg := e.config(t.TempDir())
	s := e.mustStart(cfg)
	j, l := readCookieFile(t, cfg.JournalDir), readCookieFile(t, cfg.LedgerDir)
	if j != l {
		t.Fatalf("journal cookie %+v, ledger cookie %+v", j, l)
	}
	host, _ := os.Hostname()
	if j.Version != bookie.CookieVersion || j.BookieID != s.ID() || j.Region != "test" || len(j.InstanceID) != 32 ||
		j.InstanceID != s.InstanceID() || time.Since(j.Created) > time.Minute || s.ID() == s.Addr() ||
		!strings.HasPrefix(s.ID(), strings.ToLower(host)) {
		t.Fatalf("cookie %+v of bookie %s at %s", j, s.ID(), s.Addr())
	}
	kv, err := e.cl.Meta.Get(context.Background(), bookie.CookieKey("test", s.ID()))
	if err != nil {
		t.Fatal(err)
	}
	var m bookie.Cookie
	if err := json.Unmarshal(kv.Value, &m); err != nil || !m.Created.Equal(j.Created) {
		t.Fatalf("metadata cookie %s: %v", kv.Value, err)
	}
	m.Created = j.Created
	if m != j {
		t.Fatalf("metadata cookie %+v, local %+v", m, j)
	}
	if kv.Key != "/isobar/test/cookies/"+s.ID() {
		t.Fatalf("metadata cookie at %s", kv.Key)
	}
	// A configured id at a first start is the cookie's.
	cfg2 := e.config(t.TempDir())
	cfg2.ID = "bookie-two"
	if s2 := e.mustStart(cfg2); s2.ID() != "bookie-two" || readCookieFile(t, cfg2.LedgerDir).BookieID != "bookie-two" {
		t.Fatalf("configured id: bookie %s", s2.ID())
	}
}

// TestIdentityChecks: each start-up check refuses a bad state, names
// itself, and writes nothing.
func TestIdentityChecks(t *testing.T) {
	e := newIdentityEnv(t)

	t.Run("check1_wiped_ledger_disk", func(t *testing.T) {
		root := t.TempDir()
		cfg := e.config(root)
		stop(t, e.mustStart(cfg))
		if err := os.RemoveAll(cfg.LedgerDir); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(cfg.LedgerDir, 0o755) // a new, empty disk
		e.refused(cfg, root, "check 1")
	})
	t.Run("check1_wiped_journal_disk", func(t *testing.T) {
		root := t.TempDir()
		cfg := e.config(root)
		stop(t, e.mustStart(cfg))
		if err := os.RemoveAll(cfg.JournalDir); err != nil {
			t.Fatal(err)
		}
		e.refused(cfg, root, "check 1")
	})
	t.Run("check2_two_bookies_directories", func(t *testing.T) {
		root := t.TempDir()
		a, b := e.config(filepath.Join(root, "a")), e.config(filepath.Join(root, "b"))
		stop(t, e.mustStart(a))
		stop(t, e.mustStart(b))
		mixed := a
		mixed.LedgerDir = b.LedgerDir
		e.refused(mixed, root, "check 2")
	})
	t.Run("check3_other_region", func(t *testing.T) {
		root := t.TempDir()
		cfg := e.config(root)
		stop(t, e.mustStart(cfg))
		cfg.Region = "elsewhere"
		e.refused(cfg, root, "check 3")
	})
	t.Run("check4_configured_id_differs", func(t *testing.T) {
		root := t.TempDir()
		cfg := e.config(root)
		s := e.mustStart(cfg)
		stop(t, s)
		cfg.ID = "not-" + s.ID()
		err := e.refused(cfg, root, "check 4")
		if !strings.Contains(err.Error(), s.ID()) {
			t.Fatalf("the error does not name the cookie's id: %v", err)
		}
	})
	t.Run("check5_metadata_instance_differs", func(t *testing.T) {
		// Bookie b5 is created on old/, retired, and its id reused on
		// new/; then the old directories come back.
		root := t.TempDir()
		old, cur := e.config(filepath.Join(root, "old")), e.config(filepath.Join(root, "new"))
		old.ID, cur.ID = "b5", "b5"
		stop(t, e.mustStart(old))
		if err := bookie.Decommission(context.Background(), e.cl.Meta, "test", "b5"); err != nil {
			t.Fatal(err)
		}
		stop(t, e.mustStart(cur))
		e.refused(old, root, "check 5")
		old.ID = "" // the cookie's id without a configured one: the same
		e.refused(old, root, "check 5")
	})
	t.Run("check6_empty_directories_known_id", func(t *testing.T) {
		root := t.TempDir()
		cfg := e.config(filepath.Join(root, "first"))
		cfg.ID = "b6"
		stop(t, e.mustStart(cfg))
		wiped := e.config(filepath.Join(root, "wiped"))
		wiped.ID = "b6"
		e.refused(wiped, root, "check 6")
		// The same with the directories present but empty.
		os.MkdirAll(wiped.JournalDir, 0o755)
		os.MkdirAll(wiped.LedgerDir, 0o755)
		e.refused(wiped, root, "check 6")
	})
}

// TestIdentityLiveRegistrationOfAnotherInstance: a live registration of
// the bookie's id by another instance fails the start at once.
func TestIdentityLiveRegistrationOfAnotherInstance(t *testing.T) {
	e := newIdentityEnv(t)
	ctx := context.Background()
	lease, err := e.cl.Meta.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Revoke(ctx)
	reg, _ := json.Marshal(bookie.Registration{ID: "b7", Address: "127.0.0.1:1", InstanceID: "someone-else"})
	if _, err := lease.Put(ctx, bookie.RegistrationKey("test", "b7"), reg); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t.TempDir())
	cfg.ID = "b7"
	start := time.Now()
	_, err = e.start(cfg)
	if !errors.Is(err, bookie.ErrIdentity) || !strings.Contains(err.Error(), "live registration") {
		t.Fatalf("start: %v; want ErrIdentity (live registration)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("refused after %v; want at once", d)
	}
	// The other bookie's registration is left alone.
	kv, err := e.cl.Meta.Get(ctx, bookie.RegistrationKey("test", "b7"))
	if err != nil || !bytes.Equal(kv.Value, reg) {
		t.Fatalf("the other bookie's registration: %q, %v", kv.Value, err)
	}
}

// writeLedger writes n entries to a closed ledger on a one-bookie ensemble.
func writeLedger(t *testing.T, meta *metastore.Store, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	lc := newMetaLedgerClient(t, meta)
	defer lc.Close()
	w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 1, WriteQuorum: 1, AckQuorum: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return w.ID()
}

func newMetaLedgerClient(t *testing.T, meta *metastore.Store) *ledger.Client {
	t.Helper()
	lc, err := ledger.NewClient(meta, ledger.Config{Region: "test", RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}

// checkLedger reads every entry back with a new ledger client and checks
// that the ensemble names bookie id.
func checkLedger(t *testing.T, meta *metastore.Store, id uint64, n int, bookieID string) {
	t.Helper()
	ctx := context.Background()
	lc := newMetaLedgerClient(t, meta)
	r, err := lc.OpenNoRecovery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Metadata().Ensembles[0].Bookies; len(got) != 1 || got[0] != bookieID {
		t.Fatalf("ensemble %v, want [%s]", got, bookieID)
	}
	got, err := r.Read(ctx, 0, int64(n-1))
	if err != nil || len(got) != n {
		t.Fatalf("read back %d of %d entries: %v", len(got), n, err)
	}
	for _, en := range got {
		if !bytes.Equal(en.Data, payload(int(en.ID))) {
			t.Fatalf("entry %d differs", en.ID)
		}
	}
}

// TestRestartOnAnotherPortServesLedgers: a bookie restarted on another
// port keeps its id, and a new ledger client reads its ledgers there.
func TestRestartOnAnotherPortServesLedgers(t *testing.T) {
	e := newIdentityEnv(t)
	cfg := e.config(t.TempDir())
	s := e.mustStart(cfg)
	id, addr := s.ID(), s.Addr()
	lid := writeLedger(t, e.cl.Meta, 100)
	stop(t, s)

	cfg.ListenAddr = freePort(t)
	s = e.mustStart(cfg)
	if s.ID() != id || s.Addr() == addr {
		t.Fatalf("restarted as %s at %s; was %s at %s", s.ID(), s.Addr(), id, addr)
	}
	var reg bookie.Registration
	kv, err := e.cl.Meta.Get(context.Background(), bookie.RegistrationKey("test", id))
	if err != nil || json.Unmarshal(kv.Value, &reg) != nil || reg.Address != s.Addr() || reg.InstanceID != s.InstanceID() {
		t.Fatalf("registration %+v, %v", reg, err)
	}
	checkLedger(t, e.cl.Meta, lid, 100, id)
}

// TestRestartAfterCrashTakesOverRegistration: a bookie process killed
// with SIGKILL leaves its registration live for a TTL; the bookie restarted
// on its directories at another port takes it over at once, and a new
// ledger client reads its ledgers there.
func TestRestartAfterCrashTakesOverRegistration(t *testing.T) {
	e := newIdentityEnv(t)
	dir := t.TempDir()
	cfg := e.config(dir)
	cfg.ListenAddr = freePort(t)
	cfg.RegistrationTTL = 30 * time.Second
	child := startChild(t, childConfig{Bookie: cfg, Endpoints: e.cl.Endpoints()})
	id := readCookieFile(t, cfg.JournalDir).BookieID
	lid := writeLedger(t, e.cl.Meta, 100)
	child.kill()
	kv, err := e.cl.Meta.Get(context.Background(), bookie.RegistrationKey("test", id))
	if err != nil {
		t.Fatalf("the killed bookie's registration is gone already: %v", err)
	}
	var old bookie.Registration
	json.Unmarshal(kv.Value, &old)

	cfg.ListenAddr = freePort(t)
	start := time.Now()
	s := e.mustStart(cfg)
	took := time.Since(start)
	if took > 5*time.Second {
		t.Fatalf("restart took %v: it waited for the old lease (TTL %v)", took, cfg.RegistrationTTL)
	}
	t.Logf("restarted in %v; was at %s, now at %s", took, old.Address, s.Addr())
	if s.ID() != id || s.Addr() == old.Address || s.InstanceID() != old.InstanceID {
		t.Fatalf("restarted as %s (instance %s) at %s; was %+v", s.ID(), s.InstanceID(), s.Addr(), old)
	}
	var reg bookie.Registration
	kv, err = e.cl.Meta.Get(context.Background(), bookie.RegistrationKey("test", id))
	if err != nil || json.Unmarshal(kv.Value, &reg) != nil || reg.Address != s.Addr() {
		t.Fatalf("registration %+v, %v", reg, err)
	}
	checkLedger(t, e.cl.Meta, lid, 100, id)
}

// TestCookieLegacyDirectoriesAdoptAddress: directories written by an
// earlier version (data, no cookie) whose ledgers name the bookie by its
// address adopt the address as id; their cookies are written then.
func TestCookieLegacyDirectoriesAdoptAddress(t *testing.T) {
	e := newIdentityEnv(t)
	ctx := context.Background()
	cfg := e.config(t.TempDir())
	cfg.ListenAddr = freePort(t)
	// An earlier version: the id is the address, and there is no cookie.
	old := cfg
	old.ID = cfg.ListenAddr
	s := e.mustStart(old)
	lid := writeLedger(t, e.cl.Meta, 50)
	stop(t, s)
	for _, d := range []string{cfg.JournalDir, cfg.LedgerDir} {
		if err := os.Remove(filepath.Join(d, bookie.CookieFile)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.cl.Meta.Delete(ctx, bookie.CookieKey("test", old.ID)); err != nil {
		t.Fatal(err)
	}

	s = e.mustStart(cfg)
	if s.ID() != cfg.ListenAddr {
		t.Fatalf("legacy directories started as %q, want the address %s", s.ID(), cfg.ListenAddr)
	}
	j, l := readCookieFile(t, cfg.JournalDir), readCookieFile(t, cfg.LedgerDir)
	if j != l || j.BookieID != cfg.ListenAddr || j.InstanceID != s.InstanceID() {
		t.Fatalf("cookies %+v, %+v", j, l)
	}
	if _, err := e.cl.Meta.Get(ctx, bookie.CookieKey("test", cfg.ListenAddr)); err != nil {
		t.Fatalf("metadata cookie: %v", err)
	}
	checkLedger(t, e.cl.Meta, lid, 50, cfg.ListenAddr)
	stop(t, s)
	// From now on the id is the cookie's, whatever the address.
	cfg.ListenAddr = freePort(t)
	s = e.mustStart(cfg)
	if s.ID() != old.ID {
		t.Fatalf("restarted as %q, want %s", s.ID(), old.ID)
	}
	checkLedger(t, e.cl.Meta, lid, 50, old.ID)

	// Legacy directories with a configured id adopt it.
	cfg2 := e.config(t.TempDir())
	cfg2.ID = "legacy-two"
	stop(t, e.mustStart(cfg2))
	for _, d := range []string{cfg2.JournalDir, cfg2.LedgerDir} {
		os.Remove(filepath.Join(d, bookie.CookieFile))
	}
	e.cl.Meta.Delete(ctx, bookie.CookieKey("test", "legacy-two"))
	if s2 := e.mustStart(cfg2); s2.ID() != "legacy-two" || readCookieFile(t, cfg2.LedgerDir).BookieID != "legacy-two" {
		t.Fatalf("legacy directories with a configured id started as %q", s2.ID())
	}
}

// TestCookieMetadataCopyRecreated: local cookies without the metadata
// store's copy (a crash between the two writes) are completed at the next
// start; so is a first start stopped between the two local cookies.
func TestCookieMetadataCopyRecreated(t *testing.T) {
	e := newIdentityEnv(t)
	ctx := context.Background()
	cfg := e.config(t.TempDir())
	s := e.mustStart(cfg)
	id, inst := s.ID(), s.InstanceID()
	stop(t, s)
	if err := e.cl.Meta.Delete(ctx, bookie.CookieKey("test", id)); err != nil {
		t.Fatal(err)
	}
	s = e.mustStart(cfg)
	kv, err := e.cl.Meta.Get(ctx, bookie.CookieKey("test", id))
	var m bookie.Cookie
	if err != nil || json.Unmarshal(kv.Value, &m) != nil || m.InstanceID != inst || s.InstanceID() != inst {
		t.Fatalf("metadata cookie %q, %v", kv.Value, err)
	}

	// Only the journal's cookie was written, nothing else.
	cfg2 := e.config(t.TempDir())
	c := bookie.Cookie{Version: 1, BookieID: "cut-short", Region: "test", InstanceID: strings.Repeat("ab", 16), Created: time.Now().UTC()}
	b, _ := json.Marshal(c)
	os.MkdirAll(cfg2.JournalDir, 0o755)
	if err := os.WriteFile(filepath.Join(cfg2.JournalDir, bookie.CookieFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := e.mustStart(cfg2)
	if s2.ID() != "cut-short" || s2.InstanceID() != c.InstanceID || readCookieFile(t, cfg2.LedgerDir).InstanceID != c.InstanceID {
		t.Fatalf("cut-short first start completed as %s (instance %s)", s2.ID(), s2.InstanceID())
	}
	if _, err := e.cl.Meta.Get(ctx, bookie.CookieKey("test", "cut-short")); err != nil {
		t.Fatalf("metadata cookie: %v", err)
	}
}

// TestDecommission: refused while the bookie is registered; afterwards the
// metadata cookie is gone and the id is free for new directories.
func TestDecommission(t *testing.T) {
	e := newIdentityEnv(t)
	ctx := context.Background()
	cfg := e.config(t.TempDir())
	cfg.ID = "b9"
	s := e.mustStart(cfg)
	if err := bookie.Decommission(ctx, e.cl.Meta, "test", "b9"); !errors.Is(err, bookie.ErrLive) {
		t.Fatalf("decommission of a live bookie: %v, want ErrLive", err)
	}
	if _, err := e.cl.Meta.Get(ctx, bookie.CookieKey("test", "b9")); err != nil {
		t.Fatalf("a refused decommission touched the cookie: %v", err)
	}
	stop(t, s)
	if err := bookie.Decommission(ctx, e.cl.Meta, "test", "b9"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.Meta.Get(ctx, bookie.CookieKey("test", "b9")); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("metadata cookie after decommission: %v", err)
	}
	if err := bookie.Decommission(ctx, e.cl.Meta, "test", "b9"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("decommission of an unknown id: %v, want ErrNotFound", err)
	}
	fresh := e.config(t.TempDir())
	fresh.ID = "b9"
	if s := e.mustStart(fresh); s.InstanceID() == readCookieFile(t, cfg.JournalDir).InstanceID {
		t.Fatal("the reused id kept the old instance id")
	}
}

// TestCookieFreshDisks: new disks (a file system's lost+found) and a
// ledger directory nested in the journal directory are empty, not data of
// an earlier version: the first start generates an id.
func TestCookieFreshDisks(t *testing.T) {
	e := newIdentityEnv(t)
	cfg := e.config(t.TempDir())
	cfg.LedgerDir = filepath.Join(cfg.JournalDir, "ledgers")
	for _, d := range []string{cfg.JournalDir, cfg.LedgerDir} {
		if err := os.MkdirAll(filepath.Join(d, "lost+found"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s := e.mustStart(cfg)
	if s.ID() == s.Addr() || readCookieFile(t, cfg.LedgerDir).BookieID != s.ID() {
		t.Fatalf("fresh disks started as %q at %s", s.ID(), s.Addr())
	}
	id := s.ID()
	stop(t, s)
	if s := e.mustStart(cfg); s.ID() != id {
		t.Fatalf("restarted as %q, want %q", s.ID(), id)
	}
}
