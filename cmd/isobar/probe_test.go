package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready: no etcd leader", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)

	if out, err := run(context.Background(), "probe", srv.URL+"/ok"); err != nil || out != "" {
		t.Fatalf("probe of a 200: %q, %v", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{srv.URL + "/busy"}, "503 Service Unavailable: not ready: no etcd leader", 1},
		{[]string{srv.URL + "/missing"}, "404 Not Found", 1},
		{[]string{"--timeout", "200ms", srv.URL + "/slow"}, "no answer in time", 1},
		{[]string{"http://127.0.0.1:1/readyz"}, "connection refused", 1},
		{[]string{"127.0.0.1:8080/readyz"}, "is not an http:// or https:// URL", 1},
		{[]string{}, "want exactly one URL argument", 2},
		{[]string{"--timeout", "0s", srv.URL}, "must be positive", 2},
	} {
		start := time.Now()
		_, err := run(context.Background(), append([]string{"probe"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != tc.code {
			t.Errorf("probe %v: %v (exit %d), want %q (exit %d)", tc.args, err, exitCode(err), tc.want, tc.code)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("probe %v took %v", tc.args, d)
		}
	}
}
