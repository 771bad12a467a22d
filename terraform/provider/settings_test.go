package provider

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// TestAccProviderSettings: the provider reaches the federation through an
// https proxy that it trusts by tls_trust_certs_file, skips a URL that
// cannot be reached, and sends the token from token_file with every
// request; then the same from the environment variables.
func TestAccProviderSettings(t *testing.T) {
	f := accTest(t)
	target, err := url.Parse(f.Regions[0].Endpoints().WebServiceURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	auth := map[string]int{} // Authorization header -> requests
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.Header.Get("Authorization")]++
		mu.Unlock()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sawOnly := func(header string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			mu.Lock()
			defer mu.Unlock()
			if auth[header] == 0 || len(auth) != 1 {
				return fmt.Errorf("requests by Authorization header: %v, want all %q", auth, header)
			}
			clear(auth)
			return nil
		}
	}
	head := `
terraform {
  required_providers {
    isobar = { source = "isobar-mq/isobar" }
  }
}
`
	tenant := func(role string) string {
		return fmt.Sprintf(`
resource "isobar_tenant" "t" {
  name        = "tf-settings"
  admin_roles = [%q]
}`, role)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      head + `provider "isobar" {}` + tenant("a"),
				ExpectError: regexp.MustCompile(`No web service URL`),
			},
			{
				Config: head + fmt.Sprintf(`
provider "isobar" {
  web_service_url = [%q]
  token           = "x"
  token_file      = %q
  retry_timeout   = "soon"
}`, proxy.URL, tokenFile) + tenant("a"),
				ExpectError: regexp.MustCompile(`(?s)Conflicting settings.*Bad retry_timeout`),
			},
			{
				// Not trusted: the certificate error is the diagnostic.
				Config: head + fmt.Sprintf(`
provider "isobar" {
  web_service_url = [%q]
  retry_timeout   = "0s"
}`, proxy.URL) + tenant("a"),
				ExpectError: regexp.MustCompile(`certificate`),
			},
			{
				Config: head + fmt.Sprintf(`
provider "isobar" {
  web_service_url      = [%q, %q]
  token_file           = %q
  tls_trust_certs_file = %q
}`, dead.URL, proxy.URL, tokenFile, ca) + tenant("a"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("isobar_tenant.t", "admin_roles.#", "1"),
					sawOnly("Bearer from-file"),
				),
			},
			{
				PreConfig: func() {
					mu.Lock()
					clear(auth) // the last step's plan after apply used the file
					mu.Unlock()
					t.Setenv(EnvWebServiceURL, dead.URL+", "+proxy.URL)
					t.Setenv(EnvToken, "from-env")
					t.Setenv(EnvTLSTrustCertsFile, ca)
				},
				Config: head + `provider "isobar" {}` + tenant("b"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckTypeSetElemAttr("isobar_tenant.t", "admin_roles.*", "b"),
					sawOnly("Bearer from-env"),
				),
			},
		},
	})
}
