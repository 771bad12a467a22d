// Package client is the Terraform provider's admin REST client: JSON over
// net/http to one of several regions' web service URLs, errors that carry
// the server's reason, and retries of the failures that are worth
// retrying (see Do).
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultRetryTimeout bounds the retries of one request when
// Config.RetryTimeout is zero.
const DefaultRetryTimeout = 30 * time.Second

// Config describes a client. URLs is required; the zero value of every
// other field is a working default.
type Config struct {
	// URLs are web service URLs (http://host:port), tried in order: a
	// request goes to the last one that answered, and moves on to the
	// next when it cannot connect.
	URLs []string
	// Token, when set, is sent as "Authorization: Bearer <token>", also
	// after a redirect to another broker.
	Token string
	// TLS configures https URLs; nil means Go's defaults.
	TLS *tls.Config
	// RetryTimeout bounds the retries of one request; zero means
	// DefaultRetryTimeout, a negative value means no retries.
	RetryTimeout time.Duration
	// UserAgent is sent with every request; empty means "isobar-terraform".
	UserAgent string
	// OnRetry, when set, is told of each failed attempt that is retried
	// and how long Do waits before the next.
	OnRetry func(ctx context.Context, r Request, err error, wait time.Duration)
}

// Client talks to the admin REST API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client

	mu      sync.Mutex
	current int // index in cfg.URLs of the URL that last answered
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("client: no web service URL")
	}
	for i, u := range cfg.URLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("client: web service URL %q: want http:// or https://", u)
		}
		cfg.URLs[i] = strings.TrimRight(u, "/")
	}
	if cfg.RetryTimeout == 0 {
		cfg.RetryTimeout = DefaultRetryTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "isobar-terraform"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.TLS
	c := &Client{cfg: cfg}
	c.http = &http.Client{
		Transport: tr,
		Timeout:   30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			// net/http drops Authorization on a redirect to another
			// host:port; a broker redirecting to the owner is the same
			// federation.
			if a := via[0].Header.Get("Authorization"); a != "" {
				req.Header.Set("Authorization", a)
			}
			return nil
		},
	}
	return c, nil
}

// At returns a client for one other web service URL (another region's),
// with this client's token and TLS settings and retries bounded by
// retry (negative: none).
func (c *Client) At(url string, retry time.Duration) (*Client, error) {
	cfg := c.cfg
	cfg.URLs, cfg.RetryTimeout = []string{url}, retry
	return New(cfg)
}

// Current is the web service URL the client talks to now (the last that
// answered).
func (c *Client) Current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.URLs[c.current]
}

// TLS reports whether the client talks https (to pick a region's
// serviceUrlTls over its serviceUrl).
func (c *Client) TLS() bool { return strings.HasPrefix(c.cfg.URLs[0], "https://") }

// Error is an answer other than 2xx: the status and the server's reason
// (the "reason" of its JSON error body, else the body's text).
type Error struct {
	Method string
	Path   string
	Status int
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Reason)
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsExists reports whether err says the object already exists (409).
func IsExists(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusConflict && strings.Contains(e.Reason, "already exist")
}

// IsNotEmpty reports whether err says the object is still in use: a
// tenant with namespaces, a namespace with topics (409), a cluster that a
// tenant or namespace names (412).
func IsNotEmpty(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Status == http.StatusConflict || e.Status == http.StatusPreconditionFailed) &&
		strings.Contains(strings.ToLower(e.Reason), "not empty")
}

func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// transient reports whether a request that failed with err may succeed
// when sent again: connection failures, 503, a 500 that is not a corrupt
// record, and the store's concurrent-modification 409. These mirror the
// retriable kinds of the server's error table (docs/admin.md).
func transient(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return true // no answer from any URL
	}
	switch {
	case e.Status == http.StatusServiceUnavailable, e.Status == http.StatusBadGateway, e.Status == http.StatusGatewayTimeout:
		return true
	case e.Status == http.StatusInternalServerError:
		return !strings.Contains(e.Reason, "corrupt")
	case e.Status == http.StatusConflict:
		return strings.Contains(e.Reason, "concurrent modification")
	}
	return false
}

// Request is one admin call.
type Request struct {
	Method string
	// Path starts with /admin/v2/ and is already escaped.
	Path string
	// Body, when not nil, is sent as JSON.
	Body any
	// Out, when not nil, receives the decoded JSON answer (an empty
	// answer leaves it alone).
	Out any
	// RetryIf, when set, also retries the errors it accepts (races that
	// settle: an object still being deleted elsewhere, a namespace whose
	// topics are still going away), within the same bound as transient
	// failures.
	RetryIf func(error) bool
}

// Do sends r, retrying transient failures (and those r.RetryIf accepts)
// with exponential backoff until Config.RetryTimeout has passed since
// the first attempt or ctx ends; it then returns the last error.
func (c *Client) Do(ctx context.Context, r Request) error {
	var body []byte
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return fmt.Errorf("%s %s: encode body: %w", r.Method, r.Path, err)
		}
		body = b
	}
	deadline := time.Now().Add(c.cfg.RetryTimeout)
	backoff := 100 * time.Millisecond
	for {
		err := c.once(ctx, r, body)
		if err == nil {
			return nil
		}
		retry := transient(err) || (r.RetryIf != nil && r.RetryIf(err))
		if !retry || time.Now().Add(backoff).After(deadline) {
			return err
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(ctx, r, err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// once sends r to the current URL, moving on to the next ones when a
// connection cannot be made.
func (c *Client) once(ctx context.Context, r Request, body []byte) error {
	c.mu.Lock()
	start := c.current
	c.mu.Unlock()
	var errs []error
	for k := range c.cfg.URLs {
		i := (start + k) % len(c.cfg.URLs)
		resp, err := c.send(ctx, c.cfg.URLs[i], r, body)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
			}
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		c.current = i
		c.mu.Unlock()
		return c.finish(r, resp)
	}
	return fmt.Errorf("%s %s: no web service URL answered: %w", r.Method, r.Path, errors.Join(errs...))
}

func (c *Client) send(ctx context.Context, base string, r Request, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.Path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	return c.http.Do(req)
}

func (c *Client) finish(r Request, resp *http.Response) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", r.Method, r.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &Error{Method: r.Method, Path: r.Path, Status: resp.StatusCode}
		var eb struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(b, &eb) == nil && eb.Reason != "" {
			e.Reason = eb.Reason
		} else {
			e.Reason = strings.TrimSpace(string(b))
		}
		return e
	}
	if r.Out == nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, r.Out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", r.Method, r.Path, err)
	}
	return nil
}

// Get is Do with GET.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.Do(ctx, Request{Method: http.MethodGet, Path: path, Out: out})
}
