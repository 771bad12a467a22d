package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/console"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Result()
}

// TestHandler: the pages, their script and style are served with a
// policy that keeps them to their origin; /console redirects; only GET
// and HEAD are answered.
func TestHandler(t *testing.T) {
	h := console.Handler()
	for path, ctype := range map[string]string{
		"/console/":          "text/html",
		"/console/app.js":    "javascript",
		"/console/style.css": "text/css",
	} {
		r := get(t, h, "GET", path)
		body, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 || !strings.Contains(r.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s: %s, %q, %d bytes", path, r.Status, r.Header.Get("Content-Type"), len(body))
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	if r := get(t, h, "GET", "/console"); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %s to %q", r.Status, r.Header.Get("Location"))
	}
	if r := get(t, h, "GET", "/console/nothing.js"); r.StatusCode != 404 {
		t.Errorf("GET /console/nothing.js: %s", r.Status)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		if r := get(t, h, m, "/console/"); r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /console/: %s", m, r.Status)
		}
	}
}

// TestAssetsSelfContained: the embedded files name no other host (no
// CDN, no web fonts) and the script never sets HTML from strings, so what
// the admin API returns is only ever shown as text.
func TestAssetsSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import`)
	dir := os.DirFS("assets")
	err := fs.WalkDir(dir, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(dir, path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to something outside the console: %q", path, m)
		}
		if strings.HasSuffix(path, ".css") && strings.Contains(string(b), "url(") {
			t.Errorf("%s loads a url(): the console's style uses none", path)
		}
		if strings.HasSuffix(path, ".js") {
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
				if strings.Contains(string(b), bad) {
					t.Errorf("%s uses %s: build elements and set text instead", path, bad)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
