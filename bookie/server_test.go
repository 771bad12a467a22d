package bookie

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/vfs"
	"github.com/isobar-mq/isobar/metastore"
)

func testConfig(t *testing.T, dir string) Config {
	return Config{
		Region:        "test",
		ListenAddr:    "127.0.0.1:0",
		JournalDir:    filepath.Join(dir, "journal"),
		LedgerDir:     filepath.Join(dir, "ledgers"),
		UsageInterval: 100 * time.Millisecond,
		MaxFrameSize:  1 << 20,
	}
}

func startServer(t *testing.T, cfg Config, deps Deps) *Server {
	t.Helper()
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// raw is a bare protocol connection for tests.
type raw struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &raw{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *raw) send(reqs ...proto.Request) {
	r.t.Helper()
	var b []byte
	for i := range reqs {
		b = proto.AppendRequest(b, &reqs[i])
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) writeBytes(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) recv() proto.Response {
	r.t.Helper()
	frame, err := proto.ReadFrame(r.br, 64<<20, nil)
	if err != nil {
		r.t.Fatalf("read response: %v", err)
	}
	resp, err := proto.DecodeResponse(frame)
	if err != nil {
		r.t.Fatalf("decode response: %v", err)
	}
	resp.Payload = bytes.Clone(resp.Payload)
	return resp
}

// closed reports whether the server closed the connection.
func (r *raw) closed() bool {
	_, err := proto.ReadFrame(r.br, 64<<20, nil)
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func (r *raw) do(req proto.Request) proto.Response {
	r.t.Helper()
	r.send(req)
	return r.recv()
}

func entry(ledger, id uint64, lac int64, data string) []byte {
	return proto.AppendEntry(nil, ledger, id, lac, uint64(len(data)), []byte(data))
}

func addReq(id, ledger, e uint64, lac int64, data string) proto.Request {
	return proto.Request{Op: proto.OpAdd, ID: id, Ledger: ledger, Entry: e, Payload: entry(ledger, e, lac, data)}
}

func TestPipelinedAddReadFenceDelete(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()), Deps{})
	c := dialRaw(t, s.Addr())

	const n = 200
	var reqs []proto.Request
	for i := uint64(0); i < n; i++ {
		reqs = append(reqs, addReq(i+1, 7, i, int64(i)-1, "payload-"+string(rune('a'+i%26))))
	}
	c.send(reqs...) // all in one write: pipelined
	seen := map[uint64]bool{}
	for i := 0; i < n; i++ {
		r := c.recv()
		if r.Status != proto.StatusOK || r.Op != proto.OpAdd || r.Ledger != 7 {
			t.Fatalf("add response %+v", r)
		}
		seen[r.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("got %d distinct responses, want %d", len(seen), n)
	}
	for i := uint64(0); i < n; i += 37 {
		r := c.do(proto.Request{Op: proto.OpRead, ID: 1000 + i, Ledger: 7, Entry: i})
		if r.Status != proto.StatusOK || !bytes.Equal(r.Payload, reqs[i].Payload) {
			t.Fatalf("read %d: status %v, payload %q", i, r.Status, r.Payload)
		}
	}
	if r := c.do(proto.Request{Op: proto.OpRead, ID: 2, Ledger: 7, Entry: n}); r.Status != proto.StatusNoEntry {
		t.Fatalf("read past end: %v", r.Status)
	}
	if r := c.do(proto.Request{Op: proto.OpRead, ID: 3, Ledger: 99, Entry: 0}); r.Status != proto.StatusNoLedger {
		t.Fatalf("read unknown ledger: %v", r.Status)
	}
	if r := c.do(proto.Request{Op: proto.OpReadLAC, ID: 4, Ledger: 7}); r.Status != proto.StatusOK || r.LAC != n-2 {
		t.Fatalf("read lac: %+v, want LAC %d", r, n-2)
	}

	// Fence: plain adds are refused, recovery adds accepted; fencing is durable.
	if r := c.do(proto.Request{Op: proto.OpFence, ID: 5, Ledger: 7}); r.Status != proto.StatusOK || r.LAC != n-2 {
		t.Fatalf("fence: %+v", r)
	}
	if r := c.do(addReq(6, 7, n, n-1, "late")); r.Status != proto.StatusFenced {
		t.Fatalf("add after fence: %v", r.Status)
	}
	rec := addReq(7, 7, n, n-1, "recovered")
	rec.Flags = proto.FlagRecovery
	if r := c.do(rec); r.Status != proto.StatusOK {
		t.Fatalf("recovery add after fence: %v", r.Status)
	}
	// Fencing a ledger never seen creates it empty and fenced.
	if r := c.do(proto.Request{Op: proto.OpFence, ID: 8, Ledger: 8}); r.Status != proto.StatusOK || r.LAC != -1 {
		t.Fatalf("fence unknown ledger: %+v", r)
	}
	if r := c.do(addReq(9, 8, 0, -1, "x")); r.Status != proto.StatusFenced {
		t.Fatalf("add to fenced new ledger: %v", r.Status)
	}
	if r := c.do(proto.Request{Op: proto.OpDelete, ID: 10, Ledger: 7}); r.Status != proto.StatusOK {
		t.Fatalf("delete: %v", r.Status)
	}
	if r := c.do(proto.Request{Op: proto.OpRead, ID: 11, Ledger: 7, Entry: 0}); r.Status != proto.StatusNoLedger {
		t.Fatalf("read deleted ledger: %v", r.Status)
	}
	info := c.do(proto.Request{Op: proto.OpInfo, ID: 12})
	if info.Status != proto.StatusOK || info.Total == 0 || string(info.Payload) != s.ID() {
		t.Fatalf("info %+v", info)
	}

	// The fence survives a restart.
	cfg := s.cfg
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.ListenAddr = "127.0.0.1:0"
	s2 := startServer(t, cfg, Deps{})
	c2 := dialRaw(t, s2.Addr())
	if r := c2.do(addReq(1, 8, 1, -1, "after restart")); r.Status != proto.StatusFenced {
		t.Fatalf("add to fenced ledger after restart: %v", r.Status)
	}
}

func TestLongPollLAC(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()), Deps{})
	c := dialRaw(t, s.Addr())
	w := dialRaw(t, s.Addr())
	// Nothing newer arrives: the poll times out with the current LAC.
	if r := c.do(proto.Request{Op: proto.OpReadLAC, ID: 1, Ledger: 3, PrevLAC: -1, Timeout: 50}); r.Status != proto.StatusTimeout || r.LAC != -1 {
		t.Fatalf("idle poll: %+v", r)
	}
	c.send(proto.Request{Op: proto.OpReadLAC, ID: 2, Ledger: 3, PrevLAC: 0, Timeout: 20000})
	w.do(addReq(1, 3, 0, -1, "a"))
	w.do(addReq(2, 3, 1, 0, "b")) // LAC 0: not yet newer than 0
	w.do(addReq(3, 3, 2, 1, "c")) // LAC 1 wakes the poll
	r := c.recv()
	if r.ID != 2 || r.Status != proto.StatusOK || r.LAC != 1 {
		t.Fatalf("long poll answered %+v, want LAC 1", r)
	}
}

func TestBadInputOverTCP(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()), Deps{})

	t.Run("unknown op keeps the connection", func(t *testing.T) {
		c := dialRaw(t, s.Addr())
		if r := c.do(proto.Request{Op: 42, ID: 5, Payload: []byte("??")}); r.Status != proto.StatusUnknownOp || r.ID != 5 {
			t.Fatalf("%+v", r)
		}
		if r := c.do(proto.Request{Op: proto.OpInfo, ID: 6}); r.Status != proto.StatusOK {
			t.Fatalf("connection unusable after unknown op: %+v", r)
		}
	})
	t.Run("short bodies get BadRequest", func(t *testing.T) {
		c := dialRaw(t, s.Addr())
		for _, op := range []proto.Op{proto.OpAdd, proto.OpRead, proto.OpReadLAC, proto.OpFence, proto.OpDelete} {
			frame := []byte{0, 0, 0, 14, proto.Version, byte(op), 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1, 2}
			c.writeBytes(frame)
			if r := c.recv(); r.Status != proto.StatusBadRequest || r.ID != 9 {
				t.Fatalf("op %v: %+v", op, r)
			}
		}
	})
	t.Run("bad entries are refused and leave nothing behind", func(t *testing.T) {
		c := dialRaw(t, s.Addr())
		bad := addReq(1, 50, 0, -1, "data")
		bad.Payload[len(bad.Payload)-1] ^= 1 // checksum mismatch
		if r := c.do(bad); r.Status != proto.StatusBadRequest {
			t.Fatalf("corrupt entry: %v", r.Status)
		}
		mism := addReq(2, 50, 1, -1, "data") // request says entry 1...
		mism.Entry = 3                       // ...header says 1
		if r := c.do(mism); r.Status != proto.StatusBadRequest {
			t.Fatalf("mismatched header: %v", r.Status)
		}
		short := proto.Request{Op: proto.OpAdd, ID: 3, Ledger: 50, Entry: 0, Payload: []byte("tiny")}
		if r := c.do(short); r.Status != proto.StatusBadRequest {
			t.Fatalf("short entry: %v", r.Status)
		}
		if r := c.do(proto.Request{Op: proto.OpRead, ID: 4, Ledger: 50, Entry: 0}); r.Status != proto.StatusNoLedger {
			t.Fatalf("rejected adds left state behind: %v", r.Status)
		}
	})
	t.Run("oversize frame gets TooLarge and a close", func(t *testing.T) {
		c := dialRaw(t, s.Addr())
		big := addReq(77, 51, 0, -1, string(make([]byte, 2<<20)))
		go c.nc.Write(proto.AppendRequest(nil, &big)) // the bookie stops reading part-way: ignore write errors
		if r := c.recv(); r.Status != proto.StatusTooLarge || r.ID != 77 {
			t.Fatalf("%+v", r)
		}
		if !c.closed() {
			t.Fatal("connection still open after an oversize frame")
		}
	})
	t.Run("undecodable header closes", func(t *testing.T) {
		for _, b := range [][]byte{
			{0, 0, 0, 2, 1, 1}, // shorter than a header
			{0, 0, 0, 12, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, // bad version
		} {
			c := dialRaw(t, s.Addr())
			c.writeBytes(b)
			if !c.closed() {
				t.Fatalf("%x: connection left open", b)
			}
		}
	})
	t.Run("truncated frames and garbage", func(t *testing.T) {
		for _, b := range [][]byte{
			proto.AppendRequest(nil, &proto.Request{Op: proto.OpRead, ID: 1, Ledger: 1})[:9],
			[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
			bytes.Repeat([]byte{0xff}, 100),
		} {
			c := dialRaw(t, s.Addr())
			c.writeBytes(b)
			c.nc.(*net.TCPConn).CloseWrite()
			if !c.closed() {
				t.Fatalf("%q: connection left open", b)
			}
		}
	})
	// After all that the bookie still serves.
	c := dialRaw(t, s.Addr())
	if r := c.do(addReq(1, 60, 0, -1, "ok")); r.Status != proto.StatusOK {
		t.Fatalf("bookie unhealthy after bad input: %v", r.Status)
	}
}

func TestReadOnlyMode(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()), Deps{})
	c := dialRaw(t, s.Addr())
	if r := c.do(addReq(1, 1, 0, -1, "before")); r.Status != proto.StatusOK {
		t.Fatal(r.Status)
	}
	s.SetReadOnly(true)
	if r := c.do(addReq(2, 1, 1, 0, "during")); r.Status != proto.StatusReadOnly {
		t.Fatalf("add on read-only bookie: %v", r.Status)
	}
	if r := c.do(proto.Request{Op: proto.OpInfo, ID: 3}); !r.ReadOnly {
		t.Fatal("info does not say read-only")
	}
	if r := c.do(proto.Request{Op: proto.OpRead, ID: 4, Ledger: 1, Entry: 0}); r.Status != proto.StatusOK {
		t.Fatalf("reads must still work when read-only: %v", r.Status)
	}
	s.SetReadOnly(false)
	if r := c.do(addReq(5, 1, 1, 0, "after")); r.Status != proto.StatusOK {
		t.Fatal(r.Status)
	}
	// A threshold the disk is already past turns the bookie read-only by itself.
	cfg := testConfig(t, t.TempDir())
	cfg.ReadOnlyThreshold = 1e-9
	s2 := startServer(t, cfg, Deps{})
	if !s2.ReadOnly() {
		t.Fatal("bookie over its disk threshold is not read-only")
	}
}

// A flipped bit in ledger storage is reported as corruption, never returned.
func TestBitFlipDetected(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	s := startServer(t, cfg, Deps{})
	c := dialRaw(t, s.Addr())
	marker := "MARKER-0123456789-MARKER"
	for i := uint64(0); i < 10; i++ {
		data := "filler"
		if i == 4 {
			data = marker
		}
		if r := c.do(addReq(i+1, 5, i, int64(i)-1, data)); r.Status != proto.StatusOK {
			t.Fatal(r.Status)
		}
	}
	if err := s.Shutdown(context.Background()); err != nil { // flushes to ledger storage
		t.Fatal(err)
	}
	flipped := 0
	filepath.WalkDir(cfg.LedgerDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if i := bytes.Index(b, []byte(marker)); i >= 0 {
			b[i+3] ^= 0x10
			flipped++
			return os.WriteFile(path, b, 0o644)
		}
		return nil
	})
	if flipped == 0 {
		t.Fatal("entry not found in ledger storage after shutdown")
	}
	cfg.ListenAddr = "127.0.0.1:0"
	s2 := startServer(t, cfg, Deps{})
	c2 := dialRaw(t, s2.Addr())
	r := c2.do(proto.Request{Op: proto.OpRead, ID: 1, Ledger: 5, Entry: 4})
	if r.Status != proto.StatusCorrupt || len(r.Payload) != 0 {
		t.Fatalf("read of flipped entry: status %v, %d payload bytes", r.Status, len(r.Payload))
	}
	if r := c2.do(proto.Request{Op: proto.OpRead, ID: 2, Ledger: 5, Entry: 5}); r.Status != proto.StatusOK {
		t.Fatalf("neighbouring entry: %v", r.Status)
	}
}

func TestRegistration(t *testing.T) {
	dir := t.TempDir()
	e, err := metastore.StartEmbedded(context.Background(), metastore.EmbedConfig{Dir: filepath.Join(dir, "etcd")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	meta, err := metastore.Connect(context.Background(), metastore.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	cfg := testConfig(t, dir)
	cfg.Rack = "rack-a"
	s := startServer(t, cfg, Deps{Meta: meta})
	kv, err := meta.Get(context.Background(), RegistrationKey("test", s.ID()))
	if err != nil {
		t.Fatal(err)
	}
	var reg Registration
	if err := json.Unmarshal(kv.Value, &reg); err != nil {
		t.Fatal(err)
	}
	if reg.Address != s.Addr() || reg.Rack != "rack-a" || reg.TotalBytes == 0 || reg.ReadOnly {
		t.Fatalf("registration %+v", reg)
	}
	if reg.InstanceID == "" || reg.InstanceID != s.InstanceID() {
		t.Fatalf("registration %+v does not carry the instance id %s", reg, s.InstanceID())
	}
	// A second bookie claiming the same id is refused (its empty
	// directories are not those the id was created with).
	cfg2 := testConfig(t, t.TempDir())
	cfg2.ID = s.ID()
	if s2, err := New(cfg2, Deps{Meta: meta}); !errors.Is(err, ErrIdentity) {
		if err == nil {
			s2.Shutdown(context.Background())
		}
		t.Fatalf("duplicate bookie id: %v, want ErrIdentity", err)
	}
	// Read-only state reaches the registration.
	s.SetReadOnly(true)
	waitFor(t, 10*time.Second, func() bool {
		kv, err := meta.Get(context.Background(), RegistrationKey("test", s.ID()))
		return err == nil && json.Unmarshal(kv.Value, &reg) == nil && reg.ReadOnly
	})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Get(context.Background(), RegistrationKey("test", s.ID())); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("registration left after shutdown: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{ListenAddr: "nope", ReadOnlyThreshold: 2, MaxFrameSize: 10, RegistrationTTL: time.Millisecond, Group: "a,b", ReadWorkers: -1}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"journalDir", "ledgerDir", "listenAddr", "readOnlyThreshold", "maxFrameSize", "registrationTTL", "group", "readWorkers"} {
		if !bytes.Contains([]byte(err.Error()), []byte("bookie."+field)) {
			t.Errorf("error does not name bookie.%s: %v", field, err)
		}
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Fatal("New accepted an empty config")
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pipe() (net.Conn, net.Conn) { return net.Pipe() }

// A storage I/O failure (here: the journal's fdatasync fails) turns the
// bookie read-only: the add in flight and every later add are answered
// ReadOnly (so ledger writers replace the bookie), Info says read-only, and
// entries stored before the failure still read back.
func TestStorageFailureTurnsBookieReadOnly(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	// The first syncs are the cookies' (file and directory, each directory).
	inj := &vfs.NthInjector{N: 5, Ops: []vfs.Op{vfs.OpSync}, Sticky: true}
	s := startServer(t, cfg, Deps{FS: vfs.NewErrorFS(vfs.Default, inj)})
	c := dialRaw(t, s.Addr())
	var stored []uint64
	for e := uint64(0); e < 10; e++ {
		r := c.do(addReq(e+1, 4, e, int64(e)-1, "data"))
		switch r.Status {
		case proto.StatusOK:
			stored = append(stored, e)
		case proto.StatusReadOnly:
		default:
			t.Fatalf("add %d: status %v, want OK or ReadOnly", e, r.Status)
		}
	}
	if len(stored) == 0 || len(stored) == 10 {
		t.Fatalf("stored %v: the injected failure should stop part-way", stored)
	}
	if !s.ReadOnly() {
		t.Fatal("bookie with failed storage is not read-only")
	}
	if r := c.do(proto.Request{Op: proto.OpInfo, ID: 100}); !r.ReadOnly {
		t.Fatal("info does not say read-only")
	}
	for _, e := range stored {
		if r := c.do(proto.Request{Op: proto.OpRead, ID: 200 + e, Ledger: 4, Entry: e}); r.Status != proto.StatusOK {
			t.Fatalf("entry %d acked before the failure: read says %v", e, r.Status)
		}
	}
}

// Shutdown waits for everything the server started: after it returns (with
// connections open and a long poll in flight when it began) the process is
// back to the goroutines it had before the server existed.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := New(testConfig(t, t.TempDir()), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, s.Addr())
	for e := uint64(0); e < 20; e++ {
		c.do(addReq(e+1, 1, e, int64(e)-1, "x"))
	}
	c.send(proto.Request{Op: proto.OpReadLAC, ID: 99, Ledger: 1, PrevLAC: 100, Timeout: 60000})
	idle := dialRaw(t, s.Addr())
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.nc.Close()
	idle.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after shutdown, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
