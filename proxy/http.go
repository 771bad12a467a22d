package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/auth"
)

// maxHTTPRedirects bounds the brokers' redirects the proxy follows for
// one request.
const maxHTTPRedirects = 10

// hopHeaders are the hop-by-hop headers, not forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// HTTP is the handler of the proxy's HTTP ports: every request (the
// admin REST API, HTTP lookups) goes to a live broker, the proxy
// following the brokers' 307 and 308 redirects to the region's brokers
// itself. With authentication on, the caller wraps it (with /healthz,
// /readyz and /metrics, which it serves itself) in Auth().HTTP, which
// checks the client's credentials; the request then goes on with the
// proxy's own, naming the client (X-Original-Principal).
func (s *Server) HTTP() http.Handler {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: s.cfg.HandshakeTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       s.brokerTLS,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   s.cfg.HandshakeTimeout,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := s.forwardHTTP(client, w, r)
		s.m.httpRequest(r.Context(), status)
	})
}

// Auth is the proxy's client authentication.
func (s *Server) Auth() *auth.Server { return s.auth }

// forwardHTTP forwards r and returns the status answered.
func (s *Server) forwardHTTP(client *http.Client, w http.ResponseWriter, r *http.Request) int {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, int64(s.cfg.MaxRequestBytes)+1))
		if err != nil {
			return httpError(w, http.StatusBadRequest, "proxy: reading the request body: "+err.Error())
		}
		if len(b) > s.cfg.MaxRequestBytes {
			return httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("proxy: the request body is larger than %d bytes (proxy.maxRequestBytes)", s.cfg.MaxRequestBytes))
		}
		body = b
	}
	header, err := s.forwardHeader(r)
	if err != nil {
		return httpError(w, http.StatusServiceUnavailable, err.Error())
	}
	skip := map[string]bool{}
	var target *url.URL // set by a redirect to a broker
	for hop := 0; hop <= maxHTTPRedirects; hop++ {
		u := target
		var b brokerInfo
		if u == nil {
			var ok bool
			b, ok = s.pick(skip)
			if !ok {
				msg := "proxy: no live broker in region " + s.cfg.Region
				if len(skip) > 0 {
					msg = fmt.Sprintf("proxy: none of the %d live brokers of region %s could be reached", len(skip), s.cfg.Region)
				}
				return httpError(w, http.StatusServiceUnavailable, msg)
			}
			base, err := s.brokerHTTP(b)
			if err != nil {
				return httpError(w, http.StatusServiceUnavailable, "proxy: "+err.Error())
			}
			if u, err = url.Parse(base); err != nil {
				return httpError(w, http.StatusBadGateway, "proxy: broker "+b.ID+": "+err.Error())
			}
			u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
		if err != nil {
			return httpError(w, http.StatusBadRequest, "proxy: "+err.Error())
		}
		req.Header = header.Clone()
		req.ContentLength = int64(len(body))
		resp, err := client.Do(req)
		if err != nil {
			var oe *net.OpError
			if target == nil && errors.As(err, &oe) && oe.Op == "dial" {
				skip[b.ID] = true // not delivered: another broker may take it
				continue
			}
			return httpError(w, http.StatusBadGateway, fmt.Sprintf("proxy: %s %s: %v", r.Method, u.Redacted(), err))
		}
		if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect {
			if next, ok := s.redirectTarget(resp); ok {
				resp.Body.Close()
				target = next
				continue
			}
		}
		defer resp.Body.Close()
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return resp.StatusCode
	}
	return httpError(w, http.StatusBadGateway, fmt.Sprintf("proxy: more than %d redirects", maxHTTPRedirects))
}

// redirectTarget is where a broker's redirect points when it points to a
// broker of the region (on the listener the proxy uses); false for any
// other address, which the client is given as it is.
func (s *Server) redirectTarget(resp *http.Response) (*url.URL, bool) {
	loc, err := resp.Location()
	if err != nil {
		return nil, false
	}
	b, ok := s.brokerByHTTP(loc.Host)
	if !ok {
		return nil, false
	}
	base, err := s.brokerHTTP(b)
	if err != nil {
		return nil, false
	}
	bu, err := url.Parse(base)
	if err != nil {
		return nil, false
	}
	next := *loc
	next.Scheme, next.Host = bu.Scheme, bu.Host
	return &next, true
}

// forwardHeader is the header a forwarded request carries: the client's
// without hop-by-hop headers; with authentication on, the proxy's token
// in place of the client's credentials and the client's role in
// X-Original-Principal.
func (s *Server) forwardHeader(r *http.Request) (http.Header, error) {
	h := r.Header.Clone()
	for _, k := range hopHeaders {
		h.Del(k)
	}
	if c := r.Header.Get("Connection"); c != "" {
		for _, k := range strings.Split(c, ",") {
			h.Del(strings.TrimSpace(k))
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h.Get("X-Forwarded-For"); prior != "" {
			host = prior + ", " + host
		}
		h.Set("X-Forwarded-For", host)
	}
	if !s.auth.Enabled() {
		return h, nil
	}
	id, _ := auth.IdentityFrom(r.Context())
	h.Del("Authorization")
	h.Set(auth.OriginalPrincipalHeader, id.Role)
	method, data, err := s.proxyCredentials()
	if err != nil {
		return nil, err
	}
	if method == auth.TokenMethod {
		h.Set("Authorization", "Bearer "+string(data))
	}
	return h, nil
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
}

// httpError answers with the admin API's error shape.
func httpError(w http.ResponseWriter, status int, reason string) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"reason": reason})
	_, _ = w.Write(b)
	return status
}
