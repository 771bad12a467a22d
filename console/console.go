// Package console is the federation console: static pages (HTML, CSS
// and JavaScript, embedded in the binary) that the broker serves at
// /console/ on its HTTP port. The pages hold no data and the handler
// reads none: the browser calls the admin REST API with the user's
// token, so a page shows exactly what that token may see
// (docs/console.md).
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// Prefix is where the console is mounted on the broker's HTTP port.
const Prefix = "/console/"

//go:embed assets
var assets embed.FS

// Handler serves the console's files under Prefix; /console (no slash)
// redirects to it. It answers only GET and HEAD, and needs no
// credentials: the files are the same for everyone.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/console" {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		// The pages load nothing from elsewhere and talk only to the
		// origin that served them.
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
