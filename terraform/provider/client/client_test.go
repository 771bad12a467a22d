package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func reason(w http.ResponseWriter, status int, r string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"reason": r})
}

func TestErrorCarriesReason(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason(w, http.StatusPreconditionFailed, "policy: invalid: cluster nowhere does not exist")
	}))
	defer srv.Close()
	c, err := New(Config{URLs: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Do(context.Background(), Request{Method: http.MethodPut, Path: "/admin/v2/tenants/a", Body: map[string]any{}})
	var e *Error
	if !asError(err, &e) || e.Status != 412 || !strings.Contains(err.Error(), "cluster nowhere does not exist") {
		t.Fatalf("err = %v", err)
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// A concurrent modification (409, retriable on the server's table) and a
// 503 are retried; an "already exists" is not, unless the caller says so.
func TestRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case r.URL.Path == "/exists" && n < 3:
			reason(w, http.StatusConflict, "tenant a: policy: already exists")
		case r.URL.Path == "/exists":
			w.WriteHeader(http.StatusNoContent)
		case n == 1:
			reason(w, http.StatusConflict, "policy: concurrent modification")
		case n == 2:
			reason(w, http.StatusServiceUnavailable, "not ready")
		default:
			w.Write([]byte(`{"partitions":3}`))
		}
	}))
	defer srv.Close()
	var retried []string
	c, _ := New(Config{URLs: []string{srv.URL}, RetryTimeout: 10 * time.Second, OnRetry: func(_ context.Context, r Request, err error, _ time.Duration) {
		retried = append(retried, err.Error())
	}})
	var out struct{ Partitions int }
	if err := c.Get(context.Background(), "/p", &out); err != nil || out.Partitions != 3 || calls.Load() != 3 {
		t.Fatalf("err %v, out %+v, calls %d", err, out, calls.Load())
	}
	if len(retried) != 2 || !strings.Contains(retried[0], "concurrent modification") || !strings.Contains(retried[1], "503") {
		t.Fatalf("retries reported: %q", retried)
	}
	calls.Store(0)
	if err := c.Do(context.Background(), Request{Method: "PUT", Path: "/exists"}); !IsExists(err) || calls.Load() != 1 {
		t.Fatalf("err %v after %d calls, want an exists error after 1", err, calls.Load())
	}
	calls.Store(0)
	if err := c.Do(context.Background(), Request{Method: "PUT", Path: "/exists", RetryIf: IsExists}); err != nil || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}

// A request moves on to the next URL when the first cannot be reached,
// and the token goes along, also through a redirect to another server.
func TestFailoverAndToken(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			reason(w, http.StatusUnauthorized, "no token at the owner")
			return
		}
		w.Write([]byte(`"ok"`))
	}))
	defer owner.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			reason(w, http.StatusUnauthorized, "no token")
			return
		}
		http.Redirect(w, r, owner.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	c, _ := New(Config{URLs: []string{dead.URL, first.URL}, Token: "s3cret", RetryTimeout: -1})
	var s string
	if err := c.Get(context.Background(), "/admin/v2/x", &s); err != nil || s != "ok" {
		t.Fatalf("err %v, answer %q", err, s)
	}
	if c.current != 1 {
		t.Fatalf("current URL %d, want 1", c.current)
	}
}
