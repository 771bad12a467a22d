package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

const (
	// maxHandshakeFrame bounds a client's CONNECT frame.
	maxHandshakeFrame = 64 << 10
	// maxLookupFrame bounds the frames of a lookup connection (requests
	// carry a topic name and a few fields).
	maxLookupFrame = 1 << 20
	// minProtocolVersion is the oldest protocol that knows about proxies
	// (proxy_to_broker_url), as in Pulsar.
	minProtocolVersion = 10
	// maxProtocolVersion is the newest protocol the proxy's own answers
	// speak (a proxied connection speaks what the broker answered).
	maxProtocolVersion = 21
	// maxPendingPerConn bounds a lookup connection's requests in progress.
	maxPendingPerConn = 1000
	// authRefreshGrace is how long a challenged client has to answer.
	authRefreshGrace = 30 * time.Second
	// serverVersion is the proxy's CONNECTED.server_version.
	serverVersion = "Isobar Proxy"
)

// clientConn is one client connection: first its CONNECT, then either a
// lookup connection (lookupLoop) or a pipe to one broker (direct).
type clientConn struct {
	s   *Server
	nc  net.Conn
	log *slog.Logger

	ctx       context.Context // ends when the connection closes
	cancel    context.CancelFunc
	closeOnce sync.Once
	wmu       sync.Mutex // whole frames to nc (lookup connections)

	connect *pb.CommandConnect // the client's CONNECT
	pending atomic.Int64       // lookup requests in progress
	slow    sync.WaitGroup     // their goroutines

	dialMu   sync.Mutex
	mu       sync.Mutex
	id       auth.Identity       // the client, when the proxy authenticates
	method   string              // the client's latest credentials
	data     []byte              //
	backends map[string]*backend // lookup connections to brokers, by broker id
	timer    *time.Timer         // the next credential refresh
	awaiting bool                // a challenge waits for its answer
}

func newClientConn(s *Server, nc net.Conn) *clientConn {
	ctx, cancel := context.WithCancel(s.ctx)
	return &clientConn{s: s, nc: nc, ctx: ctx, cancel: cancel,
		log: s.log.With("remote", nc.RemoteAddr().String()), backends: map[string]*backend{}}
}

// close ends the connection: its socket, its pipe or backends, its
// timers. It is safe to call more than once and from any goroutine.
func (c *clientConn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
		c.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		bks := c.backends
		c.backends = map[string]*backend{}
		c.mu.Unlock()
		for _, bk := range bks {
			bk.close(errClientGone)
		}
	})
}

var errClientGone = errors.New("proxy: client connection closed")

func (c *clientConn) serve() {
	defer func() {
		c.close()
		c.slow.Wait()
	}()
	c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	raw, err := wire.ReadFrame(c.nc, maxHandshakeFrame, nil)
	if err != nil {
		if errors.Is(err, wire.ErrFrameTooLarge) {
			c.refuse(fmt.Errorf("%w: %w (before CONNECT at most %d bytes)", errkind.ErrNotAllowed, err, maxHandshakeFrame))
		}
		return
	}
	f, err := wire.DecodeFrame(raw)
	if err != nil || f.Cmd.GetType() != pb.BaseCommand_CONNECT {
		c.refuse(fmt.Errorf("%w: expected CONNECT first, got %v", errkind.ErrNotAllowed, f.Cmd.GetType()))
		return
	}
	cmd := f.Cmd.Connect
	if v := cmd.GetProtocolVersion(); v < minProtocolVersion {
		c.refuse(fmt.Errorf("%w: protocol version %d; the proxy needs %d or later", errkind.ErrUnsupportedVersion, v, minProtocolVersion))
		return
	}
	c.connect = cmd
	c.method, c.data = cmd.GetAuthMethodName(), cmd.GetAuthData()
	if c.s.auth.Enabled() {
		id, err := c.s.auth.Authenticate(c.method, c.data, c.tlsState())
		if err != nil {
			c.log.Info("connection refused", "err", err)
			c.refuse(err)
			return
		}
		c.id = id
		c.log = c.log.With("role", id.Role)
	}
	c.log = c.log.With("client", cmd.GetClientVersion())
	if u := cmd.GetProxyToBrokerUrl(); u != "" {
		c.direct(u)
		return
	}
	c.lookupLoop()
}

// tlsState is the client connection's TLS state (nil in plaintext).
func (c *clientConn) tlsState() *tls.ConnectionState {
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}

// refuse answers the client with an ERROR for err and lets it read it
// before the connection closes.
func (c *clientConn) refuse(err error) {
	c.writeCmd(wire.NewErrorCommand(0, err))
	if hc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
		c.nc.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, 1<<20))
	}
}

// write sends one whole frame to the client.
func (c *clientConn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout + c.s.cfg.KeepAlive))
	_, err := c.nc.Write(frame)
	if err != nil {
		c.close()
	}
	return err
}

func (c *clientConn) writeCmd(cmd *pb.BaseCommand) {
	f, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		c.log.Error("encode command", "type", cmd.GetType(), "err", err)
		return
	}
	_ = c.write(f)
}

// brokerConnect is the CONNECT the proxy sends a broker for this client:
// with authentication on, the proxy's own credentials naming the client
// (original_principal, and its token as original_auth_data); off, the
// client's own credentials.
func (c *clientConn) brokerConnect() (*pb.CommandConnect, error) {
	cc := &pb.CommandConnect{
		ClientVersion:   c.connect.ClientVersion,
		ProtocolVersion: c.connect.ProtocolVersion,
		FeatureFlags:    c.connect.FeatureFlags,
	}
	if cc.ClientVersion == nil {
		cc.ClientVersion = strp("unknown")
	}
	c.mu.Lock()
	method, data, role := c.method, c.data, c.id.Role
	c.mu.Unlock()
	if !c.s.auth.Enabled() {
		if method != "" {
			cc.AuthMethodName, cc.AuthData = &method, data
		}
		cc.AuthMethod = c.connect.AuthMethod
		return cc, nil
	}
	pm, pd, err := c.s.proxyCredentials()
	if err != nil {
		return nil, err
	}
	if pm != "" {
		cc.AuthMethodName, cc.AuthData = &pm, pd
	}
	cc.OriginalPrincipal = &role
	cc.OriginalAuthMethod = &method
	if method == auth.TokenMethod {
		cc.OriginalAuthData = strp(string(data))
	}
	return cc, nil
}

// direct serves a connection for one broker (CONNECT named it): the
// broker must be a live broker of the region; the proxy replays the
// CONNECT to it, relays its answer and then copies bytes both ways.
func (c *clientConn) direct(target string) {
	b, ok := c.s.brokerByHost(target)
	if !ok {
		c.log.Warn("proxy_to_broker_url refused: not a live broker of the region", "target", target)
		c.refuse(fmt.Errorf("%w: proxy: %s is not a live broker of region %s; look the topic up again", errkind.ErrServiceNotReady, truncate(target, 256), c.s.cfg.Region))
		return
	}
	bc, err := c.s.dialBroker(c.ctx, b)
	if err != nil {
		c.log.Warn("cannot reach broker", "broker", b.ID, "err", err)
		c.refuse(fmt.Errorf("%w: proxy: broker %s: %w", errkind.ErrServiceNotReady, b.ID, err))
		return
	}
	defer bc.Close()
	cc, err := c.brokerConnect()
	if err != nil {
		c.refuse(fmt.Errorf("%w: %w", errkind.ErrServiceNotReady, err))
		return
	}
	f, err := wire.AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: cc})
	if err != nil {
		c.refuse(fmt.Errorf("%w: %w", errkind.ErrUnknown, err))
		return
	}
	bc.SetDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	if _, err := bc.Write(f); err != nil {
		c.refuse(fmt.Errorf("%w: proxy: broker %s: %w", errkind.ErrServiceNotReady, b.ID, err))
		return
	}
	raw, err := wire.ReadFrame(bc, maxHandshakeFrame, nil)
	if err != nil {
		c.refuse(fmt.Errorf("%w: proxy: broker %s did not answer CONNECT: %w", errkind.ErrServiceNotReady, b.ID, err))
		return
	}
	reply, err := wire.DecodeFrame(raw)
	if err != nil {
		c.refuse(fmt.Errorf("%w: proxy: broker %s: %w", errkind.ErrServiceNotReady, b.ID, err))
		return
	}
	switch reply.Cmd.GetType() {
	case pb.BaseCommand_CONNECTED:
	case pb.BaseCommand_ERROR:
		// The broker's refusal (credentials, permissions) as it said it.
		_ = c.write(raw)
		c.log.Info("broker refused the connection", "broker", b.ID, "err", reply.Cmd.Error.GetMessage())
		return
	default:
		c.refuse(fmt.Errorf("%w: proxy: broker %s answered CONNECT with %v", errkind.ErrServiceNotReady, b.ID, reply.Cmd.GetType()))
		return
	}
	bc.SetDeadline(time.Time{})
	c.nc.SetDeadline(time.Time{})
	if err := c.write(raw); err != nil {
		return
	}
	c.log.Debug("proxying", "broker", b.ID)
	c.pipe(bc)
}

// pipe copies bytes both ways until either side ends, then closes both.
func (c *clientConn) pipe(bc net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.s.copyCounting(bc, c.nc, toBroker)
		bc.Close()
		c.close()
	}()
	c.s.copyCounting(c.nc, bc, toClient)
	bc.Close()
	c.close()
	<-done
}

// copyCounting copies src to dst, counting the bytes.
func (s *Server) copyCounting(dst, src net.Conn, dir metricOption) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			s.m.bytes.Add(s.ctx, int64(n), dir)
		}
		if err != nil {
			return
		}
	}
}

// dialBroker opens a connection to broker b's Pulsar port (TLS when the
// proxy connects over TLS).
func (s *Server) dialBroker(ctx context.Context, b brokerInfo) (net.Conn, error) {
	addr, err := s.brokerAddr(b)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &unreachableError{err}
	}
	if s.brokerTLS != nil {
		cfg := s.brokerTLS.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	return nc, nil
}

// unreachableError is a broker that could not be dialled: another may be
// tried.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

func strp(s string) *string { return &s }
func boolp(b bool) *bool    { return &b }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
