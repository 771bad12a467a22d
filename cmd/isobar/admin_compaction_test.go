package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestAdminCompaction: topics compact and compaction-status (-w waits)
// against a region, the topic's compaction threshold verbs, and their
// usage errors.
func TestAdminCompaction(t *testing.T) {
	url, serviceURL, _ := adminRegion(t)
	a := adminRunner{t, url}
	const tp = "persistent://public/default/cli-compact"
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: serviceURL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{"1", "2", "3"} {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: "k", Payload: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	var st struct {
		Status    string `json:"status"`
		LastError string `json:"lastError"`
	}
	a.json(&st, "topics", "compaction-status", tp)
	if st.Status != "NOT_RUN" {
		t.Fatalf("status before compacting: %+v", st)
	}
	a.ok("topics", "compact", tp)
	a.json(&st, "topics", "compaction-status", tp, "-w")
	if st.Status != "SUCCESS" {
		t.Fatalf("status after compacting: %+v", st)
	}
	if out := a.ok("topics", "compaction-status", tp); !strings.Contains(out, "SUCCESS") {
		t.Errorf("compaction-status: %q", out)
	}
	a.fails(1, []string{"404"}, "topics", "compact", "persistent://public/default/none")

	a.ok("topics", "set-compaction-threshold", tp, "-t", "10M")
	if out := a.ok("topics", "get-compaction-threshold", tp); out != "10485760\n" {
		t.Errorf("get-compaction-threshold: %q", out)
	}
	a.ok("topics", "remove-compaction-threshold", tp)
	if out := a.ok("topics", "get-compaction-threshold", tp); out != "not set\n" {
		t.Errorf("get-compaction-threshold after remove: %q", out)
	}

	for _, args := range [][]string{
		{"topics", "set-compaction-threshold", tp},
		{"topics", "set-compaction-threshold", tp, "-t", "lots"},
		{"topics", "compact"},
	} {
		out, err := a.run(args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("admin %s: %v %q, want a usage error", strings.Join(args, " "), err, out)
		}
	}
}
