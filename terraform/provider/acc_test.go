package provider

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/isobar-mq/isobar/region"
	"github.com/isobar-mq/isobar/terraform/provider/client"
)

// The acceptance tests drive a real OpenTofu (built by
// scripts/install-tofu.sh into .bin/tofu, or TF_ACC_TERRAFORM_PATH) through
// terraform-plugin-testing against a real three-region federation started
// in this process, shared by the package's tests (each uses tenants of
// its own) and stopped by TestMain.

// regionNames are the test federation's regions, named as in the
// examples (terraform/examples, docs) so that those apply to it unchanged.
var regionNames = []string{"us-east", "eu-west", "ap-south"}

var fed struct {
	once sync.Once
	dir  string
	f    *region.Federation
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fed.f != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		fed.f.Shutdown(ctx)
		cancel()
	}
	if fed.dir != "" {
		os.RemoveAll(fed.dir)
	}
	os.Exit(code)
}

// federation returns the shared federation (three regions us-east, eu-west and ap-south on
// free loopback ports), starting it on first use.
func federation(t *testing.T) *region.Federation {
	t.Helper()
	fed.once.Do(func() {
		fed.dir, fed.err = os.MkdirTemp("", "isobar-tf-")
		if fed.err != nil {
			return
		}
		cfg := region.FederationConfig{GlobalDir: filepath.Join(fed.dir, "global")}
		for _, name := range regionNames {
			c := region.Config{Name: name, DataDir: filepath.Join(fed.dir, name), Bookies: 3, Brokers: 1}
			c.Replicator.ScanInterval = 200 * time.Millisecond
			cfg.Regions = append(cfg.Regions, c)
		}
		logger := slog.New(slog.DiscardHandler)
		if os.Getenv("ISOBAR_TEST_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		fed.f, fed.err = region.StartFederation(ctx, cfg, region.Deps{Logger: logger})
	})
	if fed.err != nil {
		t.Fatalf("start federation: %v", fed.err)
	}
	return fed.f
}

// accTest prepares an acceptance test: it skips without OpenTofu, sets
// the environment terraform-plugin-testing needs to run OpenTofu with
// this provider in-process, and returns the federation.
func accTest(t *testing.T) *region.Federation {
	t.Helper()
	if testing.Short() {
		t.Skip("provider acceptance test: skipped with -short")
	}
	tofu := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tofu == "" {
		p, err := filepath.Abs("../../.bin/tofu")
		if err != nil {
			t.Fatal(err)
		}
		tofu = p
	}
	if _, err := os.Stat(tofu); err != nil {
		t.Skipf("OpenTofu not found at %s: run scripts/install-tofu.sh (or set TF_ACC_TERRAFORM_PATH) to run the provider's acceptance tests", tofu)
	}
	rc := filepath.Join(t.TempDir(), "tofurc")
	if err := os.WriteFile(rc, []byte("disable_checkpoint = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"TF_ACC":                    "1",
		"TF_ACC_TERRAFORM_PATH":     tofu,
		"TF_ACC_PROVIDER_NAMESPACE": "isobar-mq", // as the examples' required_providers say
		"TF_ACC_PROVIDER_HOST":      "registry.opentofu.org",
		"TF_CLI_CONFIG_FILE":        rc,
		"CHECKPOINT_DISABLE":        "1",
		EnvWebServiceURL:            "",
		EnvToken:                    "",
		EnvTokenFile:                "",
	} {
		t.Setenv(k, v)
	}
	return federation(t)
}

// factories runs this provider in the test's process.
var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"isobar": providerserver.NewProtocol6WithError(New("test")()),
}

// providerBlock names the provider as users do (isobar-mq/isobar) and
// configures it with every region's web service URL and the given retry
// timeout.
func providerBlock(f *region.Federation, retry string) string {
	return fmt.Sprintf(`
terraform {
  required_providers {
    isobar = { source = "isobar-mq/isobar" }
  }
}
provider "isobar" {
  web_service_url = [%s]
  retry_timeout   = %q
}
`, strings.Join(webServiceURLs(f), ", "), retry)
}

// webServiceURLs are the regions' admin URLs, quoted.
func webServiceURLs(f *region.Federation) []string {
	var urls []string
	for _, r := range f.Regions {
		urls = append(urls, fmt.Sprintf("%q", r.Endpoints().WebServiceURL))
	}
	return urls
}

// admin is a REST client for out-of-band changes and checks, on region i.
func admin(t *testing.T, f *region.Federation, i int) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{URLs: []string{f.Regions[i].Endpoints().WebServiceURL}, RetryTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// do is an admin call that must succeed.
func do(t *testing.T, c *client.Client, method, path string, body any) {
	t.Helper()
	if err := c.Do(context.Background(), client.Request{Method: method, Path: path, Body: body}); err != nil {
		t.Fatal(err)
	}
}
