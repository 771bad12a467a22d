package pulsarconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/wire"
	"github.com/isobar-mq/isobar/wire/pb"
)

// ErrClosed is returned (wrapped) by everything on a client, consumer or
// producer that was closed: by the caller, by the broker (CLOSE_CONSUMER,
// CLOSE_PRODUCER) or because its connection was lost.
var ErrClosed = errors.New("pulsarconn: closed")

const (
	defaultOperationTimeout = 10 * time.Second
	defaultConnectTimeout   = 5 * time.Second
	// maxLookupHops bounds the redirects one lookup follows.
	maxLookupHops = 8
	// keepAliveInterval is how often a connection pings the broker; one
	// silent for three intervals is closed.
	keepAliveInterval = 30 * time.Second
	clientVersion     = replication.ClientVersion
	protocolVersion   = 21
)

// Config configures a Client.
type Config struct {
	// ServiceURL is "pulsar://host:port" of any broker of the region.
	// Required.
	ServiceURL string
	// Logger receives debug and warning logs; nil discards them.
	Logger *slog.Logger
	// OperationTimeout bounds each of Subscribe and CreateProducer as a
	// whole (lookups, redirects and retries included) and each
	// acknowledgement and close request; 0 means 10s.
	OperationTimeout time.Duration
	// MaxFrameSize is the largest frame accepted from a broker; 0 means
	// wire.DefaultMaxFrameSize (5 MiB + 10 KiB).
	MaxFrameSize int
	// ConnectTimeout bounds dialling a broker and the CONNECT handshake;
	// 0 means 5s.
	ConnectTimeout time.Duration
	// TLS, when set, connects over TLS: ServiceURL is then
	// pulsar+ssl://host:port[,...] and lookups follow the brokers' TLS
	// URLs. The server's name is verified against its certificate.
	TLS *tls.Config
	// Token, when set, returns the token the client authenticates with
	// (auth method "token"), at each connection and each AUTH_CHALLENGE,
	// so a token file replaced on disk is used from the next one.
	Token func() (string, error)
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.ServiceURL == "" {
		errs = append(errs, errors.New("pulsarconn.ServiceURL: required"))
	} else if _, err := parseURLs(c.ServiceURL, c.TLS != nil); err != nil {
		errs = append(errs, fmt.Errorf("pulsarconn.ServiceURL: %w", err))
	}
	if c.OperationTimeout < 0 {
		errs = append(errs, fmt.Errorf("pulsarconn.OperationTimeout: %v is negative", c.OperationTimeout))
	}
	if c.MaxFrameSize < 0 {
		errs = append(errs, fmt.Errorf("pulsarconn.MaxFrameSize: %d is negative", c.MaxFrameSize))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("pulsarconn.ConnectTimeout: %v is negative", c.ConnectTimeout))
	}
	return errors.Join(errs...)
}

// scheme is the service URL scheme of a client with or without TLS.
func scheme(tls bool) string {
	if tls {
		return "pulsar+ssl://"
	}
	return "pulsar://"
}

// parseURLs returns the host:port pairs of a service URL, one host or
// several as in Pulsar's multi-host form "pulsar://h1:p1,h2:p2"
// (pulsar+ssl:// with TLS).
func parseURLs(u string, tls bool) ([]string, error) {
	rest, ok := strings.CutPrefix(u, scheme(tls))
	if !ok {
		return nil, fmt.Errorf("%q: want %shost:port[,host:port...]", u, scheme(tls))
	}
	var out []string
	for _, h := range strings.Split(strings.TrimSuffix(rest, "/"), ",") {
		a, err := parseURL(scheme(tls)+h, tls)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", u, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseURL returns the host:port of a "pulsar://host:port" URL
// ("pulsar+ssl://" with TLS).
func parseURL(u string, tls bool) (string, error) {
	addr, ok := strings.CutPrefix(u, scheme(tls))
	if !ok {
		return "", fmt.Errorf("%q: want pulsar://host:port", u)
	}
	addr = strings.TrimSuffix(addr, "/")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("%q: %w", u, err)
	}
	return addr, nil
}

// Client holds the connections to the brokers of one region, one per
// broker address, and creates consumers and producers on them.
type Client struct {
	cfg   Config
	addrs []string      // of cfg.ServiceURL
	seed  atomic.Uint32 // index of the address lookups start at
	log   *slog.Logger

	nextID  atomic.Uint64 // producer and consumer ids
	nextReq atomic.Uint64 // request ids

	// wg counts the goroutines of connections and producers.
	wg sync.WaitGroup

	// mu guards the pool and closed.
	mu     sync.Mutex
	pool   map[string]*dialing
	closed bool
}

// dialing is a pool slot: a connection being set up (done open) or set up.
type dialing struct {
	done chan struct{}
	cn   *conn // set with err before done is closed
	err  error
}

// New returns a client for cfg. It does no I/O: connections are opened by
// Subscribe and CreateProducer.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.OperationTimeout == 0 {
		cfg.OperationTimeout = defaultOperationTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = wire.DefaultMaxFrameSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addrs, _ := parseURLs(cfg.ServiceURL, cfg.TLS != nil)
	return &Client{cfg: cfg, addrs: addrs, log: log, pool: map[string]*dialing{}}, nil
}

// Close closes every connection, which fails the pending operations and
// the consumers and producers with ErrClosed, and waits for the client's
// goroutines (producer callbacks included: a callback that never returns
// blocks Close).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var conns []*conn
	for _, d := range c.pool {
		select {
		case <-d.done:
			if d.cn != nil {
				conns = append(conns, d.cn)
			}
		default:
			// Still dialling: the dialler sees closed and gives up.
		}
	}
	c.mu.Unlock()
	for _, cn := range conns {
		cn.fail(fmt.Errorf("%w: client closed", ErrClosed))
	}
	c.wg.Wait()
	return nil
}

// goroutine runs fn as a goroutine Close waits for; false when the client
// is already closed (fn does not run).
func (c *Client) goroutine(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// connTo returns the pooled connection to addr, dialling it if needed.
func (c *Client) connTo(ctx context.Context, addr string) (*conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: client closed", ErrClosed)
		}
		d, ok := c.pool[addr]
		if ok {
			c.mu.Unlock()
			select {
			case <-d.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("pulsarconn: connect to %s: %w", addr, ctx.Err())
			}
			if d.err != nil {
				return nil, d.err
			}
			if !d.cn.dead() {
				return d.cn, nil
			}
			// Dead: it removes itself from the pool; look again.
			c.mu.Lock()
			if c.pool[addr] == d {
				delete(c.pool, addr)
			}
			c.mu.Unlock()
			continue
		}
		d = &dialing{done: make(chan struct{})}
		c.pool[addr] = d
		c.mu.Unlock()

		cn, err := c.dial(ctx, addr)
		c.mu.Lock()
		if err == nil && c.closed {
			err = fmt.Errorf("%w: client closed", ErrClosed)
		}
		if err == nil {
			c.wg.Add(2)
			go func() { defer c.wg.Done(); cn.readLoop() }()
			go func() { defer c.wg.Done(); cn.keepAlive() }()
		} else {
			if cn != nil {
				cn.nc.Close()
			}
			cn = nil
			delete(c.pool, addr)
		}
		d.cn, d.err = cn, err
		close(d.done)
		c.mu.Unlock()
		return cn, err
	}
}

// forget removes cn from the pool once it is dead.
func (c *Client) forget(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.pool[cn.addr]; d != nil && d.cn == cn {
		delete(c.pool, cn.addr)
	}
}

// retriable reports whether an operation failing with err may succeed if
// tried again from the lookup: a retriable server error, or a connection
// lost or refused (not a closed client).
func (c *Client) retriable(err error) bool {
	var we *errkind.Error
	if errors.As(err, &we) {
		return we.Retriable
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return false
	}
	var ne net.Error
	return errors.Is(err, errConnLost) || errors.As(err, &ne)
}

// retry runs op until it succeeds, fails for good or ctx ends, backing off
// between attempts.
func (c *Client) retry(ctx context.Context, what string, op func(ctx context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		err := op(ctx)
		if err == nil || !c.retriable(err) || ctx.Err() != nil {
			return err
		}
		c.log.Debug("retrying", "op", what, "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// lookup finds the broker that owns topic and returns a connection to it.
func (c *Client) lookup(ctx context.Context, topic string) (*conn, error) {
	seed := c.seed.Load()
	addr := c.addrs[int(seed)%len(c.addrs)]
	authoritative := false
	for hop := range maxLookupHops {
		cn, err := c.connTo(ctx, addr)
		if err != nil {
			if hop == 0 {
				// The next lookup starts at the next service host.
				c.seed.CompareAndSwap(seed, seed+1)
			}
			return nil, err
		}
		reqID := c.nextReq.Add(1)
		resp, err := cn.request(ctx, reqID, &pb.BaseCommand{
			Type: pb.BaseCommand_LOOKUP.Enum(),
			LookupTopic: &pb.CommandLookupTopic{
				Topic: &topic, RequestId: &reqID, Authoritative: &authoritative,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("pulsarconn: lookup %s on %s: %w", topic, addr, err)
		}
		r := resp.GetLookupTopicResponse()
		if r == nil {
			return nil, fmt.Errorf("pulsarconn: lookup %s on %s: unexpected %v", topic, addr, resp.GetType())
		}
		next := addr
		u := r.GetBrokerServiceUrl()
		if c.cfg.TLS != nil {
			u = r.GetBrokerServiceUrlTls()
			if u == "" && r.GetBrokerServiceUrl() != "" {
				return nil, fmt.Errorf("pulsarconn: lookup %s on %s: the owning broker advertises no TLS URL", topic, addr)
			}
		}
		if u != "" {
			if next, err = parseURL(u, c.cfg.TLS != nil); err != nil {
				return nil, fmt.Errorf("pulsarconn: lookup %s on %s: broker URL: %w", topic, addr, err)
			}
		}
		switch r.GetResponse() {
		case pb.CommandLookupTopicResponse_Connect:
			if next == addr {
				return cn, nil
			}
			return c.connTo(ctx, next)
		case pb.CommandLookupTopicResponse_Redirect:
			c.log.Debug("lookup redirected", "topic", topic, "from", addr, "to", next)
			addr, authoritative = next, r.GetAuthoritative()
		default:
			return nil, fmt.Errorf("pulsarconn: lookup %s on %s: %w", topic, addr, serverError(r.GetError(), r.GetMessage()))
		}
	}
	return nil, fmt.Errorf("pulsarconn: lookup %s: more than %d redirects", topic, maxLookupHops)
}

// serverError is the error for a server error code and message: it wraps
// the code's *errkind.Error, so errors.Is works on it.
func serverError(code pb.ServerError, msg string) error {
	return &brokerError{code: code, we: wire.ErrorFor(code), msg: msg}
}

// brokerError is an error the broker sent: its code, its message (which
// may name the code already) and the code's *errkind.Error.
type brokerError struct {
	code pb.ServerError
	we   *errkind.Error
	msg  string
}

func (e *brokerError) Error() string {
	if e.msg == "" {
		return e.we.Error()
	}
	if strings.Contains(e.msg, e.code.String()) {
		return "broker: " + e.msg
	}
	return fmt.Sprintf("broker: %s: %s", e.code, e.msg)
}

func (e *brokerError) Unwrap() error { return e.we }

// opCtx bounds a whole operation by OperationTimeout.
func (c *Client) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.OperationTimeout)
}
