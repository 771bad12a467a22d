package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/sirupsen/logrus"

	"github.com/isobar-mq/isobar/internal/testcluster"
)

// TestStandaloneSecure runs `isobar standalone --secure` twice on one
// data directory: endpoints.json names the TLS URLs, the CA and the
// superuser token; pulsaradmin over HTTPS and pulsar-client-go over
// pulsar+ssl:// with that token manage and use it; the second start
// reuses the secrets, so the first start's token still works.
func TestStandaloneSecure(t *testing.T) {
	dir := t.TempDir()
	var ca []byte
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := run(ctx, "standalone", "--secure", "--data-dir", dir, "--broker-port", "3700", "--http-port", "3701",
				"--broker-tls-port", "3702", "--https-port", "3703", "--log-level", "error")
			done <- err
		}()
		path := filepath.Join(dir, "endpoints.json")
		testcluster.WaitFor(t, 90*time.Second, func() bool {
			select {
			case err := <-done:
				t.Fatalf("standalone exited early: %v", err)
			default:
			}
			_, err := os.Stat(path)
			return err == nil
		})
		var eps devEndpoints
		raw, err := os.ReadFile(path)
		if err != nil || json.Unmarshal(raw, &eps) != nil {
			t.Fatalf("endpoints.json: %s %v", raw, err)
		}
		e := eps.Regions[0]
		if e.ServiceURLTLS != "pulsar+ssl://127.0.0.1:3702" || e.WebServiceURLTLS != "https://127.0.0.1:3703" ||
			!filepath.IsAbs(eps.CAFile) || !filepath.IsAbs(eps.TokenFile) {
			t.Fatalf("endpoints %s", raw)
		}
		caNow, err := os.ReadFile(eps.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		if round == 1 && !bytes.Equal(ca, caNow) {
			t.Error("the restart made a new CA")
		}
		ca = caNow

		adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.WebServiceURLTLS, TLSTrustCertsFilePath: eps.CAFile, TokenFile: eps.TokenFile})
		if err != nil {
			t.Fatal(err)
		}
		tenant := fmt.Sprintf("t%d", round)
		if err := adm.Tenants().Create(utils.TenantData{Name: tenant, AllowedClusters: []string{"standalone"}}); err != nil {
			t.Fatalf("create tenant over HTTPS: %v", err)
		}
		if err := adm.Namespaces().CreateNamespace(tenant + "/ns"); err != nil {
			t.Fatalf("create namespace over HTTPS: %v", err)
		}
		anon, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: e.WebServiceURLTLS, TLSTrustCertsFilePath: eps.CAFile})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anon.Tenants().List(); err == nil {
			t.Error("listed tenants without a token")
		}

		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: e.ServiceURLTLS, TLSTrustCertsFilePath: eps.CAFile,
			Authentication: pulsar.NewAuthenticationTokenFromFile(eps.TokenFile), OperationTimeout: 20 * time.Second, Logger: quietPulsarLogger(),
			EnableTransaction: true}) // on by default in a standalone
		if err != nil {
			t.Fatal(err)
		}
		topic := "persistent://" + tenant + "/ns/t"
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		if _, err := p.Send(sctx, &pulsar.ProducerMessage{Payload: []byte("secure")}); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Receive(sctx)
		if err != nil || string(m.Payload()) != "secure" {
			t.Fatalf("receive over TLS: %v", err)
		}
		// Transactions are on: a committed message arrives.
		txn, err := c.NewTransaction(time.Minute)
		if err != nil {
			t.Fatalf("a standalone serves transactions by default: %v", err)
		}
		if _, err := p.Send(sctx, &pulsar.ProducerMessage{Payload: []byte("in a transaction"), Transaction: txn}); err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(sctx); err != nil {
			t.Fatal(err)
		}
		if m, err := cons.Receive(sctx); err != nil || string(m.Payload()) != "in a transaction" {
			t.Fatalf("receive the committed message: %v", err)
		}
		scancel()
		c.Close()

		// The CLI, with the same files.
		cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := run(cctx, "admin", "tenants", "list", "--admin-url", e.WebServiceURLTLS, "--token-file", eps.TokenFile, "--tls-trust-certs-file", eps.CAFile)
		if err != nil || !strings.Contains(out, tenant) {
			t.Errorf("isobar admin over HTTPS with a token: %v\n%s", err, out)
		}
		if out, err := run(cctx, "admin", "tenants", "list", "--admin-url", e.WebServiceURLTLS, "--tls-trust-certs-file", eps.CAFile); err == nil {
			t.Errorf("isobar admin without a token: listed\n%s", out)
		}
		tls := []string{"--service-url", e.ServiceURLTLS, "--token-file", eps.TokenFile, "--tls-trust-certs-file", eps.CAFile}
		if out, err := run(cctx, append([]string{"client", "produce", topic, "-m", "cli"}, tls...)...); err != nil {
			t.Errorf("isobar client produce over TLS: %v\n%s", err, out)
		}
		if out, err := run(cctx, append([]string{"client", "consume", topic, "-s", "cli", "-p", "Earliest", "-n", "3"}, tls...)...); err != nil || !strings.Contains(out, "cli") {
			t.Errorf("isobar client consume over TLS: %v\n%s", err, out)
		}
		ccancel()

		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("standalone stopped with %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("standalone did not stop")
		}
		os.Remove(path)
	}
}

func quietPulsarLogger() plog.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return plog.NewLoggerWithLogrus(l)
}
