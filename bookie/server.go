// Package bookie is the storage node of a region: it keeps ledger entries in
// a journal and ledger storage on local disks (package storage), serves them
// over the bookie protocol (package proto) to ledger clients, and registers
// itself in the region's metadata store under a lease. BookKeeper's bookie is
// the model.
package bookie

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/bookie/storage"
	"github.com/isobar-mq/isobar/metastore"
)

// Server is a running bookie.
type Server struct {
	cfg     Config
	store   *storage.Store
	meta    metastore.Meta // nil: not registered anywhere (tests of the protocol alone)
	logger  *slog.Logger
	metrics *metrics
	ident   identity    // the cookie; settled by New, or by StartOn for legacy directories
	tlsCfg  *tls.Config // nil: plaintext
	// hsTimeout is handshakeTimeout when the server was made.
	hsTimeout time.Duration

	// lastHandshakeWarn (unix nanoseconds) and quietHandshakeFailures
	// keep refused TLS handshakes to one warning a minute.
	lastHandshakeWarn      atomic.Int64
	quietHandshakeFailures atomic.Int64

	readOnly      atomic.Bool
	forceReadOnly atomic.Bool

	lacMu sync.Mutex
	lacs  map[uint64]*lacState // guarded by lacMu

	// readSlots holds one token per entry read being served: its capacity
	// is Config.ReadWorkers.
	readSlots chan struct{}

	mu       sync.Mutex
	ln       net.Listener
	reg      *metastore.Registration // nil until registered, and without a metadata store
	conns    map[*conn]struct{}
	shutdown bool
	// cancel stops the background loops (accept, usage); connCancel ends
	// the connections' in-flight work, only when a shutdown's deadline
	// passes.
	cancel     context.CancelFunc
	connCancel context.CancelFunc
	loops      sync.WaitGroup // accept and usage loops
	wg         sync.WaitGroup // connections
}

// lacState is the highest last-add-confirmed a bookie has seen piggybacked
// on a ledger's entries, and a channel closed when it rises.
type lacState struct {
	lac     int64
	changed chan struct{}
}

// Registration is what a bookie publishes under /isobar/<region>/bookies/<id>
// (defined with the protocol, which ledger clients share).
type Registration = proto.Registration

// RegistrationKey is the metadata key a bookie registers under.
func RegistrationKey(region, id string) string {
	return proto.BookiesPrefix(metastore.RegionPrefix(region)) + id
}

// New settles the bookie's identity and opens its storage (replaying its
// journal). Call Start or Serve to accept connections. deps.Meta may be nil
// when the bookie need not register.
//
// The identity comes from the cookie in the journal and ledger directories
// (docs/format/cookie.md): New checks it against the configuration and the
// metadata store's copy, and refuses, with an error wrapping ErrIdentity
// and before anything is written, when they disagree. At a first start it
// makes the cookie (the configured id, or a generated one) and writes it
// into both directories and then into the metadata store. Legacy
// directories (data, no cookie) adopt the configured id or else the
// advertised address; when that is the listener's, StartOn settles it.
func New(cfg Config, deps Deps) (*Server, error) {
	meta, logger := deps.Meta, deps.Logger
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if meta != nil && cfg.Region == "" {
		return nil, errors.New("bookie: region: required when registering in the metadata store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "bookie")
	var tlsCfg *tls.Config
	if cfg.TLS.Enabled() {
		c, err := cfg.TLS.Server()
		if err != nil {
			return nil, fmt.Errorf("bookie.%w", err)
		}
		tlsCfg = c
	}
	ident, err := settleIdentity(cfg, deps.FS, meta)
	if err != nil {
		return nil, err
	}
	if !ident.pending {
		cfg.ID = ident.cookie.BookieID
	}
	if ident.legacy {
		logger.Info("directories without a cookie (written by an earlier version): adopting an id",
			"id", cmp.Or(cfg.ID, "the listener's address"))
	}
	// Until StartOn settles a pending id, measurements carry the best guess.
	m, err := newMetrics(deps.MeterProvider, cmp.Or(cfg.ID, cfg.AdvertiseAddr, cfg.ListenAddr))
	if err != nil {
		return nil, err
	}
	deps.Logger = logger
	scfg := cfg.storageConfig(deps)
	scfg.Observer = m
	st, err := storage.Open(scfg)
	if err != nil {
		return nil, fmt.Errorf("bookie: open storage: %w", err)
	}
	if err := m.observe(st); err != nil {
		st.Close()
		return nil, err
	}
	return &Server{
		cfg:       cfg,
		store:     st,
		meta:      meta,
		logger:    logger,
		metrics:   m,
		ident:     ident,
		tlsCfg:    tlsCfg,
		hsTimeout: handshakeTimeout,
		lacs:      map[uint64]*lacState{},
		readSlots: make(chan struct{}, cfg.ReadWorkers),
		conns:     map[*conn]struct{}{},
	}, nil
}

// ID is the bookie id: the one in its directories' cookie (configured or
// generated at its first start; for directories of earlier versions, the
// configured id or the advertised address). Empty until StartOn only for
// legacy directories that adopt the listener's address.
func (s *Server) ID() string { return s.cfg.ID }

// InstanceID is the instance id of the bookie's cookie: random, made when
// its directories were first used.
func (s *Server) InstanceID() string { return s.ident.cookie.InstanceID }

// Addr is the address the bookie listens on, once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return s.cfg.ListenAddr
	}
	return s.ln.Addr().String()
}

// ReadOnly reports whether the bookie refuses adds: its disk is past the
// threshold, a test forced it, or its storage failed (an I/O error
// stops the storage accepting writes until a restart). Ledger writers
// replace a read-only bookie and placement skips it.
func (s *Server) ReadOnly() bool {
	return s.readOnly.Load() || s.forceReadOnly.Load() || s.store.Failed() != nil
}

// Start listens on the configured address, registers the bookie and serves in
// the background until Shutdown.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("bookie: listen %s: %w", s.cfg.ListenAddr, err)
	}
	return s.StartOn(ctx, ln)
}

// StartOn is Start on a listener the caller made.
func (s *Server) StartOn(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown || s.ln != nil {
		s.mu.Unlock()
		ln.Close()
		return errors.New("bookie: already started or shut down")
	}
	s.ln = ln
	pending := s.ident.pending
	if pending {
		s.cfg.ID = s.advertised()
		s.ident.cookie.BookieID = s.cfg.ID
		s.ident.pending = false
	}
	s.metrics.setBookie(s.cfg.ID)
	rctx, cancel := context.WithCancel(context.Background())
	cctx, connCancel := context.WithCancel(context.Background())
	s.cancel, s.connCancel = cancel, connCancel
	s.mu.Unlock()

	if pending {
		// Legacy directories adopt the listener's address, the id earlier
		// versions used: check it with the metadata store and write the
		// cookies now.
		s.logger.Info("directories without a cookie adopt the advertised address as their id", "id", s.cfg.ID)
		if err := finishIdentity(ctx, s.meta, s.cfg, &s.ident); err != nil {
			cancel()
			connCancel()
			ln.Close()
			return err
		}
	}
	s.refreshReadOnly()
	if s.meta != nil {
		reg, err := s.register(ctx)
		if err != nil {
			cancel()
			connCancel()
			ln.Close()
			return err
		}
		s.mu.Lock()
		s.reg = reg
		s.mu.Unlock()
	}
	s.loops.Add(1)
	go func() { defer s.loops.Done(); s.usageLoop(rctx) }()
	s.loops.Add(1)
	go func() { defer s.loops.Done(); s.acceptLoop(rctx, cctx, ln) }()
	s.logger.Info("bookie serving", "id", s.cfg.ID, "addr", ln.Addr().String(), "tls", s.tlsCfg != nil,
		"journal", s.cfg.JournalDir, "ledgers", s.cfg.LedgerDir)
	return nil
}

// advertised is the address clients dial: AdvertiseAddr, else the
// listener's address, with the host name in place of a wildcard host
// (0.0.0.0 or ::, which nobody can dial).
func (s *Server) advertised() string {
	if s.cfg.AdvertiseAddr != "" {
		return s.cfg.AdvertiseAddr
	}
	addr := s.ln.Addr().String()
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		if h, herr := os.Hostname(); herr == nil && h != "" {
			return net.JoinHostPort(h, port)
		}
	}
	return addr
}

func (s *Server) acceptLoop(ctx, connCtx context.Context, ln net.Listener) {
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			if tempDelay == 0 {
				tempDelay = 5 * time.Millisecond
			} else if tempDelay < time.Second {
				tempDelay *= 2
			}
			s.logger.Warn("accept failed; retrying", "err", err, "delay", tempDelay)
			select {
			case <-time.After(tempDelay):
			case <-ctx.Done():
				return
			}
			continue
		}
		tempDelay = 0
		s.ServeConn(connCtx, nc)
	}
}

// ServeConn serves one connection in the background (tests hand it one end
// of net.Pipe). It returns at once. With TLS configured the connection is
// served over TLS; the handshake runs on the connection's goroutine, never
// the accept loop's, bounded by handshakeTimeout.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	var tc *tls.Conn
	if s.tlsCfg != nil {
		tc = tls.Server(nc, s.tlsCfg)
		nc = tc
	}
	c := s.newConn(nc)
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if tc == nil || s.handshake(ctx, c, tc) {
			c.serve(ctx)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
}

// handshakeTimeout bounds a TLS handshake; a client that has not finished
// it by then is disconnected.
var handshakeTimeout = 10 * time.Second

// handshake runs the server side of the TLS handshake, bounded by
// s.hsTimeout and ctx. A failure (a plaintext client, a certificate
// the region's CA did not sign, none when one is required, a client too
// slow) closes the connection and nothing else: it is logged at Debug when
// the peer closed without a word (port probes) or the bookie is shutting
// down, otherwise at Warn at most once a minute, at Debug in between.
func (s *Server) handshake(ctx context.Context, c *conn, tc *tls.Conn) bool {
	hctx, cancel := context.WithTimeout(ctx, s.hsTimeout)
	defer cancel()
	err := tc.HandshakeContext(hctx)
	if err == nil {
		return true
	}
	tc.Close()
	s.mu.Lock()
	down := s.shutdown
	s.mu.Unlock()
	if errors.Is(hctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no handshake within %v: %w", s.hsTimeout, err)
	}
	if down || errors.Is(err, io.EOF) {
		c.logger.Debug("TLS handshake failed", "err", err)
		return false
	}
	now := time.Now().UnixNano()
	last := s.lastHandshakeWarn.Load()
	if now-last >= int64(time.Minute) && s.lastHandshakeWarn.CompareAndSwap(last, now) {
		c.logger.Warn("TLS handshake failed; connection refused", "err", err,
			"alsoRefusedSinceLastWarning", s.quietHandshakeFailures.Swap(0))
		return false
	}
	s.quietHandshakeFailures.Add(1)
	c.logger.Debug("TLS handshake failed; connection refused", "err", err)
	return false
}

// Shutdown stops accepting, deregisters, closes connections once their
// in-flight requests are answered (or ctx ends), and closes the storage.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return nil
	}
	s.shutdown = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		// Stop reading new requests; requests in flight still get answers.
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	cancel, connCancel, reg := s.cancel, s.connCancel, s.reg
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		s.loops.Wait()
	}
	if reg != nil {
		// Revoking the lease deletes the registration at once.
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		if err := reg.Close(dctx); err != nil {
			s.logger.Warn("deregistering failed; the registration expires with its lease", "err", err)
		}
		dcancel()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		if connCancel != nil {
			connCancel()
		}
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
	}
	<-done
	if connCancel != nil {
		connCancel()
	}
	s.metrics.stop()
	if cerr := s.store.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("bookie: close storage: %w", cerr)
	}
	s.logger.Info("bookie stopped", "id", s.cfg.ID)
	return err
}

// handleAdd validates the entry and hands it to the journal; the reply is
// sent from the journal's goroutine once the entry is durable.
func (s *Server) handleAdd(req *proto.Request, reply func(*proto.Response)) {
	r := &proto.Response{Op: proto.OpAdd, ID: req.ID, Ledger: req.Ledger, Entry: req.Entry}
	e, err := proto.DecodeEntry(req.Payload)
	switch {
	case err != nil:
		s.logger.Warn("rejecting add with a bad entry", "ledger", req.Ledger, "entry", req.Entry, "err", err)
		r.Status = proto.StatusBadRequest
	case e.Ledger != req.Ledger || e.ID != req.Entry:
		s.logger.Warn("rejecting add whose entry header disagrees with the request",
			"ledger", req.Ledger, "entry", req.Entry, "headerLedger", e.Ledger, "headerEntry", e.ID)
		r.Status = proto.StatusBadRequest
	case len(req.Payload) > s.cfg.MaxEntrySize:
		r.Status = proto.StatusTooLarge
	case s.store.Failed() != nil:
		r.Status = proto.StatusReadOnly // not even recovery adds can be stored
	case s.ReadOnly() && req.Flags&proto.FlagRecovery == 0:
		r.Status = proto.StatusReadOnly
	}
	if r.Status != proto.StatusOK {
		reply(r)
		return
	}
	// The request frame buffer is fresh per frame, so the storage may keep the payload.
	lac := e.LAC
	s.store.Add(req.Ledger, req.Entry, req.Payload, req.Flags&proto.FlagRecovery != 0, func(err error) {
		r.Status = proto.StatusOf(err)
		if err == nil {
			s.observeLAC(req.Ledger, lac)
		} else if r.Status == proto.StatusInternal {
			s.logger.Error("add failed", "ledger", req.Ledger, "entry", req.Entry, "err", err)
			if s.store.Failed() != nil {
				r.Status = proto.StatusReadOnly // the writer should replace this bookie
			}
		}
		reply(r)
	})
}

func (s *Server) handleInfo(req *proto.Request) *proto.Response {
	r := &proto.Response{Op: proto.OpInfo, ID: req.ID}
	u, err := s.store.Usage()
	if err != nil {
		r.Status = proto.StatusInternal
		return r
	}
	r.Total, r.Free = u.LedgerTotal, u.LedgerFree
	r.ReadOnly = s.ReadOnly()
	r.Payload = []byte(s.cfg.ID)
	return r
}

// handleSlow serves the requests that may wait on the disk or a long poll.
func (s *Server) handleSlow(ctx context.Context, req *proto.Request) *proto.Response {
	r := &proto.Response{Op: req.Op, ID: req.ID, Ledger: req.Ledger, Entry: req.Entry}
	switch req.Op {
	case proto.OpRead:
		if req.Flags&proto.FlagFence != 0 {
			if err := s.store.Fence(ctx, req.Ledger); err != nil {
				r.Status = proto.StatusOf(err)
				return r
			}
		}
		data, err := s.store.Read(req.Ledger, req.Entry)
		if err == nil {
			// Verify the writer's checksum too: a flipped bit anywhere is
			// reported as corruption, never returned as data.
			if _, derr := proto.DecodeEntry(data); derr != nil {
				err = derr
			}
		}
		if err != nil {
			r.Status = proto.StatusOf(err)
			if r.Status == proto.StatusCorrupt || r.Status == proto.StatusInternal {
				s.logger.Error("read failed", "ledger", req.Ledger, "entry", req.Entry, "err", err)
			}
			return r
		}
		r.Payload = data
		r.LAC = s.lac(req.Ledger)
	case proto.OpReadLAC:
		lac, err := s.waitLAC(ctx, req.Ledger, req.PrevLAC, time.Duration(req.Timeout)*time.Millisecond)
		r.LAC = lac
		r.Status = proto.StatusOf(err)
	case proto.OpFence:
		if err := s.store.Fence(ctx, req.Ledger); err != nil {
			r.Status = proto.StatusOf(err)
			return r
		}
		r.LAC = s.lac(req.Ledger)
	case proto.OpDelete:
		if err := s.store.Delete(ctx, req.Ledger); err != nil {
			r.Status = proto.StatusOf(err)
			return r
		}
		s.lacMu.Lock()
		if st, ok := s.lacs[req.Ledger]; ok {
			close(st.changed)
			delete(s.lacs, req.Ledger)
		}
		s.lacMu.Unlock()
	}
	return r
}

// lacStateLocked returns the ledger's LAC state, loading it from the last
// stored entry the first time. For a ledger this bookie does not have it
// returns nil, or with create a fresh state at LAC -1 (a long poll or an
// add may reach a bookie before the ledger's first entry does). lacMu must
// be held.
func (s *Server) lacStateLocked(ledger uint64, create bool) *lacState {
	if st, ok := s.lacs[ledger]; ok {
		return st
	}
	last, err := s.store.LastEntryID(ledger)
	if err != nil && !create {
		return nil
	}
	st := &lacState{lac: -1, changed: make(chan struct{})}
	if err == nil && last >= 0 {
		if data, err := s.store.Read(ledger, uint64(last)); err == nil {
			if e, err := proto.DecodeEntry(data); err == nil {
				st.lac = e.LAC
			}
		}
	}
	s.lacs[ledger] = st
	return st
}

func (s *Server) lac(ledger uint64) int64 {
	s.lacMu.Lock()
	defer s.lacMu.Unlock()
	if st := s.lacStateLocked(ledger, false); st != nil {
		return st.lac
	}
	return -1
}

func (s *Server) observeLAC(ledger uint64, lac int64) {
	s.lacMu.Lock()
	defer s.lacMu.Unlock()
	st := s.lacStateLocked(ledger, true)
	if lac > st.lac {
		st.lac = lac
		close(st.changed)
		st.changed = make(chan struct{})
	}
}

// waitLAC answers the ledger's LAC once it is greater than prev, or after
// timeout (StatusTimeout with the current LAC). A zero timeout answers at once.
func (s *Server) waitLAC(ctx context.Context, ledger uint64, prev int64, timeout time.Duration) (int64, error) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		s.lacMu.Lock()
		// A long poll may arrive before the ledger's first entry: create
		// the state so that entry wakes it.
		st := s.lacStateLocked(ledger, timeout > 0)
		if st == nil {
			s.lacMu.Unlock()
			return -1, storage.ErrNoLedger
		}
		lac, ch := st.lac, st.changed
		s.lacMu.Unlock()
		if lac > prev || timeout == 0 {
			return lac, nil
		}
		select {
		case <-ch:
		case <-timer:
			return lac, context.DeadlineExceeded
		case <-ctx.Done():
			return lac, storage.ErrClosed
		}
	}
}

func (s *Server) refreshReadOnly() (storage.Usage, error) {
	u, err := s.store.Usage()
	if err != nil {
		return u, err
	}
	ro := false
	if u.LedgerTotal > 0 {
		used := float64(u.LedgerTotal-u.LedgerFree) / float64(u.LedgerTotal)
		ro = used >= s.cfg.ReadOnlyThreshold
	}
	if s.readOnly.Swap(ro) != ro {
		s.logger.Warn("bookie read-only state changed", "readOnly", ro, "free", u.LedgerFree, "total", u.LedgerTotal)
	}
	return u, nil
}

func (s *Server) registration() ([]byte, error) {
	u, err := s.refreshReadOnly()
	if err != nil {
		return nil, err
	}
	return json.Marshal(Registration{
		ID: s.cfg.ID, Address: s.advertised(), Rack: s.cfg.Rack, Group: s.cfg.Group,
		TotalBytes: u.LedgerTotal, FreeBytes: u.LedgerFree, ReadOnly: s.ReadOnly(),
		InstanceID: s.ident.cookie.InstanceID,
	})
}

// register publishes the bookie under a lease (metastore.Register), which
// keeps it registered until Shutdown or Abort. A registration under the
// same id that is still live is judged by judgeRegistration.
func (s *Server) register(ctx context.Context) (*metastore.Registration, error) {
	reg, err := metastore.Register(ctx, s.meta, metastore.RegisterConfig{
		Key:      RegistrationKey(s.cfg.Region, s.cfg.ID),
		Value:    s.registration,
		TTL:      s.cfg.RegistrationTTL,
		Existing: s.judgeRegistration,
		Wait:     2*s.cfg.RegistrationTTL + 5*time.Second,
		Logger:   s.logger,
	})
	if err != nil {
		return nil, s.registerErr(err)
	}
	return reg, nil
}

// judgeRegistration decides about a live registration under this
// bookie's id:
//   - with this bookie's instance id it is this bookie's previous life (a
//     crash leaves its lease running for up to a TTL), at this address or
//     another: it is taken over at once. (When re-registering after a lost
//     lease, metastore.Register takes over only this server's own last
//     lease: one under another lease is another process started on this
//     bookie's directories, or copies of them, which the bookie does not
//     fight.)
//   - without an instance id (a bookie of an earlier version) and with
//     this bookie's address, it is this bookie's previous life too, before
//     its upgrade: the bookie waits for it to expire (up to 2×TTL+5s);
//   - otherwise another bookie holds the id: the start fails at once with
//     an error wrapping ErrIdentity.
func (s *Server) judgeRegistration(value []byte) metastore.Verdict {
	var prev Registration
	if json.Unmarshal(value, &prev) != nil {
		return metastore.Refuse
	}
	switch {
	case prev.InstanceID != "" && prev.InstanceID == s.ident.cookie.InstanceID:
		return metastore.TakeOver
	case prev.InstanceID == "" && prev.Address == s.advertised():
		return metastore.WaitGone
	}
	return metastore.Refuse
}

// registerErr explains a registration the store holds for someone else.
func (s *Server) registerErr(err error) error {
	var taken *metastore.TakenError
	if !errors.As(err, &taken) {
		return fmt.Errorf("bookie: register %s: %w", s.cfg.ID, err)
	}
	var prev Registration
	json.Unmarshal(taken.Value, &prev)
	switch {
	case prev.InstanceID == "" && prev.Address == s.advertised():
		return fmt.Errorf("bookie: register %s: the registration of an earlier version at %s is still there after %v: %w",
			s.cfg.ID, prev.Address, taken.Waited, err)
	case prev.InstanceID == s.ident.cookie.InstanceID:
		return fmt.Errorf("%w: live registration: another process registered bookie %q with this bookie's instance id (address %s) "+
			"after this one had registered: two processes run on this bookie's directories or copies of them; stop one",
			ErrIdentity, s.cfg.ID, prev.Address)
	}
	return fmt.Errorf("%w: live registration: another bookie is registered as %q (address %s, instance %s; this bookie is instance %s): "+
		"two bookies are configured with one id or started on copies of one bookie's directories; "+
		"give each bookie its own id and directories",
		ErrIdentity, s.cfg.ID, prev.Address, cmp.Or(prev.InstanceID, "unknown"), s.ident.cookie.InstanceID)
}

// usageLoop keeps the read-only state current and, when the bookie is
// registered, publishes it with its free space in the registration. (The
// registration makes itself again when its lease is lost.)
func (s *Server) usageLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.UsageInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		reg := s.reg
		s.mu.Unlock()
		if reg == nil {
			s.refreshReadOnly()
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := reg.Refresh(pctx)
		cancel()
		switch {
		case errors.Is(err, metastore.ErrNotRegistered):
			s.refreshReadOnly()
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("registration refresh failed", "err", err)
		}
	}
}

// Abort stops the bookie as a crash would: the listener and every
// connection close at once, in-flight requests get no answer, the
// registration is left to expire with its lease, and the storage is
// closed without waiting for connections (the journal is already
// durable). It may be called during or after Shutdown.
func (s *Server) Abort() {
	s.mu.Lock()
	already := s.shutdown
	s.shutdown = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	cancel, connCancel, reg := s.cancel, s.connCancel, s.reg
	s.mu.Unlock()
	if connCancel != nil {
		connCancel()
	}
	if already {
		return // Shutdown runs or ran: it closes the storage
	}
	if cancel != nil {
		cancel()
		s.loops.Wait()
	}
	if reg != nil {
		reg.Abort() // the lease is no longer kept alive: it expires
	}
	s.wg.Wait()
	s.metrics.stop()
	s.store.Close()
	s.logger.Info("bookie aborted", "id", s.cfg.ID)
}

// Ready returns nil when the bookie serves: it listens, is registered in
// the metadata store (when it has one) and its storage has not failed.
func (s *Server) Ready() error {
	s.mu.Lock()
	ln, reg, down := s.ln, s.reg, s.shutdown
	s.mu.Unlock()
	switch {
	case down:
		return errors.New("bookie: shut down")
	case ln == nil:
		return errors.New("bookie: not started")
	case s.meta != nil && reg == nil:
		return errors.New("bookie: not registered in the metadata store")
	case reg != nil && !reg.Registered():
		return fmt.Errorf("bookie: not registered in the metadata store (registering again): %w", s.registerErr(reg.Err()))
	}
	if err := s.store.Failed(); err != nil {
		return fmt.Errorf("bookie: storage failed: %w", err)
	}
	return nil
}
