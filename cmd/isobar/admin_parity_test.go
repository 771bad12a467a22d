package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestAdminExamineMessage checks that examine-message sends -i and -m
// (the rest client drops a query string from a plain endpoint) and that
// it decodes a batch as peek-messages does, showing its first message.
func TestAdminExamineMessage(t *testing.T) {
	url, serviceURL, cluster := adminRegion(t)
	a := adminRunner{t, url}
	a.ok("tenants", "create", "ex", "-c", cluster)
	a.ok("namespaces", "create", "ex/ns")
	const tp = "persistent://ex/ns/examined"

	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: serviceURL, Logger: quietPulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	single, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if _, err := single.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(m)}); err != nil {
			t.Fatal(err)
		}
	}
	single.Close()
	batched, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tp, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 2)
	for _, m := range []string{"b1", "b2"} {
		batched.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(m), Properties: map[string]string{"which": m}},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { sent <- err })
	}
	if err := batched.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	batched.Close()

	type message struct {
		ID      string            `json:"messageId"`
		Props   map[string]string `json:"properties"`
		Payload []byte            `json:"payload"`
	}
	for _, tc := range []struct {
		args        []string
		payload     string
		batchSize   string
		idHasBatch  bool
		description string
	}{
		{[]string{"-i", "earliest", "-m", "2"}, "m2", "", false, "second from the first"},
		{[]string{"--initialPosition", "earliest", "--messagePosition", "1"}, "m1", "", false, "the first, long flags"},
		{[]string{"-i", "latest", "-m", "2"}, "m3", "", false, "second from the last"},
		{nil, "b1", "2", true, "the last entry, a batch of two: its first message"},
	} {
		var m message
		a.json(&m, append([]string{"topics", "examine-message", tp}, tc.args...)...)
		if string(m.Payload) != tc.payload || m.Props["batch-size"] != tc.batchSize || strings.HasSuffix(m.ID, ":-1:0") != tc.idHasBatch {
			t.Errorf("%s (%v): got %+v (payload %q)", tc.description, tc.args, m, m.Payload)
		}
		if tc.idHasBatch && m.Props["which"] != "b1" {
			t.Errorf("%s: the batch message's own properties are missing: %v", tc.description, m.Props)
		}
	}
	if out := a.ok("topics", "examine-message", tp); !strings.Contains(out, `"b1"`) || strings.Contains(out, "b2") {
		t.Errorf("examine-message of a batch, human form:\n%s", out)
	}
}

// TestAdminPulsarAdminFlagsAndPairs runs pulsar-admin's short flags, its
// single-dash -ttl and the get-/remove- verbs beside set- ones.
func TestAdminPulsarAdminFlagsAndPairs(t *testing.T) {
	url, _, cluster := adminRegion(t)
	// -u is the admin URL, as --admin-url and --web-service-url.
	a := adminRunner{t, "http://127.0.0.1:1"}
	viaU := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := run(ctx, append([]string{"admin", "-u", url}, args...)...)
		if err != nil {
			t.Fatalf("admin -u %s %s: %v\n%s", url, strings.Join(args, " "), err, out)
		}
		return out
	}
	viaU("tenants", "create", "par", "-r", "ops", "-c", cluster)
	if out := viaU("tenants", "get", "par"); !strings.Contains(out, "ops") || !strings.Contains(out, cluster) {
		t.Errorf("tenants create -r -c: %s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := run(ctx, "admin", "--web-service-url", url, "namespaces", "create", "par/ns", "-c", cluster); err != nil {
		t.Fatalf("--web-service-url: %v\n%s", err, out)
	}
	a = adminRunner{t, url}
	const ns = "par/ns"

	a.ok("namespaces", "set-retention", ns, "-t", "2h", "-s", "1G")
	if out := a.ok("namespaces", "get-retention", ns); !strings.Contains(out, "120 minutes") {
		t.Errorf("set-retention -t -s: %s", out)
	}
	a.ok("namespaces", "remove-retention", ns)
	if out := a.ok("namespaces", "get-retention", ns); out != "not set\n" {
		t.Errorf("after remove-retention: %q", out)
	}

	for _, flags := range [][]string{{"-ttl", "1h"}, {"--messageTTL", "1h"}, {"-ttl=1h"}, {"--ttl", "1h"}} {
		a.ok(append([]string{"namespaces", "set-message-ttl", ns}, flags...)...)
		if out := a.ok("namespaces", "get-message-ttl", ns); out != "3600\n" {
			t.Errorf("set-message-ttl %v: %q", flags, out)
		}
		a.ok("namespaces", "remove-message-ttl", ns)
		if out := a.ok("namespaces", "get-message-ttl", ns); out != "not set\n" {
			t.Errorf("after remove-message-ttl: %q", out)
		}
	}

	if out := a.ok("namespaces", "get-deduplication", ns); out != "not set\n" {
		t.Errorf("get-deduplication before: %q", out)
	}
	a.ok("namespaces", "set-deduplication", ns, "-e")
	if out := a.ok("namespaces", "get-deduplication", ns); out != "true\n" {
		t.Errorf("set-deduplication -e: %q", out)
	}
	a.ok("namespaces", "set-deduplication", ns, "-d")
	if out := a.ok("namespaces", "get-deduplication", ns, "--json"); out != "false\n" {
		t.Errorf("set-deduplication -d: %q", out)
	}
	a.ok("namespaces", "remove-deduplication", ns)
	if out := a.ok("namespaces", "get-deduplication", ns, "--json"); out != "null\n" {
		t.Errorf("after remove-deduplication: %q", out)
	}

	a.ok("namespaces", "set-clusters", ns, "-c", cluster)
	a.ok("namespaces", "set-subscription-expiration-time", ns, "-t", "30")
	if out := a.ok("namespaces", "get-subscription-expiration-time", ns); out != "30\n" {
		t.Errorf("set-subscription-expiration-time -t: %q", out)
	}
	a.ok("namespaces", "set-auto-topic-creation", ns, "-e", "-t", "partitioned", "-n", "2")
	a.ok("namespaces", "remove-auto-topic-creation", ns)
	if out := a.ok("namespaces", "get-auto-topic-creation", ns); !strings.Contains(out, "not set") {
		t.Errorf("after remove-auto-topic-creation: %q", out)
	}
	a.ok("namespaces", "set-auto-subscription-creation", ns, "-d")
	if out := a.ok("namespaces", "get-auto-subscription-creation", ns); !strings.Contains(out, `"allowAutoSubscriptionCreation":false`) {
		t.Errorf("set-auto-subscription-creation -d: %q", out)
	}
	a.ok("namespaces", "remove-auto-subscription-creation", ns)
	if out := a.ok("namespaces", "get-auto-subscription-creation", ns); out != "not set\n" {
		t.Errorf("after remove-auto-subscription-creation: %q", out)
	}
	a.ok("namespaces", "set-compaction-threshold", ns, "-t", "10M")
	a.ok("namespaces", "remove-compaction-threshold", ns)
	if out := a.ok("namespaces", "get-compaction-threshold", ns); out != "not set\n" {
		t.Errorf("after remove-compaction-threshold: %q", out)
	}
	a.ok("namespaces", "delete", ns)
	a.ok("tenants", "delete", "par")
}

// TestUnknownCommandSuggests checks that a mistyped verb gets the closest
// names, not the noun's whole list.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     []string
		unwanted string
	}{
		{[]string{"admin", "namespaces", "set-retension"}, []string{`unknown command "set-retension"`, "did you mean set-retention"}, "set-message-ttl"},
		{[]string{"admin", "namespaces"}, []string{"missing command", "isobar admin namespaces --help"}, "set-retention"},
		{[]string{"admin", "tenants", "lst"}, []string{"did you mean list"}, ""},
		{[]string{"perf", "produse"}, []string{"did you mean produce"}, ""},
		{[]string{"devv"}, []string{"did you mean dev"}, ""},
		{[]string{"admin", "namespaces", "zzzzzzzz"}, []string{"unknown command", "--help"}, "set-retention"},
	} {
		_, err := run(context.Background(), tc.args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d), want a usage error", tc.args, err, exitCode(err))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", tc.args, err, w)
			}
		}
		if tc.unwanted != "" && strings.Contains(err.Error(), tc.unwanted) {
			t.Errorf("%v: %q lists %q", tc.args, err, tc.unwanted)
		}
	}
}

// TestHelpSaysWhatIsEnforced: the subscription expiration time is
// enforced (docs/admin.md), so its help must not call it stored only.
func TestHelpSaysWhatIsEnforced(t *testing.T) {
	cmd, _, err := newRootCmd().Find([]string{"admin", "namespaces", "set-subscription-expiration-time"})
	if err != nil {
		t.Fatal(err)
	}
	if f := cmd.Flags().Lookup("time"); f == nil || strings.Contains(f.Usage, "stored only") || f.Shorthand != "t" {
		t.Errorf("set-subscription-expiration-time --time: %+v", f)
	}
}
