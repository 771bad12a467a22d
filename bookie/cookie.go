package bookie

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/vfs"
	"github.com/isobar-mq/isobar/metastore"
)

// ErrIdentity is wrapped by every refusal of a bookie to start because its
// directories, its configuration and the metadata store disagree about who
// it is (docs/format/cookie.md lists the checks). Nothing was written when
// it is returned.
var ErrIdentity = errors.New("bookie: identity check failed")

// ErrLive is returned by Decommission for a bookie that is registered.
var ErrLive = errors.New("bookie: bookie is live")

// CookieFile is the name of the cookie in the journal and the ledger
// directory.
const CookieFile = "cookie.json"

// CookieVersion is the cookie format this code writes and reads.
const CookieVersion = 1

// identityTimeout bounds the metadata store calls of the identity checks
// made by New, which has no context.
const identityTimeout = 30 * time.Second

// Cookie is a bookie's identity, written at its first start into both of
// its directories and, as a copy, into the region's metadata store
// (docs/format/cookie.md).
type Cookie struct {
	Version    int       `json:"version"`
	BookieID   string    `json:"bookieId"`
	Region     string    `json:"region"`
	InstanceID string    `json:"instanceId"`
	Created    time.Time `json:"created"`
}

// same reports whether two cookies are of the same bookie's directories.
func (c Cookie) same(o Cookie) bool {
	return c.Version == o.Version && c.BookieID == o.BookieID && c.Region == o.Region &&
		c.InstanceID == o.InstanceID && c.Created.Equal(o.Created)
}

func (c Cookie) String() string {
	return fmt.Sprintf("bookie %q of region %q, instance %s, created %s",
		c.BookieID, c.Region, c.InstanceID, c.Created.Format(time.RFC3339))
}

// CookiesPrefix is where the copies of a region's bookie cookies live in
// its metadata store: /isobar/<region>/cookies/.
func CookiesPrefix(region string) string { return proto.CookiesPrefix(metastore.RegionPrefix(region)) }

// CookieKey is the metadata key of bookie id's cookie.
func CookieKey(region, id string) string { return CookiesPrefix(region) + id }

func decodeCookie(b []byte) (Cookie, error) {
	var c Cookie
	if err := json.Unmarshal(b, &c); err != nil {
		return Cookie{}, err
	}
	switch {
	case c.Version < 1:
		return Cookie{}, errors.New("no format version")
	case c.Version > CookieVersion:
		return Cookie{}, fmt.Errorf("format version %d is newer than this bookie's %d", c.Version, CookieVersion)
	case c.BookieID == "":
		return Cookie{}, errors.New("no bookie id")
	case c.InstanceID == "":
		return Cookie{}, errors.New("no instance id")
	}
	return c, nil
}

// dirState is what a bookie directory holds: its cookie, if any, and
// whether it holds anything else (data).
type dirState struct {
	dir     string
	exists  bool
	cookie  *Cookie
	hasData bool
}

// inspectDir reads dir's cookie and tells whether it holds data. Not data:
// the cookie, a cookie write that did not finish, a file system's
// lost+found (a new disk mounted at dir) and the bookie's other directory
// when it is nested in this one (other).
func inspectDir(fsys vfs.FS, dir, other string) (dirState, error) {
	st := dirState{dir: dir}
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("bookie: list %s: %w", dir, err)
	}
	st.exists = true
	for _, n := range names {
		switch n {
		case CookieFile:
			c, err := readCookie(fsys, filepath.Join(dir, n))
			if err != nil {
				return st, fmt.Errorf("%w: cookie unreadable: %s: %v; restore it from the other directory's %s or from the metadata store's copy (/isobar/<region>/cookies/<id>)",
					ErrIdentity, filepath.Join(dir, n), err, CookieFile)
			}
			st.cookie = &c
		case CookieFile + ".tmp", "lost+found":
		default:
			if filepath.Join(dir, n) != filepath.Clean(other) {
				st.hasData = true
			}
		}
	}
	return st, nil
}

func readCookie(fsys vfs.FS, name string) (Cookie, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return Cookie{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Cookie{}, err
	}
	if fi.Size() > 64<<10 {
		return Cookie{}, fmt.Errorf("%d bytes is too large for a cookie", fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && len(b) > 0 {
		return Cookie{}, err
	}
	return decodeCookie(b)
}

// writeCookie writes the cookie into dir atomically and durably: a
// temporary file, fsync, rename, fsync of the directory.
func writeCookie(fsys vfs.FS, dir string, c Cookie) error {
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return fmt.Errorf("bookie: create %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	tmp := filepath.Join(dir, CookieFile+".tmp")
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("bookie: write cookie: %w", err)
	}
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("bookie: write cookie %s: %w", tmp, werr)
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, CookieFile)); err != nil {
		return fmt.Errorf("bookie: write cookie: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("bookie: write cookie: sync %s: %w", dir, err)
	}
	return nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// generateID makes a readable, unique bookie id: the host name (lower
// case, characters outside [a-z0-9.-] replaced by '-') and 8 hex digits.
func generateID() string {
	h, _ := os.Hostname()
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, h)
	h = strings.Trim(h, "-.")
	if h == "" {
		h = "bookie"
	}
	return h + "-" + randomHex(4)
}

// identity is what New learnt of the bookie's identity from its
// directories, its configuration and the metadata store, and what it still
// has to write.
type identity struct {
	cookie Cookie // the bookie's cookie; BookieID empty while pending
	// pending: legacy directories without a configured id or advertised
	// address adopt the listener's address, known only in StartOn.
	pending bool
	// writeJournal, writeLedger: the cookie is missing there (first start,
	// a first start cut short between the two writes, legacy directories).
	writeJournal, writeLedger bool
	// writeMeta: the metadata store has no copy yet.
	writeMeta bool
	legacy    bool
	fsys      vfs.FS // the filesystem the directories are on
}

// resolveIdentity runs the checks that need only the directories and the
// configuration (docs/format/cookie.md, checks 1 to 4), and settles the id
// and instance id. It writes nothing.
func resolveIdentity(cfg Config, fsys vfs.FS) (identity, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	j, err := inspectDir(fsys, cfg.JournalDir, cfg.LedgerDir)
	if err != nil {
		return identity{}, err
	}
	l, err := inspectDir(fsys, cfg.LedgerDir, cfg.JournalDir)
	if err != nil {
		return identity{}, err
	}
	id := identity{fsys: fsys}
	switch {
	case j.cookie != nil && l.cookie != nil:
		if !j.cookie.same(*l.cookie) {
			return identity{}, fmt.Errorf("%w: check 2 (cookies differ): the journal directory %s has the cookie of %s but the ledger directory %s has the cookie of %s; "+
				"they are directories of two different bookies: configure the journal and ledger directories of one bookie",
				ErrIdentity, j.dir, j.cookie, l.dir, l.cookie)
		}
		id.cookie = *j.cookie
	case j.cookie != nil || l.cookie != nil:
		with, without := j, l
		if l.cookie != nil {
			with, without = l, j
		}
		if with.hasData || without.hasData {
			return identity{}, fmt.Errorf("%w: check 1 (cookie missing): %s has the cookie of %s but %s has none; "+
				"a disk was wiped or replaced: this bookie's data there is gone. Re-replicate its ledgers, decommission it "+
				"(isobar bookie decommission) and start it on empty directories, or restore the disk",
				ErrIdentity, with.dir, with.cookie, without.dir)
		}
		// A first start stopped between writing the two cookies: no data
		// anywhere yet, so finish it.
		id.cookie = *with.cookie
		id.writeJournal, id.writeLedger = j.cookie == nil, l.cookie == nil
	default:
		id.writeJournal, id.writeLedger = true, true
		id.legacy = j.hasData || l.hasData
		id.cookie = Cookie{
			Version:    CookieVersion,
			BookieID:   cfg.ID,
			Region:     cfg.Region,
			InstanceID: randomHex(16),
			Created:    time.Now().UTC().Truncate(time.Millisecond),
		}
		if id.cookie.BookieID == "" {
			switch {
			case !id.legacy:
				id.cookie.BookieID = generateID()
			case cfg.AdvertiseAddr != "":
				id.cookie.BookieID = cfg.AdvertiseAddr // the id earlier versions used
			default:
				id.pending = true
			}
		}
		return id, nil
	}
	if id.cookie.Region != cfg.Region {
		return identity{}, fmt.Errorf("%w: check 3 (region): the directories %s and %s belong to %s, but this bookie is configured for region %q; "+
			"configure the right directories or region",
			ErrIdentity, cfg.JournalDir, cfg.LedgerDir, id.cookie, cfg.Region)
	}
	if cfg.ID != "" && cfg.ID != id.cookie.BookieID {
		return identity{}, fmt.Errorf("%w: check 4 (configured id): the directories %s and %s belong to %s, but the configured id is %q; "+
			"remove the id from the configuration or set it to %q (a bookie's id cannot change: ledger metadata names it)",
			ErrIdentity, cfg.JournalDir, cfg.LedgerDir, id.cookie, cfg.ID, id.cookie.BookieID)
	}
	return id, nil
}

// checkMetaCookie compares the settled identity with the metadata store's
// copy of the cookie (checks 5 and 6) and notes whether the copy is to be
// written. It writes nothing.
func checkMetaCookie(ctx context.Context, meta metastore.Meta, cfg Config, id *identity) error {
	key := CookieKey(cfg.Region, id.cookie.BookieID)
	kv, err := meta.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		id.writeMeta = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("bookie: read cookie %s: %w", key, err)
	}
	mc, derr := decodeCookie(kv.Value)
	hasLocal := !id.writeJournal || !id.writeLedger
	switch {
	case derr != nil:
		return fmt.Errorf("%w: check 5 (metadata cookie): the metadata store's cookie %s for bookie %q is unreadable (%v); "+
			"repair it from this bookie's %s, or decommission the id (isobar bookie decommission)",
			ErrIdentity, key, id.cookie.BookieID, derr, CookieFile)
	case !hasLocal && !id.legacy:
		return fmt.Errorf("%w: check 6 (wiped directories): the directories %s and %s are empty but bookie %q exists in the metadata store (%s, %s); "+
			"a wiped disk must not rejoin as that bookie: re-replicate its ledgers and decommission it (isobar bookie decommission) before reusing the id, "+
			"or configure another id",
			ErrIdentity, cfg.JournalDir, cfg.LedgerDir, id.cookie.BookieID, key, mc)
	case !hasLocal:
		return fmt.Errorf("%w: check 5 (metadata cookie): the directories %s and %s hold data but no cookie, and the metadata store's cookie %s "+
			"says bookie %q is %s; these directories are not that bookie's: configure the right id or directories",
			ErrIdentity, cfg.JournalDir, cfg.LedgerDir, key, id.cookie.BookieID, mc)
	case mc.InstanceID != id.cookie.InstanceID:
		return fmt.Errorf("%w: check 5 (metadata cookie): the directories %s and %s belong to %s, but the metadata store's cookie %s "+
			"is of instance %s: these directories are not the ones bookie %q was created with; configure the right directories, "+
			"or decommission the id (isobar bookie decommission) if the bookie they were created with is gone for good",
			ErrIdentity, cfg.JournalDir, cfg.LedgerDir, id.cookie, key, mc.InstanceID, id.cookie.BookieID)
	}
	return nil
}

// writeIdentity writes what is missing: the local cookies first, then the
// metadata store's copy, so that a crash in between leaves local cookies
// without a copy, which the next start completes.
func writeIdentity(ctx context.Context, meta metastore.Meta, cfg Config, id *identity) error {
	fsys := id.fsys
	if id.writeJournal {
		if err := writeCookie(fsys, cfg.JournalDir, id.cookie); err != nil {
			return err
		}
		id.writeJournal = false
	}
	if id.writeLedger && filepath.Clean(cfg.LedgerDir) != filepath.Clean(cfg.JournalDir) {
		if err := writeCookie(fsys, cfg.LedgerDir, id.cookie); err != nil {
			return err
		}
	}
	id.writeLedger = false
	if meta != nil && id.writeMeta {
		val, err := json.Marshal(id.cookie)
		if err != nil {
			return err
		}
		key := CookieKey(cfg.Region, id.cookie.BookieID)
		if _, err := meta.Create(ctx, key, val); err != nil {
			if errors.Is(err, metastore.ErrExists) {
				// Another bookie created it since the check.
				return fmt.Errorf("%w: check 5 (metadata cookie): the metadata store's cookie %s was created by another bookie while this one started; "+
					"two bookies were configured with id %q", ErrIdentity, key, id.cookie.BookieID)
			}
			return fmt.Errorf("bookie: write cookie %s: %w", key, err)
		}
		id.writeMeta = false
	}
	return nil
}

// settleIdentity is the whole identity start-up of New: the local checks,
// the metadata checks when the id is known and a metadata store is
// configured, and the writes. For legacy directories whose id is the
// listener's address it stops before the metadata checks; StartOn finishes
// with finishIdentity.
func settleIdentity(cfg Config, fsys vfs.FS, meta metastore.Meta) (identity, error) {
	id, err := resolveIdentity(cfg, fsys)
	if err != nil || id.pending {
		return id, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), identityTimeout)
	defer cancel()
	if err := finishIdentity(ctx, meta, cfg, &id); err != nil {
		return id, err
	}
	return id, nil
}

func finishIdentity(ctx context.Context, meta metastore.Meta, cfg Config, id *identity) error {
	if meta != nil {
		if err := checkMetaCookie(ctx, meta, cfg, id); err != nil {
			return err
		}
	}
	return writeIdentity(ctx, meta, cfg, id)
}

// Decommission retires bookie id of region for good, so that its id may be
// reused by a bookie on new directories: it deletes the metadata store's
// copy of its cookie. Call it once the bookie's disks are gone and its
// ledgers re-replicated. It refuses (ErrLive) while the bookie is
// registered, and fails with metastore.ErrNotFound when the region has no
// cookie for id. The bookie's directories, if they survive, still hold its
// cookie: wipe them before they are used again.
func Decommission(ctx context.Context, meta metastore.Meta, region, id string) error {
	if region == "" || id == "" {
		return errors.New("bookie: decommission: region and id are required")
	}
	regKey, cookieKey := RegistrationKey(region, id), CookieKey(region, id)
	for {
		ok, _, err := meta.Txn(ctx, []metastore.Cmp{metastore.Absent(regKey), metastore.Present(cookieKey)},
			[]metastore.Op{metastore.DeleteOp(cookieKey)})
		if err != nil {
			return fmt.Errorf("bookie: decommission %s: %w", id, err)
		}
		if ok {
			return nil
		}
		// Which condition failed? (Both may have changed since: then try again.)
		kv, err := meta.Get(ctx, regKey)
		if err == nil {
			var r Registration
			json.Unmarshal(kv.Value, &r)
			return fmt.Errorf("%w: bookie %s of region %s is registered at %s: stop it before decommissioning it",
				ErrLive, id, region, r.Address)
		}
		if !errors.Is(err, metastore.ErrNotFound) {
			return fmt.Errorf("bookie: decommission %s: %w", id, err)
		}
		if _, err := meta.Get(ctx, cookieKey); errors.Is(err, metastore.ErrNotFound) {
			return fmt.Errorf("bookie: decommission: region %s has no cookie for bookie %s (%s): %w",
				region, id, cookieKey, metastore.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("bookie: decommission %s: %w", id, err)
		}
	}
}
