package broker_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// A topic's own backlog quota (POST .../backlogQuota) replaces its
// namespace's of the same type; removing it brings the namespace's back.
// Refused requests change nothing.
func TestTopicBacklogQuota(t *testing.T) {
	e, _ := policyEnv(t, "public/tbq", &policy.Policies{BacklogQuotaMap: map[string]policy.BacklogQuota{
		policy.DestinationStorage: {LimitSize: 1 << 30, Policy: policy.ProducerException}}})
	srv := e.adminServer()
	const tp = "persistent://public/tbq/t"
	base := srv.URL + "/admin/v2/persistent/public/tbq/t"
	quota := base + "/backlogQuota?backlogQuotaType=destination_storage"
	adminOK(t, "POST", quota, `{"limitSize":1000,"policy":"producer_exception"}`, http.StatusNoContent)
	for _, bad := range []struct{ url, body string }{
		{base + "/backlogQuota?backlogQuotaType=bogus", `{"limitSize":1,"policy":"producer_exception"}`},
		{quota, `{"limitSize":1,"policy":"nope"}`},
		{quota, `{"limitSize":-5,"policy":"producer_exception"}`},
		{quota, `{"limitSize":`},
		{quota, `null`},
	} {
		adminOK(t, "POST", bad.url, bad.body, http.StatusBadRequest)
	}
	adminOK(t, "DELETE", base+"/backlogQuota?backlogQuotaType=bogus", "", http.StatusBadRequest)
	if status, body := getBody(t, base+"/backlogQuotaMap"); status != 200 || !strings.Contains(body, `"limitSize":1000`) || strings.Contains(body, "message_age") {
		t.Fatalf("GET backlogQuotaMap: %d %s", status, body)
	}
	if status, body := getBody(t, base+"/backlogQuotaMap?applied=true"); status != 200 || !strings.Contains(body, `"limitSize":1000`) {
		t.Fatalf("GET backlogQuotaMap?applied: %d %s", status, body)
	}

	c := e.client()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	produce(t, p, strings.Repeat("x", 100), 20, nil)
	p.Close()
	e.b.MaintainOnce(context.Background())
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceeded") {
		t.Fatalf("producer over the topic's quota: %v", err)
	}

	// Without the topic's quota the namespace's (1 GiB) is in force.
	adminOK(t, "DELETE", quota, "", http.StatusNoContent)
	if status, _ := getBody(t, base+"/backlogQuotaMap"); status != http.StatusNoContent {
		t.Fatalf("GET backlogQuotaMap after DELETE: %d, want 204", status)
	}
	if status, body := getBody(t, base+"/backlogQuotaMap?applied=true"); status != 200 || !strings.Contains(body, `"limitSize":1073741824`) {
		t.Fatalf("applied after DELETE: %d %s, want the namespace's", status, body)
	}
	e.b.MaintainOnce(context.Background())
	p, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tp})
	if err != nil {
		t.Fatalf("producer under the namespace's quota: %v", err)
	}
	p.Close()
}

// A topic's own deduplicationEnabled replaces its namespace's: with it
// on, a message resent with a sequence id already stored is dropped.
func TestTopicDeduplicationEnabled(t *testing.T) {
	e, _ := policyEnv(t, "public/tdd", &policy.Policies{})
	srv := e.adminServer()
	url := srv.URL + "/admin/v2/persistent/public/tdd/on/deduplicationEnabled"
	adminOK(t, "POST", url, `maybe`, http.StatusBadRequest)
	if status, _ := getBody(t, url); status != http.StatusNoContent {
		t.Fatalf("GET after a refused POST: %d, want 204", status)
	}
	adminOK(t, "POST", url, `true`, http.StatusNoContent)
	if status, body := getBody(t, url); status != 200 || strings.TrimSpace(body) != "true" {
		t.Fatalf("GET deduplicationEnabled: %d %s", status, body)
	}
	if status, body := getBody(t, srv.URL+"/admin/v2/persistent/public/tdd/off/deduplicationEnabled?applied=true"); status != 200 || strings.TrimSpace(body) != "false" {
		t.Fatalf("applied on a topic without its own: %d %s", status, body)
	}

	stored := func(tp string) int {
		c := e.client()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tp, Name: "resender", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i, seq := range []int64{1, 2, 2, 3, 1} {
			seq := seq
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte{byte('a' + i)}, SequenceID: &seq}); err != nil {
				t.Fatal(err)
			}
		}
		// A last message with a fresh sequence id marks the end.
		last := int64(10)
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("end"), SequenceID: &last}); err != nil {
			t.Fatal(err)
		}
		n := 0
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			cons.Ack(m)
			if string(m.Payload()) == "end" {
				return n
			}
			n++
		}
	}
	if got := stored("persistent://public/tdd/on"); got != 3 {
		t.Fatalf("with the topic's deduplication on: %d messages stored before the end, want 3", got)
	}
	if got := stored("persistent://public/tdd/off"); got != 5 {
		t.Fatalf("without deduplication: %d messages stored before the end, want 5", got)
	}
}

// getBody GETs url and answers the status and the body.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
